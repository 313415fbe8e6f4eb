package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// Argo CD in the loop: the real application-controller and repo-server
// (github.com/argoproj/argo-cd/v3, built by hack/build-argocd.sh), a
// Redis-protocol cache, Argo CD's CRDs and config objects, and the root
// Application that applies Scribe's sync files.
const (
	// ArgoCDNamespace is Argo CD's own namespace: its config, the
	// AppProjects, and the root Application.
	ArgoCDNamespace = "argocd"
	// ArgoRootApp is the root Application (Repository spec.applier.name):
	// it applies SyncPath, the sync index of every custom resource's
	// Application and AppProject.
	ArgoRootApp = "scribe"
	// ArgoRootProject is the root Application's AppProject: it may only
	// create Applications and AppProjects.
	ArgoRootProject = "scribe-root"
)

// ApplierSpec is the spec.applier of the loop's Repositories.
func (s *Stack) ApplierSpec() scribev1.ApplierSpec {
	if s.Applier == scribev1.ApplierArgoCD {
		return scribev1.ApplierSpec{Kind: scribev1.ApplierArgoCD, Namespace: ArgoCDNamespace, Name: ArgoRootApp}
	}
	return scribev1.ApplierSpec{Kind: scribev1.ApplierFlux, Namespace: "flux-system", Name: "scribe"}
}

// SyncObject is where the applier object of a custom resource of kind
// ("workload", "experiment") lives: the Flux Kustomization in flux-system,
// or the Argo CD Application in the custom resource's own namespace.
// Named <kind>.<ns>.<name>: a Flux name over 63 characters is shortened
// with a hash (templates/sync), which this does not do: the tests' names
// are short (TestLoopFluxAppliesAWorkloadWhoseSyncNameWouldBeNoLabelValue
// finds its Kustomization by the scribe.dev labels).
func (s *Stack) SyncObject(kind, ns, name string) types.NamespacedName {
	obj := kind + "." + ns + "." + name
	if s.Applier == scribev1.ApplierArgoCD {
		return types.NamespacedName{Namespace: ns, Name: obj}
	}
	return types.NamespacedName{Namespace: "flux-system", Name: obj}
}

// argoGVK is an Argo CD kind.
func argoGVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: kind}
}

// ArgoApplication reads an Application, or returns nil.
func (s *Stack) ArgoApplication(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(argoGVK("Application"))
	if err := s.Client.Get(ctx, key, u); err != nil {
		return nil, err
	}
	return u, nil
}

// startArgoCD installs Argo CD's CRDs and config objects, starts Redis,
// the repo-server and the application-controller, and creates the root
// AppProject and Application.
func (s *Stack) startArgoCD(ctx context.Context) error {
	dir, err := buildDir(s.logf, "build-argocd.sh")
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(dir, "crds")}, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute}); err != nil {
		return fmt.Errorf("install Argo CD's CRDs: %w", err)
	}
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ArgoCDNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ArgoCDNamespace, err)
	}
	if err := s.createArgoConfig(ctx, filepath.Join(dir, "config")); err != nil {
		return err
	}

	redis, _ := s.addr()
	if err := s.run("redis", filepath.Join(dir, "redis"), nil, "--addr="+redis); err != nil {
		return err
	}
	state := filepath.Join(s.Dir, "argocd")
	for _, d := range []string{"tls", "ssh", "gpg", "gnupg", "tmp"} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o700); err != nil {
			return err
		}
	}
	// kustomize (for the sync index and the directories) from the build,
	// git from the machine.
	env := []string{
		"KUBECONFIG=" + s.Kubeconfig,
		"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH"),
		"TMPDIR=" + filepath.Join(state, "tmp"),
		"ARGOCD_GPG_ENABLED=false",
		"ARGOCD_TLS_DATA_PATH=" + filepath.Join(state, "tls"),
		"ARGOCD_SSH_DATA_PATH=" + filepath.Join(state, "ssh"),
		"ARGOCD_GPG_DATA_PATH=" + filepath.Join(state, "gpg"),
		"ARGOCD_GNUPGHOME=" + filepath.Join(state, "gnupg"),
	}
	repoPort, _ := s.port()
	repoMetrics, _ := s.port()
	if err := s.run("argocd-repo-server", filepath.Join(dir, "argocd"), append(env, "ARGOCD_BINARY_NAME=argocd-repo-server"),
		"--address=127.0.0.1", "--port="+repoPort, "--metrics-address=127.0.0.1", "--metrics-port="+repoMetrics,
		"--redis="+redis, "--disable-tls", "--logformat=text"); err != nil {
		return err
	}
	ctrlMetrics, _ := s.port()
	// ARGOCD_FAKE_IN_CLUSTER: https://kubernetes.default.svc is the
	// KUBECONFIG's apiserver, with no cluster Secret (as Argo CD's own
	// local setup does).
	if err := s.run("argocd-application-controller", filepath.Join(dir, "argocd"),
		append(env, "ARGOCD_BINARY_NAME=argocd-application-controller", "ARGOCD_FAKE_IN_CLUSTER=true"),
		"--kubeconfig="+s.Kubeconfig, "--namespace="+ArgoCDNamespace, "--redis="+redis,
		"--repo-server=127.0.0.1:"+repoPort, "--repo-server-plaintext", "--metrics-port="+ctrlMetrics,
		"--hydrator-enabled=false", "--server-side-diff-enabled=false", "--logformat=text",
		// Applications in any namespace: Scribe renders each custom
		// resource's Application in the custom resource's namespace; its
		// AppProject admits only that namespace (sourceNamespaces).
		"--application-namespaces=*"); err != nil {
		return err
	}
	return s.createArgoRoot(ctx)
}

// ArgoApplicationHealthLua is the health check of argoproj.io/Application
// that Argo CD's documentation gives (operator-manual/health.md, "Argo CD
// App") for app-of-apps ordered by sync waves, key and script as an
// install puts them in argocd-cm: Argo CD has not assessed an
// Application's health since 1.8, so without it a parent Application
// does not wait for one wave of child Applications to be Healthy before
// the next. An Experiment's Application orders its targets' component
// Applications (targets[].depends) that way.
const (
	ArgoApplicationHealthKey = "resource.customizations.health.argoproj.io_Application"
	ArgoApplicationHealthLua = `hs = {}
hs.status = "Progressing"
hs.message = ""
if obj.status ~= nil then
  if obj.status.health ~= nil then
    hs.status = obj.status.health.status
    if obj.status.health.message ~= nil then
      hs.message = obj.status.health.message
    end
  end
end
return hs
`
)

// createArgoConfig creates Argo CD's config objects from its module
// (argocd-cm, argocd-rbac-cm, argocd-secret, argocd-cmd-params-cm, the
// gpg/ssh/tls ConfigMaps), with the server key the controller's settings
// require (argocd-server would generate it) and, documented where an
// install keeps them, the apps-in-any-namespace setting and the
// Application health check (ArgoApplicationHealthLua).
func (s *Stack) createArgoConfig(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("argo CD config objects in %s: %v", dir, err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("decode %s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			u.SetNamespace(ArgoCDNamespace)
			switch u.GetName() {
			case "argocd-secret":
				_ = unstructured.SetNestedField(u.Object, base64.StdEncoding.EncodeToString(key), "data", "server.secretkey")
			case "argocd-cmd-params-cm":
				_ = unstructured.SetNestedField(u.Object, "*", "data", "application.namespaces")
			case "argocd-cm":
				if err := unstructured.SetNestedField(u.Object, ArgoApplicationHealthLua, "data", ArgoApplicationHealthKey); err != nil {
					return fmt.Errorf("argocd-cm: %w", err)
				}
			}
			if err := s.Client.Create(ctx, u); err != nil {
				return fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
	return nil
}

// createArgoRoot creates the root AppProject and Application: the
// administrator's one-time setup, as flux-system's GitRepository and root
// Kustomization are with Flux. The root project may create only
// Applications and AppProjects: what a custom resource's Application
// deploys is bounded by the custom resource's own AppProject.
func (s *Stack) createArgoRoot(ctx context.Context) error {
	proj := &unstructured.Unstructured{}
	proj.SetGroupVersionKind(argoGVK("AppProject"))
	proj.SetNamespace(ArgoCDNamespace)
	proj.SetName(ArgoRootProject)
	proj.Object["spec"] = map[string]any{
		"description":              "Scribe's sync files: each custom resource's Application and AppProject",
		"sourceRepos":              []any{s.RepoURL},
		"destinations":             []any{map[string]any{"server": "https://kubernetes.default.svc", "namespace": "*"}},
		"clusterResourceWhitelist": []any{},
		"namespaceResourceWhitelist": []any{
			map[string]any{"group": "argoproj.io", "kind": "Application"},
			map[string]any{"group": "argoproj.io", "kind": "AppProject"},
		},
	}
	if err := s.Client.Create(ctx, proj); err != nil {
		return fmt.Errorf("create AppProject %s: %w", ArgoRootProject, err)
	}
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(argoGVK("Application"))
	app.SetNamespace(ArgoCDNamespace)
	app.SetName(ArgoRootApp)
	app.Object["spec"] = map[string]any{
		"project":     ArgoRootProject,
		"source":      map[string]any{"repoURL": s.RepoURL, "targetRevision": "main", "path": SyncPath},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ArgoCDNamespace},
		// allowEmpty: when the last custom resource goes, the sync index
		// lists nothing, and Argo CD's automated sync must still prune.
		"syncPolicy": map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true, "allowEmpty": true}},
	}
	if err := s.Client.Create(ctx, app); err != nil {
		return fmt.Errorf("create root Application: %w", err)
	}
	return nil
}

// ArgoApplied reports whether Argo CD synced commit into the Application
// key and computed its health after that sync, and a one-line state.
func (s *Stack) ArgoApplied(ctx context.Context, key types.NamespacedName, commit string) (bool, string) {
	app, err := s.ArgoApplication(ctx, key)
	if err != nil {
		return false, err.Error()
	}
	rev, _, _ := unstructured.NestedString(app.Object, "status", "sync", "revision")
	sync, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
	health, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
	phase, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase")
	state := fmt.Sprintf("sync=%s@%.12s health=%s operation=%s", sync, rev, health, phase)
	return rev == commit && sync == "Synced" && (phase == "" || phase == "Succeeded"), state
}

// AppliedRevision is the commit the applier last applied from the sync
// object of a custom resource (see SyncObject).
func (s *Stack) AppliedRevision(ctx context.Context, kind, ns, name string) (string, error) {
	key := s.SyncObject(kind, ns, name)
	if s.Applier == scribev1.ApplierArgoCD {
		app, err := s.ArgoApplication(ctx, key)
		if err != nil {
			return "", err
		}
		phase, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase")
		rev, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "syncResult", "revision")
		if phase != "Succeeded" {
			return "", nil
		}
		return rev, nil
	}
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"})
	if err := s.Client.Get(ctx, key, ks); err != nil {
		return "", err
	}
	rev, _, _ := unstructured.NestedString(ks.Object, "status", "lastAppliedRevision")
	return strings.TrimPrefix(rev, "main@sha1:"), nil
}

// SyncObjectExists reports whether the applier object of a custom
// resource still exists.
func (s *Stack) SyncObjectExists(ctx context.Context, kind, ns, name string) (bool, error) {
	u := &unstructured.Unstructured{}
	if s.Applier == scribev1.ApplierArgoCD {
		u.SetGroupVersionKind(argoGVK("Application"))
	} else {
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"})
	}
	err := s.Client.Get(ctx, s.SyncObject(kind, ns, name), u)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// appliers runs f once per applier, each in its own subtest (and loop);
// the two run in parallel, as the loop tests do (make test-e2e's -parallel
// bounds how many loops run at once).
func appliers(t *testing.T, f func(t *testing.T, applier scribev1.ApplierKind)) {
	for _, a := range []scribev1.ApplierKind{scribev1.ApplierFlux, scribev1.ApplierArgoCD} {
		t.Run(string(a), func(t *testing.T) {
			if only := os.Getenv("SCRIBE_E2E_APPLIER"); only != "" && !strings.EqualFold(only, string(a)) {
				t.Skipf("SCRIBE_E2E_APPLIER=%s", only)
			}
			t.Parallel()
			f(t, a)
		})
	}
}

// applierLog is the tail of the applier's log, for wait messages.
func (s *Stack) applierLog(lines int) string {
	if s.Applier == scribev1.ApplierArgoCD {
		return s.Logs("argocd-application-controller", lines)
	}
	return s.Logs("source-controller", lines)
}

// argoState is one version of an Application, as a watch delivered it.
type argoState struct {
	rv                                               int64
	rev, sync, health, phase, reconciledAt, finished string
}

// fresh: health computed at or after the last sync finished.
func (a argoState) fresh() bool {
	if a.finished == "" {
		return a.reconciledAt != ""
	}
	fin, ferr := time.Parse(time.RFC3339, a.finished)
	rec, rerr := time.Parse(time.RFC3339, a.reconciledAt)
	return ferr == nil && rerr == nil && !rec.Before(fin)
}

// revAt is a Workload's status.revision at a resourceVersion.
type revAt struct {
	rv  int64
	rev string
}

// argoRecorder watches a Workload and its Argo CD Application and keeps
// every version of both, ordered by resourceVersion: etcd's revision,
// global across objects, so "the Application was Healthy at commit C
// before the Workload reported the next commit" is a comparison.
type argoRecorder struct {
	mu   sync.Mutex
	apps []argoState
	revs []revAt
}

// recordArgo starts recording the Workload ns/name and its Application
// until the test ends.
func recordArgo(t *testing.T, s *Stack, ns, name string) *argoRecorder {
	t.Helper()
	wc, err := client.NewWithWatch(s.Config, client.Options{Scheme: s.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &argoRecorder{}
	key := s.SyncObject("workload", ns, name)
	apps := &unstructured.UnstructuredList{}
	apps.SetGroupVersionKind(argoGVK("ApplicationList"))
	go watchAll(ctx, wc, apps, key, func(o runtime.Object) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return
		}
		st := argoState{rv: rvOf(u)}
		st.rev, _, _ = unstructured.NestedString(u.Object, "status", "sync", "revision")
		st.sync, _, _ = unstructured.NestedString(u.Object, "status", "sync", "status")
		st.health, _, _ = unstructured.NestedString(u.Object, "status", "health", "status")
		st.phase, _, _ = unstructured.NestedString(u.Object, "status", "operationState", "phase")
		st.reconciledAt, _, _ = unstructured.NestedString(u.Object, "status", "reconciledAt")
		st.finished, _, _ = unstructured.NestedString(u.Object, "status", "operationState", "finishedAt")
		r.mu.Lock()
		r.apps = append(r.apps, st)
		r.mu.Unlock()
	})
	go watchAll(ctx, wc, &scribev1.WorkloadList{}, types.NamespacedName{Namespace: ns, Name: name}, func(o runtime.Object) {
		w, ok := o.(*scribev1.Workload)
		if !ok {
			return
		}
		r.mu.Lock()
		if n := len(r.revs); w.Status.Revision != "" && (n == 0 || r.revs[n-1].rev != w.Status.Revision) {
			r.revs = append(r.revs, revAt{rv: rvOf(w), rev: w.Status.Revision})
		}
		r.mu.Unlock()
	})
	return r
}

func rvOf(o metav1.Object) int64 {
	var rv int64
	_, _ = fmt.Sscan(o.GetResourceVersion(), &rv)
	return rv
}

// watchAll watches the object key of list's kind, re-watching when the
// server ends a watch, until ctx ends; f gets every version.
func watchAll(ctx context.Context, wc client.WithWatch, list client.ObjectList, key types.NamespacedName, f func(runtime.Object)) {
	for ctx.Err() == nil {
		w, err := wc.Watch(ctx, list, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name})
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				f(ev.Object)
			}
		}
		w.Stop()
	}
}

// checkEachCommitHealthyBeforeTheNext fails unless, for every commit the
// Workload reported but its last, a version of the Application synced at
// that commit, Healthy, with its health computed after the sync finished,
// came before the Workload reported the next commit.
func (r *argoRecorder) checkEachCommitHealthyBeforeTheNext(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.revs) < 4 {
		t.Fatalf("recorded %d Workload commits, want v1, three steps and the promotion", len(r.revs))
	}
	for i := 0; i+1 < len(r.revs); i++ {
		c, next := r.revs[i], r.revs[i+1]
		ok := false
		for _, a := range r.apps {
			if a.rv < next.rv && a.rev == c.rev && a.sync == "Synced" && a.health == "Healthy" && a.fresh() {
				ok = true
				break
			}
		}
		if !ok {
			var seen []string
			for _, a := range r.apps {
				if a.rv < next.rv && a.rev == c.rev {
					seen = append(seen, fmt.Sprintf("%s/%s/%s reconciled %s finished %s", a.sync, a.health, a.phase, a.reconciledAt, a.finished))
				}
			}
			t.Fatalf("Scribe committed %.12s before Argo CD reported %.12s Synced and freshly Healthy; Application versions at %.12s before it: %v", next.rev, c.rev, c.rev, seen)
		}
	}
	t.Logf("each of %d commits was Synced and freshly Healthy in Argo CD before the next (%d Application versions recorded)", len(r.revs)-1, len(r.apps))
}

// syncedAt reports whether the applier applied commit for a custom
// resource: Flux's lastAppliedRevision, or Argo CD's Application Synced at
// commit and Healthy, with the health computed after the sync.
func (s *Stack) syncedAt(ctx context.Context, kind, ns, name, commit string) (bool, string) {
	if s.Applier == scribev1.ApplierArgoCD {
		ok, state := s.ArgoApplied(ctx, s.SyncObject(kind, ns, name), commit)
		app, err := s.ArgoApplication(ctx, s.SyncObject(kind, ns, name))
		if err != nil {
			return false, err.Error()
		}
		health, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
		reconciled, _, _ := unstructured.NestedString(app.Object, "status", "reconciledAt")
		finished, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "finishedAt")
		fresh := argoState{reconciledAt: reconciled, finished: finished}.fresh()
		return ok && health == "Healthy" && fresh, state
	}
	applied, err := s.AppliedRevision(ctx, kind, ns, name)
	if err != nil {
		return false, err.Error()
	}
	return applied == commit, "applied " + applied
}

// logRSS logs the resident memory of every process of the loop (RESULT
// lines for make bench-e2e).
func logRSS(t *testing.T, s *Stack) {
	s.mu.Lock()
	named := make(map[string]int, len(s.named))
	for n, c := range s.named {
		if c.Process != nil {
			named[n] = c.Process.Pid
		}
	}
	s.mu.Unlock()
	var parts []string
	total := 0
	for n, pid := range named {
		if kb := vmRSSKiB(pid); kb > 0 {
			total += kb
			parts = append(parts, fmt.Sprintf("%s %d MiB", n, kb/1024))
		}
	}
	sort.Strings(parts)
	t.Logf("RESULT RSS of the loop's processes (Scribe, etcd and kube-apiserver not included): %d MiB: %s", total/1024, strings.Join(parts, ", "))
}

// vmRSSKiB is a process's resident memory in KiB (VmRSS), or 0 when it
// cannot be read.
func vmRSSKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int
			_, _ = fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb
		}
	}
	return 0
}
