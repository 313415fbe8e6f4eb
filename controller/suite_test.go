package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/crds"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
	"github.com/scribe-gitops/scribe/internal/yamlstream"
	"github.com/scribe-gitops/scribe/render"
)

// env is one kube-apiserver + etcd with Scribe's, Flux's and Argo CD's
// CRDs, shared by the tests of this package.
type env struct {
	cfg *rest.Config
	c   client.Client
}

var (
	envOnce sync.Once
	envVal  *env
	envErr  error
	envStop func() error
)

// testEnv starts the control plane once for the package.
func testEnv(t testing.TB) *env {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	envOnce.Do(func() {
		// Flux's sources and Kustomization and Argo CD's Application,
		// which the controllers read and watch; the Go module proxy serves
		// all three. Tests that need more install it (expInstallCRDs).
		files, err := crds.Files(context.Background(), "flux-source", "flux-kustomize", "argocd")
		if err != nil {
			envErr = err
			return
		}
		e := &envtest.Environment{
			CRDDirectoryPaths:     append(files, filepath.Join("..", "config", "crd", "bases")),
			ErrorIfCRDPathMissing: true,
			// On a loaded CI machine the CRDs take longer than the
			// default 10 s to be served.
			CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 3 * time.Minute},
		}
		cfg, err := e.Start()
		if err != nil {
			// A failed CRD install leaves the control plane running.
			_ = e.Stop()
			envErr = err
			return
		}
		envStop = e.Stop
		scheme, err := controller.NewScheme()
		if err != nil {
			envErr = err
			return
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			envErr = err
			return
		}
		envVal = &env{cfg: cfg, c: c}
	})
	if envErr != nil {
		t.Fatalf("start kube-apiserver: %v", envErr)
	}
	return envVal
}

// TestMain routes controller logs to stderr when SCRIBE_TEST_LOG is set
// and discards them otherwise. (Run as the controller's catalog checker,
// the binary is served by render's init before TestMain.)
func TestMain(m *testing.M) {
	if os.Getenv("SCRIBE_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	code := m.Run()
	if envStop != nil {
		_ = envStop()
	}
	os.Exit(code)
}

// startController runs Scribe's manager until the returned stop is called
// (or the test ends).
func startController(t testing.TB, e *env, namespace string, concurrency ...int) (stop func()) {
	t.Helper()
	workers := 2
	if len(concurrency) > 0 {
		workers = concurrency[0]
	}
	// No commit pacing: the tests' steps follow each other faster than
	// anyone's would, and none of them is about batching.
	return startControllerWith(t, e, namespace, controller.Options{Poll: 150 * time.Millisecond, Concurrency: workers, CommitInterval: -1})
}

// startControllerWith runs the manager with opts (DataDir is set here).
func startControllerWith(t testing.TB, e *env, namespace string, opts controller.Options) (stop func()) {
	t.Helper()
	return startControllerCfg(t, e.cfg, namespace, opts)
}

// namespace creates a namespace named from prefix, deleted when the test
// ends.
func (e *env) namespace(t testing.TB, prefix string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := e.c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), ns) })
	return ns
}

// startControllerCfg runs the manager against cfg (e.cfg, or a copy that
// counts requests).
func startControllerCfg(t testing.TB, cfg *rest.Config, namespace string, opts controller.Options) (stop func()) {
	t.Helper()
	stop, _ = startManager(t, cfg, cacheFor(namespace), nil, opts)
	return stop
}

// startManager runs the manager against cfg with a cache of cacheOpts;
// newClient, when set, makes the manager's client (a test's view of the
// cache). opts.DataDir defaults to a test temporary directory. It returns
// the manager's stop and its Publisher.
func startManager(t testing.TB, cfg *rest.Config, cacheOpts cache.Options, newClient client.NewClientFunc, opts controller.Options) (stop func(), p *controller.Publisher) {
	t.Helper()
	if opts.TestkubeAPI == "" {
		// Testkube's API, which no test reaches by its in-cluster name:
		// installed, it lists no executions.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"totals":{"results":0,"passed":0,"failed":0,"queued":0,"running":0},"filtered":{"results":0,"passed":0,"failed":0,"queued":0,"running":0},"results":[]}`))
		}))
		t.Cleanup(srv.Close)
		opts.TestkubeAPI = srv.URL
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cacheOpts,
		Controller:             controllerConfig(),
		NewClient:              newClient,
	})
	if err != nil {
		t.Fatal(err)
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	// The platform's egress allowance, as a platform configures it: the
	// tests' Prometheus, webhook receivers, registries and forges listen
	// on 127.0.0.1, which the zero Policy never reaches.
	opts.Egress = testEgress()
	p, err = controller.Setup(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				// Something ignores the cancellation: show what, before
				// the manager's grace period ends in an error.
				t.Logf("the manager has not stopped 20 s after its context was cancelled; Scribe's goroutines:\n%s", scribeGoroutines())
				<-done
			}
		})
	}
	t.Cleanup(stop)
	return stop, p
}

// fixture is one test's namespace, git repository and Repository.
type fixture struct {
	e    *env
	ns   string
	srv  *publishtest.GitServer
	url  string
	repo *scribev1.Repository
}

var nsCounter struct {
	sync.Mutex
	n int
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	e := testEnv(t)
	nsCounter.Lock()
	nsCounter.n++
	ns := fmt.Sprintf("t%d-%s", nsCounter.n, strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	nsCounter.Unlock()
	if len(ns) > 50 {
		ns = ns[:50]
	}
	ns = strings.TrimRight(ns, "-")
	ctx := context.Background()
	for _, n := range []string{ns, "flux-system"} {
		if err := e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, repoName, "main")
	// The Flux GitRepository the Repository names: each CR's own source
	// copies how Flux reaches the repository from it.
	gr := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "scribe"},
		Spec: sourcev1.GitRepositorySpec{URL: "http://git.flux-system.svc/" + repoName + ".git", Interval: metav1.Duration{Duration: time.Minute},
			SecretRef: &meta.LocalObjectReference{Name: "flux-git"}}}
	if err := e.c.Create(ctx, gr); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	vouchForRemote(t, e.c, url)
	f := &fixture{e: e, ns: ns, srv: srv, url: url}
	f.repo = &scribev1.Repository{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
		Spec: scribev1.RepositorySpec{
			Git:     &scribev1.GitRepositorySpec{URL: url, Branch: "main", Path: "clusters/dev"},
			Applier: scribev1.ApplierSpec{Kind: "Flux", Namespace: "flux-system", Name: "scribe"},
		},
	}
	return f
}

func (f *fixture) ctx() context.Context { return context.Background() }

// waitFor polls cond (at most 60 s) and fails with the last state it saw.
func waitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last state: %s", what, last)
}

// syncNames names the per-CR Flux Kustomizations as render does (a name
// over 63 characters is shortened with a hash), and remembers which custom
// resource each is for, for the labels playFlux gives a Kustomization it
// creates.
var syncNames = struct {
	once   sync.Once
	engine *render.Engine
	err    error
	of     sync.Map // Kustomization name → scribev1.ObjectIdentity of its CR
}{}

// kustomizationName is the per-CR Flux Kustomization render gives the
// custom resource kind ns/name.
func kustomizationName(kind, ns, name string) types.NamespacedName {
	syncNames.once.Do(func() { syncNames.engine, syncNames.err = render.New() })
	if syncNames.err != nil {
		panic(fmt.Sprintf("render engine: %v", syncNames.err))
	}
	src := scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: kind, Namespace: ns, Name: name}
	id, err := syncNames.engine.SyncObject(src, render.DefaultPublish())
	if err != nil {
		panic(fmt.Sprintf("sync object of %s %s/%s: %v", kind, ns, name, err))
	}
	syncNames.of.Store(id.Name, src)
	return types.NamespacedName{Namespace: id.Namespace, Name: id.Name}
}

// playFlux does what Flux's kustomize-controller does for the per-CR
// Kustomization once it has applied revision: the Kustomization exists (the
// root Kustomization created it from the .sync.yaml), its status records
// the applied (or failed) revision.
func (f *fixture) playFlux(t testing.TB, key types.NamespacedName, commit string, ready bool, reason, message string) {
	t.Helper()
	ctx := f.ctx()
	ks := &kustomizev1.Kustomization{}
	if err := f.e.c.Get(ctx, key, ks); apierrors.IsNotFound(err) {
		// The labels render puts on the sync object.
		v, ok := syncNames.of.Load(key.Name)
		if !ok {
			t.Fatalf("playFlux: %s is no name kustomizationName gave", key.Name)
		}
		src := v.(scribev1.ObjectIdentity)
		labels := map[string]string{"scribe.dev/kind": src.Kind, "scribe.dev/namespace": src.Namespace, "scribe.dev/name": src.Name}
		ks = &kustomizev1.Kustomization{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: labels},
			Spec:       f.syncSpec(t, src, commit),
		}
		if err := f.e.c.Create(ctx, ks); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	rev := "main@sha1:" + commit
	ks.Status.ObservedGeneration = ks.Generation
	ks.Status.LastAttemptedRevision = rev
	status := metav1.ConditionTrue
	if ready {
		ks.Status.LastAppliedRevision = rev
		reason, message = meta.ReconciliationSucceededReason, "Applied revision: "+rev
	} else {
		status = metav1.ConditionFalse
	}
	ks.Status.Conditions = []metav1.Condition{{
		Type: meta.ReadyCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: ks.Generation, LastTransitionTime: metav1.Now(),
	}}
	if err := f.e.c.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}
}

// syncSpec is the spec of the per-CR Kustomization of src as the root
// Kustomization applies it from the sync file of commit (under whichever
// Repository path holds it): the directory it applies and the source it
// reads (the custom resource's own GitRepository). A commit without the
// sync file gives what render writes for the fixture's Repository.
func (f *fixture) syncSpec(t testing.TB, src scribev1.ObjectIdentity, commit string) kustomizev1.KustomizationSpec {
	t.Helper()
	repoPath := "."
	if f.repo != nil && f.repo.Spec.Git != nil && f.repo.Spec.Git.Path != "" {
		repoPath = f.repo.Spec.Git.Path
	}
	spec := kustomizev1.KustomizationSpec{
		Interval: metav1.Duration{Duration: 10 * time.Minute}, Path: "./" + path.Join(repoPath, publish.OwnedDir(src)), Prune: true,
		SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: kustomizationName(src.Kind, src.Namespace, src.Name).Name, Namespace: "flux-system"},
	}
	out, err := publishtest.RunGit("", "--git-dir", f.srv.BareDir(repoName), "ls-tree", "-r", "--name-only", commit)
	if err != nil {
		return spec
	}
	file := publish.OwnedDir(src) + ".sync.yaml"
	for _, p := range strings.Fields(out) {
		if p != file && !strings.HasSuffix(p, "/"+file) {
			continue
		}
		docs, err := yamlstream.Split([]byte(f.fileAt(t, commit, p)))
		if err != nil {
			t.Fatalf("sync file %s at %s: %v", p, commit, err)
		}
		for _, d := range docs {
			ks := &kustomizev1.Kustomization{}
			if err := yaml.Unmarshal(d.Data, ks); err == nil && ks.Kind == "Kustomization" {
				spec.Path, spec.SourceRef = ks.Spec.Path, ks.Spec.SourceRef
			}
		}
		break
	}
	return spec
}

// podLabels are the labels of a rendered Deployment <workload>-<version>
// and its pods, as far as Scribe reads them: the selector's app label and
// the scribe.dev/workload label the controller's cache selects on.
func podLabels(deployment string) map[string]string {
	workload := deployment[:max(strings.LastIndex(deployment, "-"), 0)]
	return map[string]string{"app": deployment, controller.WorkloadLabel: workload}
}

// crashingPod creates a pod of deployment whose container has restarted
// seven times, as the kubelet reports a crash-looping one.
func (f *fixture) crashingPod(t *testing.T, deployment string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: deployment + "-abc", Namespace: f.ns, Labels: podLabels(deployment)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "ghcr.io/example/web:v2"}}},
	}
	if err := f.e.c.Create(f.ctx(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: 7}}
	if err := f.e.c.Status().Update(f.ctx(), pod); err != nil {
		t.Fatal(err)
	}
}

// deploymentReady creates or updates a Deployment as kube-controller-manager
// would report it once its pods run: available at its generation, or not.
func (f *fixture) deploymentReady(t *testing.T, name string, available bool) {
	t.Helper()
	ctx := f.ctx()
	d := &appsv1.Deployment{}
	err := f.e.c.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: name}, d)
	if apierrors.IsNotFound(err) {
		one := int32(1)
		d = &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: podLabels(name)},
			Spec: appsv1.DeploymentSpec{
				Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels(name)},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
				},
			},
		}
		if err := f.e.c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	d.Status.ObservedGeneration = d.Generation
	d.Status.Replicas, d.Status.UpdatedReplicas = 1, 1
	cond := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}
	prog := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}
	if available {
		d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UnavailableReplicas = 1, 1, 0
	} else {
		d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UnavailableReplicas = 0, 0, 1
		cond.Status, cond.Reason = corev1.ConditionFalse, "MinimumReplicasUnavailable"
		prog.Status, prog.Reason = corev1.ConditionFalse, "ProgressDeadlineExceeded"
	}
	d.Status.Conditions = []appsv1.DeploymentCondition{cond, prog}
	if err := f.e.c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
}

// scribeCommits lists Scribe's commits on main for an object, oldest first,
// with their trailers.
func (f *fixture) scribeCommits(t *testing.T, object string) []string {
	t.Helper()
	dir := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", f.url, dir)
	out := publishtest.Git(t, dir, "log", "--reverse", "--format=%H%x00%B%x01")
	var commits []string
	for _, rec := range strings.Split(out, "\x01") {
		sha, msg, ok := strings.Cut(strings.TrimSpace(rec), "\x00")
		if !ok {
			continue
		}
		for _, tr := range gitsink.Trailers(msg) {
			if tr[gitsink.TrailerObject] == object {
				commits = append(commits, sha)
			}
		}
	}
	return commits
}

// fileAt reads a file of the repository at a commit.
func (f *fixture) fileAt(t testing.TB, commit, path string) string {
	t.Helper()
	out, err := publishtest.RunGit("", "--git-dir", f.srv.BareDir(repoName), "show", commit+":"+path)
	if err != nil {
		return ""
	}
	return out
}

// cacheFor limits the manager's cache to the test's namespace and the
// applier namespace, so tests running side by side do not see each other.
func cacheFor(namespace string) cache.Options {
	return controller.CacheOptions(map[string]cache.Config{namespace: {}, "flux-system": {}})
}

// controllerConfig lets several managers in one process register the same
// controller names.
func controllerConfig() config.Controller {
	skip := true
	return config.Controller{SkipNameValidation: &skip}
}

// head is main's commit on the git server.
func (f *fixture) head(t *testing.T) string {
	t.Helper()
	return publishtest.Git(t, "", "--git-dir", f.srv.BareDir(repoName), "rev-parse", "refs/heads/main")
}

// waitBranchGone waits until branch is no longer on the git server.
func (f *fixture) waitBranchGone(t *testing.T, branch string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := publishtest.RunGit("", "--git-dir", f.srv.BareDir(repoName), "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
		if err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("branch %s is still on the git server after its merge", branch)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// commitMessage is the full message of a commit on the git server.
func (f *fixture) commitMessage(t *testing.T, commit string) (string, error) {
	t.Helper()
	return publishtest.RunGit("", "--git-dir", f.srv.BareDir(repoName), "log", "-1", "--format=%B", commit)
}

// deleteKustomization plays Flux pruning the per-CR Kustomization.
func (f *fixture) deleteKustomization(t *testing.T, key types.NamespacedName) {
	t.Helper()
	ks := &kustomizev1.Kustomization{}
	ks.Name, ks.Namespace = key.Name, key.Namespace
	if err := f.e.c.Delete(f.ctx(), ks); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// repoName is the test repository, owner/name as on a forge, so the fake
// GitHub serves its pull requests.
const repoName = "acme/exp"

// scribeGoroutines is the stacks of the goroutines running Scribe's code
// (not the test's), first what a stopping manager waits for: a whole dump
// is hundreds of informer goroutines, and CI keeps only its head.
func scribeGoroutines() string {
	var buf strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	var out []string
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(g, "scribe-gitops/scribe/") && !strings.Contains(g, "controller_test.") {
			out = append(out, g)
		}
	}
	return fmt.Sprintf("%d of %d goroutines\n%s", len(out), strings.Count(buf.String(), "goroutine "), strings.Join(out, "\n\n"))
}
