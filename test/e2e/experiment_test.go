package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/crds/crdstest"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// hubExperiment delivers one catalog app to the hub, without a workflow.
func hubExperiment(ns, name, app string) *scribev1.Experiment {
	return &scribev1.Experiment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: scribev1.ExperimentSpec{
			Description: "catalog app " + app + " on the hub",
			Targets: []scribev1.Target{
				{Name: "app", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Components: []scribev1.Component{{App: app}}},
			},
		},
	}
}

// describeExperiment is the state printed while waiting.
func describeExperiment(e *scribev1.Experiment) string {
	s := fmt.Sprintf("phase=%s revision=%.12s", e.Status.Phase, e.Status.Revision)
	if c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition); c != nil {
		s += fmt.Sprintf(" ready=%s/%s: %s", c.Status, c.Reason, c.Message)
	}
	return s
}

// waitExperiment polls the Experiment until done says so, and returns it.
func waitExperiment(t *testing.T, s *Stack, ns, name, what string, done func(*scribev1.Experiment) bool) *scribev1.Experiment {
	t.Helper()
	e := &scribev1.Experiment{}
	poll(t, 3*time.Minute, what, func() (bool, string) {
		if err := s.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, e); err != nil {
			return false, err.Error()
		}
		return done(e), describeExperiment(e)
	})
	return e
}

// TestLoopHubExperimentWalksToComplete: Scribe reads the catalog from a Flux
// source, commits the Experiment, the applier (Flux or Argo CD) applies it
// and then the component it delivers (from the catalog repository), and
// the Experiment is Complete only after both.
func TestLoopHubExperimentWalksToComplete(t *testing.T) {
	t.Parallel()
	appliers(t, testHubExperiment)
}

func testHubExperiment(t *testing.T, applier scribev1.ApplierKind) {
	ns := "experiment"
	s := newLoopWith(t, applier, ns)
	ctx := context.Background()
	exp := hubExperiment(ns, "gateway-tutorial", "demo-services")
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	var phases []scribev1.ExperimentPhase
	e := waitExperiment(t, s, ns, exp.Name, "the Experiment Complete", func(e *scribev1.Experiment) bool {
		if n := len(phases); e.Status.Phase != "" && (n == 0 || phases[n-1] != e.Status.Phase) {
			phases = append(phases, e.Status.Phase)
		}
		return e.Status.Phase == scribev1.ExperimentComplete
	})
	t.Logf("phases seen: %v", phases)

	// Complete only after the applier applied Scribe's commit ...
	applied, err := s.AppliedRevision(ctx, "experiment", ns, exp.Name)
	if err != nil {
		t.Fatal(err)
	}
	if applied != e.Status.Revision {
		t.Fatalf("Complete, but %s applied %q, not Scribe's %s", applier, applied, e.Status.Revision)
	}
	// ... and installed the component from the catalog repository: the
	// demo services of Scribe's catalog/apps/demo-services, in the entry's
	// namespace demo.
	for _, name := range []string{"demo-http", "demo-grpc"} {
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: name}, &appsv1.Deployment{}); err != nil {
			t.Fatalf("Complete, but the component's Deployment %s is not in the apiserver: %v", name, err)
		}
	}
	if ts := e.Status.Targets; len(ts) != 1 || len(ts[0].Components) != 1 || !ts[0].Components[0].Ready {
		t.Fatalf("Complete, but the target's components are %+v", ts)
	}

	// Deleting it commits the removal; the applier prunes the sync object,
	// whose inventory holds the component's delivery, which prunes the
	// component (with Argo CD: the Applications' resources finalizers).
	if err := s.Client.Delete(ctx, e); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "the Experiment gone and its component pruned by "+string(applier), func() (bool, string) {
		gone := apierrors.IsNotFound(s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: exp.Name}, &scribev1.Experiment{}))
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "demo-http"}, &appsv1.Deployment{})
		return gone && apierrors.IsNotFound(err), fmt.Sprintf("experiment gone=%v; component Deployment: %v", gone, err)
	})
}

// TestLoopExperimentWithBrokenComponentPathFails: the catalog entry's path
// does not exist in the published catalog. Scribe builds catalog
// components itself, from the Flux source's artifact, so the render
// refuses the Experiment before anything is committed, whichever the
// applier: Ready=False and Stalled, RenderFailed, naming the component's
// field and the missing path, and no revision.
func TestLoopExperimentWithBrokenComponentPathFails(t *testing.T) {
	t.Parallel()
	appliers(t, testBrokenComponentPath)
}

func testBrokenComponentPath(t *testing.T, applier scribev1.ApplierKind) {
	ns := "broken"
	s := newLoopWith(t, applier, ns)
	ctx := context.Background()
	exp := hubExperiment(ns, "bad-path", "broken-path")
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	e := waitExperiment(t, s, ns, exp.Name, "the Experiment refused", func(e *scribev1.Experiment) bool {
		ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == scribev1.RenderFailedReason
	})
	ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
	for _, want := range []string{"spec.targets[0].components[0].app", "./apps/does-not-exist", "is not a directory of the catalog"} {
		if !strings.Contains(ready.Message, want) {
			t.Fatalf("refused without %q: %s", want, describeExperiment(e))
		}
	}
	if !apimeta.IsStatusConditionTrue(e.Status.Conditions, scribev1.StalledCondition) {
		t.Fatalf("refused but not Stalled: %+v", e.Status.Conditions)
	}
	if e.Status.Revision != "" {
		t.Fatalf("refused, yet commit %s carries it", e.Status.Revision)
	}
	t.Logf("refused: %s", ready.Message)
}

// TestLoopExperimentDeliversInDependsOrder: a target that depends on
// another gets its components only once the other's are ready, whichever
// applier delivers them: Flux through dependsOn on the Kustomizations,
// Argo CD through sync waves on the Applications, which the Experiment's
// Application applies wave by wave, waiting for each to be Healthy (the
// loop's argocd-cm has Argo CD's Application health check; without it the
// second wave is created at once and the probe appears while the gate is
// closed). The base target's Deployment is not available until the test
// lets its pod schedule, 20 s after it was applied; the probe's ConfigMap
// must not appear before, and must reach the apiserver after the base
// target's delivery reported ready: a comparison of resourceVersions,
// etcd's revision, from watches started before the Experiment.
func TestLoopExperimentDeliversInDependsOrder(t *testing.T) {
	t.Parallel()
	appliers(t, testDependsOrder)
}

func testDependsOrder(t *testing.T, applier scribev1.ApplierKind) {
	ns := "ordered"
	s := newLoopWith(t, applier, ns)
	ctx := context.Background()
	exp := &scribev1.Experiment{
		ObjectMeta: metav1.ObjectMeta{Name: "layers", Namespace: ns},
		Spec: scribev1.ExperimentSpec{
			Description: "a probe delivered only after the gate's Deployment is available",
			Targets: []scribev1.Target{
				{Name: "top", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Components: []scribev1.Component{{App: "depends-probe"}}, Depends: []string{"base"}},
				{Name: "base", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Components: []scribev1.Component{{App: "depends-gate"}}},
			},
		},
	}

	wc, err := client.NewWithWatch(s.Config, client.Options{Scheme: s.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var (
		mu               sync.Mutex
		readyRV, probeRV int64
		baseStates       []string // the delivery's states, as they changed
		lastState        string
	)
	// The base target's delivery: Ready (Flux), or Healthy, the state
	// Argo CD's wave waits for.
	deliveries := &unstructured.UnstructuredList{}
	deliveries.SetGroupVersionKind(kustomizev1.GroupVersion.WithKind("KustomizationList"))
	if applier == scribev1.ApplierArgoCD {
		deliveries.SetGroupVersionKind(argoGVK("ApplicationList"))
	}
	go watchAll(wctx, wc, deliveries, types.NamespacedName{Namespace: ns, Name: exp.Name + "-base-depends-gate"}, func(o runtime.Object) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return
		}
		state, _, _ := unstructured.NestedString(u.Object, "status", "health", "status")
		ready := state == "Healthy"
		if applier == scribev1.ApplierFlux {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			state = "no Ready condition"
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
					state = fmt.Sprintf("Ready=%v", m["status"])
					ready = m["status"] == "True"
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if state != lastState {
			baseStates, lastState = append(baseStates, fmt.Sprintf("rv %d: %s", rvOf(u), state)), state
		}
		if ready && readyRV == 0 {
			readyRV = rvOf(u)
		}
	})
	go watchAll(wctx, wc, &corev1.ConfigMapList{}, types.NamespacedName{Namespace: ns, Name: "depends-probe"}, func(o runtime.Object) {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if probeRV == 0 {
			probeRV = rvOf(cm)
		}
	})
	// Watches that miss the first versions would compare nothing: both
	// are open before the Experiment exists.
	time.Sleep(time.Second)
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	e := &scribev1.Experiment{}
	state := func() string {
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: exp.Name}, e); err != nil {
			return err.Error()
		}
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%s; base delivery %v; probe ConfigMap at rv %d", describeExperiment(e), baseStates, probeRV)
	}
	gate := types.NamespacedName{Namespace: ns, Name: "depends-gate"}
	poll(t, 3*time.Minute, "the gate's Deployment applied by "+string(applier), func() (bool, string) {
		err := s.Client.Get(ctx, gate, &appsv1.Deployment{})
		return err == nil, fmt.Sprintf("Deployment %s: %v; %s", gate, err, state())
	})
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		mu.Lock()
		early := probeRV
		mu.Unlock()
		if early != 0 {
			t.Fatalf("%s delivered the probe (target top, depends on base) while the gate's Deployment cannot be available: %s", applier, state())
		}
	}
	// Open the gate: the pod may schedule on the loop's node.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-0"}}
	open := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"scribe.dev/depends-gate":"open"}}}`))
	if err := s.Client.Patch(ctx, node, open); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "the Experiment Complete", func() (bool, string) {
		st := state()
		mu.Lock()
		defer mu.Unlock()
		return e.Status.Phase == scribev1.ExperimentComplete && probeRV != 0, st
	})
	mu.Lock()
	defer mu.Unlock()
	if readyRV == 0 || probeRV <= readyRV {
		t.Fatalf("%s created the probe ConfigMap (target top) at rv %d, before the delivery of target base, which it depends on, was ready (first ready at rv %d; its states: %v)",
			applier, probeRV, readyRV, baseStates)
	}
	t.Logf("%s: the base target's delivery ready at rv %d, the probe created at rv %d; states of the delivery: %v", applier, readyRV, probeRV, baseStates)
}

// TestLoopHubExperimentCommitsItsStagesInOrder: a hub Experiment whose
// validation workflow's template comes from the catalog repository walks
// its four stages commit by commit through real Flux: each commit is made
// only after Flux applied the previous one and what it delivered is ready
// (the component's ConfigMap, then the WorkflowTemplate), so the Workflow
// reaches the apiserver after its WorkflowTemplate. Argo Workflows does not
// run here: the test reports the Workflow's phase as its controller does.
func TestLoopHubExperimentCommitsItsStagesInOrder(t *testing.T) {
	t.Parallel()
	// The repository carries Argo Workflows' CRDs (internal/crds).
	files := crdstest.Files(t, "argo-workflows")
	ns := "staged"
	s := newLoop(t, ns)
	ctx := context.Background()
	var argo []string
	for _, f := range files {
		if b := filepath.Base(f); b == "argoproj.io_workflows.yaml" || b == "argoproj.io_workflowtemplates.yaml" {
			argo = append(argo, f)
		}
	}
	if _, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Paths: argo, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute}); err != nil {
		t.Fatalf("install Argo Workflows CRDs: %v", err)
	}
	exp := hubExperiment(ns, "gateway-staged", "demo-services")
	exp.Spec.Workflow = &scribev1.ExperimentWorkflow{Engine: scribev1.EngineArgo, Template: "gateway-validation"}
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	ks := types.NamespacedName{Namespace: "flux-system", Name: "experiment." + ns + "." + exp.Name}

	// Watch the walk: whenever a stage's commit is recorded, Flux has
	// applied the previous stage's commit (or this one).
	applied := func() string {
		k := &kustomizev1.Kustomization{}
		if err := s.Client.Get(ctx, ks, k); err != nil {
			return ""
		}
		_, sha, _ := strings.Cut(k.Status.LastAppliedRevision, "@sha1:")
		return sha
	}
	seen := map[int32]string{}
	var violations []string
	walked := func(e *scribev1.Experiment) bool {
		if e.Status.Revision != "" && seen[e.Status.Stage] == "" {
			seen[e.Status.Stage] = e.Status.Revision
			if e.Status.Stage > scribev1.StageClusters {
				prev := ""
				for _, st := range e.Status.Stages {
					if st.Stage == e.Status.Stage-1 {
						prev = st.Commit
					}
				}
				if got := applied(); got != prev && got != e.Status.Revision {
					violations = append(violations, fmt.Sprintf("stage %d committed while Flux had applied %.12s, not stage %d's %.12s", e.Status.Stage, got, e.Status.Stage-1, prev))
				}
			}
		}
		return e.Status.Stage == scribev1.StageWorkflow && e.Status.Phase == scribev1.ExperimentReady
	}
	e := &scribev1.Experiment{}
	poll(t, 6*time.Minute, "the Experiment Ready at stage 4", func() (bool, string) {
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: exp.Name}, e); err != nil {
			return false, err.Error()
		}
		return walked(e), fmt.Sprintf("stage %d: %s", e.Status.Stage, describeExperiment(e))
	})
	if len(violations) > 0 {
		t.Fatal(strings.Join(violations, "\n"))
	}
	if len(e.Status.Stages) != 4 {
		t.Fatalf("status.stages = %+v", e.Status.Stages)
	}

	// The commit sequence on the branch: one Scribe commit per stage, in
	// order, each adding what its stage adds.
	work := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", s.RepoURL, work)
	out := publishtest.Git(t, work, "log", "--reverse", "--format=%H", "--grep=Scribe-Object: Experiment/"+ns+"/"+exp.Name)
	commits := strings.Fields(out)
	var want []string
	for _, st := range e.Status.Stages {
		want = append(want, st.Commit)
	}
	if !slices.Equal(commits, want) {
		t.Fatalf("Scribe's commits on the branch %v, want the four stages' %v", commits, want)
	}
	dir := SyncPath + "/" + ns + "/experiment/" + exp.Name + "/"
	has := func(commit, file string) bool {
		_, err := publishtest.RunGit(work, "cat-file", "-e", commit+":"+dir+file)
		return err == nil
	}
	var wf string
	for _, o := range e.Status.GeneratedResources.Objects {
		if o.Kind == "Workflow" {
			wf = o.Name
		}
	}
	for i, c := range commits {
		stage := i + 1
		for file, from := range map[string]int{
			"kustomization-" + exp.Name + "-app-demo-services.yaml":  2,
			"kustomization-" + exp.Name + "-gateway-validation.yaml": 3,
			"workflow-" + wf + ".yaml":                               4,
		} {
			if got := has(c, file); got != (stage >= from) {
				t.Errorf("stage %d's commit %.12s has %s: %v", stage, c, file, got)
			}
		}
	}

	// Flux applied each: the component, the WorkflowTemplate, the Workflow,
	// the template older than the Workflow.
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "demo-http"}, &appsv1.Deployment{}); err != nil {
		t.Fatalf("the component's Deployment (catalog/apps/demo-services): %v", err)
	}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion("argoproj.io/v1alpha1")
	tmpl.SetKind("WorkflowTemplate")
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gateway-validation"}, tmpl); err != nil {
		t.Fatalf("the WorkflowTemplate Flux delivered at stage 3: %v", err)
	}
	run := &unstructured.Unstructured{}
	run.SetAPIVersion("argoproj.io/v1alpha1")
	run.SetKind("Workflow")
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: wf}, run); err != nil {
		t.Fatalf("the Workflow Flux applied at stage 4: %v", err)
	}
	if created, ran := tmpl.GetCreationTimestamp(), run.GetCreationTimestamp(); ran.Before(&created) {
		t.Fatalf("the Workflow (%s) is older than its WorkflowTemplate (%s)", run.GetCreationTimestamp(), tmpl.GetCreationTimestamp())
	}
	if ref, _, _ := unstructured.NestedString(run.Object, "spec", "workflowTemplateRef", "name"); ref != "gateway-validation" {
		t.Fatalf("the Workflow references %q", ref)
	}

	// Argo Workflows reports the run succeeded (the Workflow CRD has no
	// status subresource: its controller updates the object).
	run.Object["status"] = map[string]any{"phase": "Succeeded", "startedAt": time.Now().UTC().Format(time.RFC3339), "finishedAt": time.Now().UTC().Format(time.RFC3339)}
	if err := s.Client.Update(ctx, run); err != nil {
		t.Fatal(err)
	}
	e = waitExperiment(t, s, ns, exp.Name, "the Experiment Complete", func(e *scribev1.Experiment) bool {
		return e.Status.Phase == scribev1.ExperimentComplete
	})
	t.Logf("stages: %+v", e.Status.Stages)
}
