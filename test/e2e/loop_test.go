package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

func skipWithoutLoop(t *testing.T) {
	t.Helper()
	if os.Getenv("SCRIBE_E2E") == "" {
		t.Skip("set SCRIBE_E2E=1 (make test-e2e) to run the real loop")
	}
}

// startScribe runs the Scribe controller against the stack until the test
// ends. Its manager and controllers log to scribe.log in the stack's folder;
// the process-wide logger (TestMain) is set only once per process, so it is
// not used for that.
func startScribe(t *testing.T, s *Stack, opts ...controller.Options) {
	t.Helper()
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	skip := true // several managers run in one test process
	// The cache is the command's (managedFields dropped, only rendered
	// Deployments and Pods).
	mgr, err := ctrl.NewManager(s.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:      controller.CacheOptions(nil),
		Controller: config.Controller{SkipNameValidation: &skip},
		Logger:     zap.New(zap.WriteTo(logFile(t, s, "scribe")))})
	if err != nil {
		t.Fatal(err)
	}
	o := controller.Options{Poll: time.Second, Concurrency: 4}
	if len(opts) > 0 {
		o = opts[0]
	}
	o.DataDir = t.TempDir()
	// The platform's egress allowance: the loop's Gitea, registry,
	// Prometheus and receivers listen on 127.0.0.1 and on the node's
	// bridge (10.213.7.0/24), which the zero Policy never reaches.
	o.Egress.AllowLoopback, o.Egress.AllowPrivate = true, true
	if _, err := controller.Setup(mgr, o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("scribe: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func logFile(t *testing.T, s *Stack, name string) *os.File {
	f, err := os.Create(s.Dir + "/" + name + ".log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// poll waits for cond (bounded), printing the last state on timeout.
func poll(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	pollEvery(t, 250*time.Millisecond, limit, what, cond)
}

// pollEvery is poll at a given pace: latency measurements poll fast, so
// the pace does not add to what they measure.
func pollEvery(t *testing.T, every, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	// make demo prints its own progress lines; the states polled are
	// printed only when a wait times out.
	quiet := os.Getenv("SCRIBE_DEMO") != ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		if state != last && !quiet {
			t.Logf("waiting for %s: %s", what, state)
		}
		last = state
		time.Sleep(every)
	}
	t.Fatalf("timed out waiting for %s; last state: %s", what, last)
}

func describe(w *scribev1.Workload) string {
	ready := ""
	for _, c := range w.Status.Conditions {
		if c.Type == scribev1.ReadyCondition {
			ready = fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("phase=%s stable=%s canary=%s step=%d traffic=%v revision=%.12s ready=%s", w.Status.Phase, w.Status.StableVersion, w.Status.CanaryVersion, w.Status.Step, w.Status.Traffic, w.Status.Revision, ready)
}

// routeWeights reads the HTTPRoute the applier applied: "web-v1=90,web-v2=10".
func routeWeights(ctx context.Context, s *Stack, ns, name string) string {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("gateway.networking.k8s.io/v1")
	u.SetKind("HTTPRoute")
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
		return "(" + err.Error() + ")"
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	var parts []string
	for _, r := range rules {
		refs, _, _ := unstructured.NestedSlice(r.(map[string]any), "backendRefs")
		for _, b := range refs {
			m := b.(map[string]any)
			parts = append(parts, fmt.Sprintf("%v=%v", m["name"], m["weight"]))
		}
	}
	return strings.Join(parts, ",")
}

// newLoop boots the stack with Flux, a namespace with its Repository, and
// Scribe.
func newLoop(t *testing.T, ns string, opts ...controller.Options) *Stack {
	t.Helper()
	return newLoopWith(t, scribev1.ApplierFlux, ns, opts...)
}

// newLoopWith boots the stack with applier, a namespace with its
// Repository, and Scribe.
func newLoopWith(t *testing.T, applier scribev1.ApplierKind, ns string, opts ...controller.Options) *Stack {
	t.Helper()
	skipWithoutLoop(t)
	s := StartWith(t, applier)
	newNamespaceAndRepository(t, s, ns)
	startScribe(t, s, opts...)
	return s
}

// newNodeLoop boots the stack on the real node with applier, pushes the
// demo app as the fixtures' ghcr.io/example/web images, creates a
// namespace with its Repository, and installs Scribe from its image by its
// chart: the pods are real, Scribe's among them.
func newNodeLoop(t *testing.T, applier scribev1.ApplierKind, ns string) *Stack {
	t.Helper()
	skipWithoutLoop(t)
	s := StartOpts(t, StackOptions{Applier: applier, RealNode: true})
	if err := s.Node.PushDemoApp(context.Background(), s.logf, "example/web", "1", "2", "3"); err != nil {
		t.Fatalf("the demo app's image: %v", err)
	}
	s.InstallScribe(t, InstallOptions{})
	newNamespaceAndRepository(t, s, ns)
	return s
}

// newNamespaceAndRepository creates ns, the platform's TenantPolicy for
// it and its "default" Repository.
func newNamespaceAndRepository(t *testing.T, s *Stack, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// What the platform grants the tenant: the catalog it publishes in
	// flux-system, and (Argo CD) the Namespace the demo services'
	// component creates.
	cat := catalogRef()
	policy := &scribev1.TenantPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + ns},
		Spec: scribev1.TenantPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ClusterResources:  []scribev1.GroupKind{{Group: "", Kind: "Namespace"}},
			CatalogSources:    []scribev1.CatalogSourceReference{{Kind: cat.Kind, Namespace: cat.Namespace, Name: cat.Name}},
		},
	}
	if err := s.Client.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	repo := &scribev1.Repository{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
		Spec: scribev1.RepositorySpec{
			Git:     &scribev1.GitRepositorySpec{URL: s.RepoURL, Branch: "main", Path: SyncPath},
			Applier: s.ApplierSpec(),
			Catalog: catalogRef(),
		},
	}
	if err := s.Client.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
}

// canaryWorkload is the demo service: one version, a 10/50/100 canary.
func canaryWorkload(ns string) *scribev1.Workload {
	return &scribev1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: scribev1.WorkloadSpec{
			Versions: []scribev1.Version{{Name: "v1", Image: "ghcr.io/example/web:1"}},
			Service:  scribev1.ServiceSpec{Ports: []scribev1.ServicePort{{Name: "http", Port: 80, TargetPort: 8080}}},
			Traffic:  &scribev1.Traffic{ParentRefs: []scribev1.ParentReference{{Name: "public", Namespace: "gateway-system"}}, Hostnames: []string{"web.example.com"}},
			Rollout:  &scribev1.Rollout{Strategy: "canary", Steps: []scribev1.RolloutStep{{Weight: 10}, {Weight: 50}, {Weight: 100}}},
		},
	}
}

// webV2 is the demo service's second version.
func webV2() scribev1.Version { return scribev1.Version{Name: "v2", Image: "ghcr.io/example/web:2"} }

// createHealthy creates w and waits until Flux applied its first version
// and it is healthy; it returns a getter of w's current state.
func createHealthy(t *testing.T, s *Stack, w *scribev1.Workload) func() *scribev1.Workload {
	t.Helper()
	ctx := context.Background()
	if err := s.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
	get := func() *scribev1.Workload {
		got := &scribev1.Workload{}
		_ = s.Client.Get(ctx, key, got)
		return got
	}
	poll(t, 5*time.Minute, "v1 applied by "+string(s.Applier)+" and healthy", func() (bool, string) {
		got := get()
		return got.Status.Phase == scribev1.WorkloadHealthy, describe(got) + "\n--- applier log:\n" + s.applierLog(6)
	})
	return get
}

// TestLoopWorkloadCanary walks a 10/50/100 canary through the real
// applier, on the real node with Scribe installed by its chart: each step
// waits for real pods to be Ready. With Argo CD it also proves the
// stale-health guard against the real controller: each step's commit was
// Synced and Healthy, with the health computed after that sync, before
// Scribe committed the next.
func TestLoopWorkloadCanary(t *testing.T) {
	t.Parallel()
	appliers(t, func(t *testing.T, applier scribev1.ApplierKind) {
		ns := "demo"
		s := newNodeLoop(t, applier, ns)
		var rec *argoRecorder
		if applier == scribev1.ApplierArgoCD {
			rec = recordArgo(t, s, ns, "web")
		}
		walkCanary(t, s, canaryWorkload(ns), webV2())
		if rec != nil {
			rec.checkEachCommitHealthyBeforeTheNext(t)
		}
	})
}

// walkCanary creates w, waits for v1, adds v2 and follows the canary in the
// applied HTTPRoute until v2 is stable.
func walkCanary(t *testing.T, s *Stack, w *scribev1.Workload, v2 scribev1.Version) {
	t.Helper()
	ctx := context.Background()
	ns := w.Namespace
	get := createHealthy(t, s, w)
	if r := routeWeights(ctx, s, ns, "web"); r != "web-v1=100" {
		t.Fatalf("applied HTTPRoute routes %q", r)
	}

	updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, v2) })
	for i, want := range []string{"web-v1=90,web-v2=10", "web-v1=50,web-v2=50", "web-v1=0,web-v2=100"} {
		poll(t, 3*time.Minute, fmt.Sprintf("step %d applied in the cluster", i+1), func() (bool, string) {
			r := routeWeights(ctx, s, ns, "web")
			return r == want, "route " + r + "; " + describe(get())
		})
	}
	poll(t, 3*time.Minute, "v2 promoted and healthy", func() (bool, string) {
		got := get()
		return got.Status.StableVersion == "v2" && got.Status.Phase == scribev1.WorkloadHealthy, describe(got)
	})
}

func TestLoopCanaryThatNeverBecomesAvailableIsRolledBackAndTheApplierAppliesTheRollback(t *testing.T) {
	t.Parallel()
	appliers(t, testRollback)
}

func testRollback(t *testing.T, applier scribev1.ApplierKind) {
	ns := "rollback"
	s := newNodeLoop(t, applier, ns)
	ctx := context.Background()
	w := canaryWorkload(ns)
	w.Spec.Rollout.Analysis = &scribev1.Analysis{
		Interval: &metav1.Duration{Duration: time.Second}, Threshold: 3,
		Checks: []scribev1.Check{{Name: "available", Type: "availability"}},
	}
	get := createHealthy(t, s, w)
	// v2's pods run on the real node, but the demo app answers its
	// readiness probe with 503 (READY=false): they never become Ready, and
	// the kubelet, not a simulator, says so.
	v2 := webV2()
	v2.Env = []corev1.EnvVar{{Name: "READY", Value: "false"}}
	v2.Probes = &scribev1.Probes{Readiness: &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}}
	updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, v2) })
	// v2 is deployed at weight 0 until available, which it never is: its
	// checks fail there and it is rolled back without ever being served.
	poll(t, 3*time.Minute, "v2's warm-up at weight 0 applied by "+string(applier), func() (bool, string) {
		r := routeWeights(ctx, s, ns, "web")
		return r == "web-v1=100,web-v2=0", "route " + r + "; " + describe(get())
	})
	poll(t, 3*time.Minute, "the rollback", func() (bool, string) {
		got := get()
		return got.Status.Phase == scribev1.WorkloadRolledBack && got.Status.Revision != "", describe(got)
	})
	for _, c := range scribeRoutes(t, s, ns) {
		if strings.Contains(c, "web-v2=") && !strings.Contains(c, "web-v2=0") {
			t.Errorf("a commit gave v2 traffic although it never became available: %s", c)
		}
	}
	rollback := get().Status.Revision
	poll(t, 3*time.Minute, string(applier)+" to apply the rollback commit", func() (bool, string) {
		applied, err := s.AppliedRevision(ctx, "workload", ns, "web")
		if err != nil {
			return false, err.Error()
		}
		r := routeWeights(ctx, s, ns, "web")
		return applied == rollback && r == "web-v1=100,web-v2=0", "applied " + applied + ", route " + r
	})
	if msg := get().Status.Message; !strings.Contains(msg, "available") {
		t.Errorf("status.message %q does not name the failed check", msg)
	}
}

func TestLoopDeletingAWorkloadPrunesItThroughTheApplierBeforeTheFinalizerGoes(t *testing.T) {
	t.Parallel()
	appliers(t, testPrune)
}

func testPrune(t *testing.T, applier scribev1.ApplierKind) {
	ns := "prune"
	s := newLoopWith(t, applier, ns)
	ctx := context.Background()
	w := canaryWorkload(ns)
	if err := s.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "v1 healthy", func() (bool, string) {
		got := &scribev1.Workload{}
		_ = s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, got)
		return got.Status.Phase == scribev1.WorkloadHealthy, describe(got)
	})
	if err := s.Client.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	// While the Workload still exists, its Deployment must already be gone
	// or going: the finalizer waits for the applier's prune, never the
	// reverse.
	sawPruneFirst := false
	poll(t, 3*time.Minute, "the Workload gone", func() (bool, string) {
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &scribev1.Workload{})
		gone := apierrors.IsNotFound(err)
		d := &appsv1.Deployment{}
		derr := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-v1"}, d)
		if !gone && (apierrors.IsNotFound(derr) || !d.DeletionTimestamp.IsZero()) {
			sawPruneFirst = true
		}
		return gone, fmt.Sprintf("workload err=%v; deployment err=%v", err, derr)
	})
	d := &appsv1.Deployment{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-v1"}, d); !apierrors.IsNotFound(err) && d.DeletionTimestamp.IsZero() {
		t.Fatalf("the Deployment survived the Workload: %v", err)
	}
	if exists, err := s.SyncObjectExists(ctx, "workload", ns, "web"); exists || err != nil {
		t.Fatalf("the per-CR sync object survived: %v", err)
	}
	t.Logf("the Deployment was seen pruned while the Workload still existed: %v", sawPruneFirst)
}

// TestLoopFluxAppliesAWorkloadWhoseSyncNameWouldBeNoLabelValue: Flux
// labels every object a Kustomization applies with the Kustomization's
// name, and a label value holds at most 63 characters. With a namespace
// and name whose `workload-<namespace>-<name>` is 68 characters, the real
// kustomize-controller applies the Workload under the shortened name
// Scribe gives its Kustomization (the whole name applied nothing).
func TestLoopFluxAppliesAWorkloadWhoseSyncNameWouldBeNoLabelValue(t *testing.T) {
	t.Parallel()
	ns, name := "team-payments-production-eu-west", "checkout-frontend-primary"
	s := newLoop(t, ns)
	ctx := context.Background()
	w := canaryWorkload(ns)
	w.Name = name
	createHealthy(t, s, w)

	ks := &unstructured.UnstructuredList{}
	ks.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	ks.SetKind("KustomizationList")
	if err := s.Client.List(ctx, ks, client.InNamespace("flux-system"), client.MatchingLabels{"scribe.dev/namespace": ns, "scribe.dev/name": name}); err != nil {
		t.Fatal(err)
	}
	if len(ks.Items) != 1 {
		t.Fatalf("%d Kustomizations for %s/%s, want 1", len(ks.Items), ns, name)
	}
	ksName := ks.Items[0].GetName()
	if full := "workload." + ns + "." + name; len(ksName) > 63 || ksName == full {
		t.Fatalf("Kustomization %q (%d characters), want a name of at most 63 characters instead of %q", ksName, len(ksName), full)
	}
	d := &appsv1.Deployment{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-v1"}, d); err != nil {
		t.Fatal(err)
	}
	if got := d.Labels["kustomize.toolkit.fluxcd.io/name"]; got != ksName {
		t.Fatalf("Deployment applied with kustomize.toolkit.fluxcd.io/name=%q, want %q", got, ksName)
	}
}

// updateWorkload applies mutate to the current Workload, retrying when
// Scribe's status writes race the update.
func updateWorkload(t *testing.T, s *Stack, ns string, mutate func(w *scribev1.Workload)) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &scribev1.Workload{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, got); err != nil {
			return err
		}
		mutate(got)
		return s.Client.Update(ctx, got)
	})
	if err != nil {
		t.Fatal(err)
	}
}
