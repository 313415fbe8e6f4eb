package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
	"github.com/scribe-gitops/scribe/render"
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

// owned is the name of catalog object name as Scribe delivers it for
// Experiment ns/exp (render.OwnedSuffix).
func owned(ns, exp, name string) string {
	return name + render.OwnedSuffix(ns, exp)
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
	return waitExperimentFor(t, s, 3*time.Minute, ns, name, what, done)
}

// waitExperimentFor is waitExperiment with a time limit.
func waitExperimentFor(t *testing.T, s *Stack, limit time.Duration, ns, name, what string, done func(*scribev1.Experiment) bool) *scribev1.Experiment {
	t.Helper()
	e := &scribev1.Experiment{}
	poll(t, limit, what, func() (bool, string) {
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
	for _, name := range []string{owned(ns, exp.Name, "demo-http"), owned(ns, exp.Name, "demo-grpc")} {
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
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: owned(ns, exp.Name, "demo-http")}, &appsv1.Deployment{})
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
	go watchAll(wctx, wc, &corev1.ConfigMapList{}, types.NamespacedName{Namespace: ns, Name: owned(ns, exp.Name, "depends-probe")}, func(o runtime.Object) {
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
	gate := types.NamespacedName{Namespace: ns, Name: owned(ns, exp.Name, "depends-gate")}
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

// newWorkflowLoop boots the loop on the real node with applier and the
// Argo Workflows engine (stack_workflows.go), pushes the stand-ins of the
// demo services' docker.io images and Scribe's probe (the catalog's
// validation image, by the ghcr.io name its WorkflowTemplate gives),
// installs Scribe by its chart and creates each of namespaces with its
// Repository.
func newWorkflowLoop(t *testing.T, applier scribev1.ApplierKind, namespaces ...string) *Stack {
	t.Helper()
	skipWithoutLoop(t)
	s := StartOpts(t, StackOptions{Applier: applier, RealNode: true, ArgoWorkflows: true})
	ctx := context.Background()
	if err := s.Node.PushStandIns(ctx, s.logf); err != nil {
		t.Fatal(err)
	}
	if err := s.Node.PushProbe(ctx, s.logf); err != nil {
		t.Fatal(err)
	}
	s.InstallScribe(t, InstallOptions{})
	for _, ns := range namespaces {
		newNamespaceAndRepository(t, s, ns)
	}
	return s
}

// The hub Experiments the real Argo Workflows engine validates on the
// real node share one loop per applier (booting one, with Scribe installed
// by its chart, is most of a scenario's time, and the real node serves one
// loop at a time): each scenario has its own namespace and runs beside the
// others (runTogether).
const (
	stagedNS      = "staged"
	unvalidatedNS = "unvalidated"
	ownedNS       = "owned"
)

// TestLoopHubExperimentsValidatedByTheEngine runs, in one loop per
// applier: CommitsItsStagesInOrder, FailsWithItsValidationWorkflow and
// DeletingOneOfTwoKeepsTheOther (each described at its function).
func TestLoopHubExperimentsValidatedByTheEngine(t *testing.T) {
	t.Parallel()
	appliers(t, func(t *testing.T, applier scribev1.ApplierKind) {
		s := newWorkflowLoop(t, applier, stagedNS, unvalidatedNS, ownedNS)
		runTogether(t, s,
			scenario{"CommitsItsStagesInOrder", testStagesInOrder},
			scenario{"FailsWithItsValidationWorkflow", testValidationFails},
			scenario{"DeletingOneOfTwoKeepsTheOther", testDeleteOneOfTwo})
	})
}

// validatedExperiment delivers the demo services to the hub and validates
// them with the catalog's gateway-validation workflow, comparing
// ingressUrl's and gatewayUrl's answers (the loop's team catalog takes
// them as params: testdata/catalog/entries.cue).
func validatedExperiment(ns, name, ingressURL, gatewayURL string) *scribev1.Experiment {
	exp := hubExperiment(ns, name, "demo-services")
	params := fmt.Sprintf(`{"ingressUrl": %q, "gatewayUrl": %q, "paths": "/", "requests": "10"}`, ingressURL, gatewayURL)
	exp.Spec.Workflow = &scribev1.ExperimentWorkflow{Engine: scribev1.EngineArgo, Template: "gateway-validation",
		Params: &apiextensionsv1.JSON{Raw: []byte(params)}}
	return exp
}

// demoHTTPURL is the demo services' HTTP Service, as Experiment ns/exp
// delivers it, by its cluster DNS name.
func demoHTTPURL(ns, exp string) string {
	return "http://" + owned(ns, exp, "demo-http") + ".demo.svc.cluster.local"
}

// workflowOf returns the Workflow an Experiment's status names.
func workflowOf(t *testing.T, s *Stack, e *scribev1.Experiment) *unstructured.Unstructured {
	t.Helper()
	var name string
	for _, o := range e.Status.GeneratedResources.Objects {
		if o.Kind == "Workflow" {
			name = o.Name
		}
	}
	run := &unstructured.Unstructured{}
	run.SetAPIVersion("argoproj.io/v1alpha1")
	run.SetKind("Workflow")
	if err := s.Client.Get(context.Background(), types.NamespacedName{Namespace: e.Namespace, Name: name}, run); err != nil {
		t.Fatalf("the Workflow %q the Experiment names: %v", name, err)
	}
	return run
}

// workflowPod returns the pod Argo Workflows ran for the Workflow's one
// step, and its main container's log on the real node.
func workflowPod(t *testing.T, s *Stack, run *unstructured.Unstructured) (*corev1.Pod, string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := s.Client.List(context.Background(), pods, client.InNamespace(run.GetNamespace()),
		client.MatchingLabels{"workflows.argoproj.io/workflow": run.GetName()}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("want the one pod of Workflow %s, got %d", run.GetName(), len(pods.Items))
	}
	p := &pods.Items[0]
	return p, s.NodePodLog(p.Namespace, p.Name, "main", 20)
}

// logWorkflowTimes logs the engine's own times of a finished Workflow:
// created (by the applier) → started → finished.
func logWorkflowTimes(t *testing.T, s *Stack, run *unstructured.Unstructured) {
	t.Helper()
	started, _, _ := unstructured.NestedString(run.Object, "status", "startedAt")
	finished, _, _ := unstructured.NestedString(run.Object, "status", "finishedAt")
	created := run.GetCreationTimestamp().Time
	f, err := time.Parse(time.RFC3339, finished)
	if err != nil {
		t.Fatalf("the Workflow's status.finishedAt %q: %v", finished, err)
	}
	t.Logf("Workflow %s: created %s, started %s, finished %s: create → finished %s (the engine's times, 1 s resolution); workflow-controller RSS %d MiB",
		run.GetName(), created.UTC().Format(time.RFC3339), started, finished, f.Sub(created), s.ProcessRSS(workflowControllerName)>>20)
}

// testStagesInOrder (CommitsItsStagesInOrder): a hub Experiment whose
// validation workflow's template comes from the catalog repository walks
// its four stages commit by commit through the real applier on the real
// node: each commit is made only after the applier applied the previous
// one and what it delivered is ready (the demo services' Deployments, then
// the WorkflowTemplate), so the Workflow reaches the apiserver after its
// WorkflowTemplate. The real Argo Workflows engine then runs it: a pod on
// the real node probes the demo services' HTTP Service by its cluster DNS
// name, and the Experiment is Complete from the engine's own Workflow
// status (the test writes no status).
func testStagesInOrder(t *testing.T, s *Stack) {
	applier, ns := s.Applier, stagedNS
	ctx := context.Background()
	exp := validatedExperiment(ns, "gateway-staged", demoHTTPURL(ns, "gateway-staged"), demoHTTPURL(ns, "gateway-staged"))
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}

	// Watch the walk: whenever a stage's commit is recorded, the applier
	// has applied the previous stage's commit (or this one). With Argo CD
	// that is the revision the Application last compared
	// (status.sync.revision): a stage that changes no object in the
	// cluster (stage 1 of a hub Experiment) is Synced without a sync
	// operation, and the next stage's sync may be running already when
	// the test looks.
	applied := func() string {
		if applier == scribev1.ApplierArgoCD {
			app, err := s.ArgoApplication(ctx, s.SyncObject("experiment", ns, exp.Name))
			if err != nil {
				return ""
			}
			rev, _, _ := unstructured.NestedString(app.Object, "status", "sync", "revision")
			return rev
		}
		rev, err := s.AppliedRevision(ctx, "experiment", ns, exp.Name)
		if err != nil {
			return ""
		}
		return rev
	}
	seen := map[int32]string{}
	type stageApplied struct {
		stage         int32
		applied, prev string
	}
	var later []stageApplied
	var phases []scribev1.ExperimentPhase
	walked := func(e *scribev1.Experiment) bool {
		if n := len(phases); e.Status.Phase != "" && (n == 0 || phases[n-1] != e.Status.Phase) {
			phases = append(phases, e.Status.Phase)
		}
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
					// Checked once Complete: a later commit (another
					// scenario's, in the shared loop) counts as stage
					// N-1's when it descends from it.
					later = append(later, stageApplied{stage: e.Status.Stage, applied: got, prev: prev})
				}
			}
		}
		return e.Status.Phase == scribev1.ExperimentComplete || e.Status.Phase == scribev1.ExperimentFailed
	}
	e := &scribev1.Experiment{}
	var completeAt time.Time
	poll(t, 8*time.Minute, "the Experiment Complete", func() (bool, string) {
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: exp.Name}, e); err != nil {
			return false, err.Error()
		}
		return walked(e), fmt.Sprintf("stage %d: %s", e.Status.Stage, describeExperiment(e))
	})
	completeAt = time.Now()
	t.Logf("phases seen: %v", phases)
	run := workflowOf(t, s, e)
	phase, _, _ := unstructured.NestedString(run.Object, "status", "phase")
	if e.Status.Phase != scribev1.ExperimentComplete || phase != "Succeeded" {
		pod, log := workflowPod(t, s, run)
		t.Fatalf("the Experiment ended %s (%s), the engine's Workflow %s; its pod %s's log:\n%s\nworkflow-controller:\n%s",
			e.Status.Phase, describeExperiment(e), phase, pod.Name, log, s.Logs(workflowControllerName, 20))
	}
	var violations []string
	for _, l := range later {
		if !appliedIncludes(t, s, l.applied, l.prev) {
			violations = append(violations, fmt.Sprintf("stage %d committed while %s had applied %.12s, neither stage %d's %.12s nor a later commit", l.stage, applier, l.applied, l.stage-1, l.prev))
		}
	}
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
	delivery := "kustomization-"
	if applier == scribev1.ApplierArgoCD {
		delivery = "application-"
	}
	for i, c := range commits {
		stage := i + 1
		for file, from := range map[string]int{
			delivery + exp.Name + "-app-demo-services.yaml":  2,
			delivery + exp.Name + "-gateway-validation.yaml": 3,
			"workflow-" + run.GetName() + ".yaml":            4,
		} {
			if got := has(c, file); got != (stage >= from) {
				t.Errorf("stage %d's commit %.12s has %s: %v", stage, c, file, got)
			}
		}
	}

	// The applier applied each: the component, the WorkflowTemplate, the
	// Workflow, the template older than the Workflow.
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: owned(ns, exp.Name, "demo-http")}, &appsv1.Deployment{}); err != nil {
		t.Fatalf("the component's Deployment (catalog/apps/demo-services): %v", err)
	}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion("argoproj.io/v1alpha1")
	tmpl.SetKind("WorkflowTemplate")
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: owned(ns, exp.Name, "gateway-validation")}, tmpl); err != nil {
		t.Fatalf("the WorkflowTemplate %s delivered at stage 3: %v", applier, err)
	}
	if created, ran := tmpl.GetCreationTimestamp(), run.GetCreationTimestamp(); ran.Before(&created) {
		t.Fatalf("the Workflow (%s) is older than its WorkflowTemplate (%s)", run.GetCreationTimestamp(), tmpl.GetCreationTimestamp())
	}
	if ref, _, _ := unstructured.NestedString(run.Object, "spec", "workflowTemplateRef", "name"); ref != owned(ns, exp.Name, "gateway-validation") {
		t.Fatalf("the Workflow references %q", ref)
	}

	// The engine ran the step as a pod on the real node, and the probe
	// really asked the demo service: its report is in the pod's log.
	pod, log := workflowPod(t, s, run)
	if pod.Spec.NodeName != nodeName || pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("the Workflow's pod %s ran on %q and is %s, want %s and Succeeded", pod.Name, pod.Spec.NodeName, pod.Status.Phase, nodeName)
	}
	if !strings.Contains(log, "0 of 10 requests differ") || !strings.Contains(log, "passed") {
		t.Fatalf("the probe's log does not report 10 equal answers:\n%s", log)
	}
	t.Logf("the probe (pod %s on %s): %s", pod.Name, pod.Spec.NodeName, strings.TrimSpace(log))
	logWorkflowTimes(t, s, run)
	var walk []string
	for _, st := range e.Status.Stages {
		walk = append(walk, fmt.Sprintf("stage %d committed +%s", st.Stage, st.CommittedAt.Sub(e.CreationTimestamp.Time)))
	}
	walk = append(walk, fmt.Sprintf("Complete seen +%s", completeAt.Sub(e.CreationTimestamp.Time).Round(100*time.Millisecond)))
	t.Logf("%s: Experiment created → %s (commits: 1 s resolution)", applier, strings.Join(walk, ", "))
}

// testValidationFails (FailsWithItsValidationWorkflow): the same
// Experiment, validated against a gateway address that does not answer
// (no such Service: the cluster DNS knows no name for it). The real
// engine runs the probe, which fails; the Workflow ends Failed in the
// engine's status, and the Experiment ends Failed with the Workflow's own
// message as its reason.
func testValidationFails(t *testing.T, s *Stack) {
	ns := unvalidatedNS
	ctx := context.Background()
	exp := validatedExperiment(ns, "gateway-broken", demoHTTPURL(ns, "gateway-broken"), "http://demo-gateway.demo.svc.cluster.local")
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	e := waitExperimentFor(t, s, 8*time.Minute, ns, exp.Name, "the Experiment Failed", func(e *scribev1.Experiment) bool {
		return e.Status.Phase == scribev1.ExperimentFailed || e.Status.Phase == scribev1.ExperimentComplete
	})
	run := workflowOf(t, s, e)
	phase, _, _ := unstructured.NestedString(run.Object, "status", "phase")
	msg, _, _ := unstructured.NestedString(run.Object, "status", "message")
	ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
	pod, log := workflowPod(t, s, run)
	if e.Status.Phase != scribev1.ExperimentFailed || phase != "Failed" {
		t.Fatalf("the Experiment ended %s, the engine's Workflow %s; the probe's log:\n%s", describeExperiment(e), phase, log)
	}
	if msg == "" || ready == nil || ready.Reason != controller.ReasonWorkflowFailed || !strings.Contains(ready.Message, msg) {
		t.Fatalf("Failed without the Workflow's reason %q (reason %s) in Ready: %s", msg, controller.ReasonWorkflowFailed, describeExperiment(e))
	}
	if pod.Spec.NodeName != nodeName || !strings.Contains(log, "10 of 10 requests differ") || !strings.Contains(log, "no such host") {
		t.Fatalf("the Workflow's pod %s on %q: want the probe's report of 10 unanswered requests (no such host) on %s, got:\n%s", pod.Name, pod.Spec.NodeName, nodeName, log)
	}
	t.Logf("Failed: %s", ready.Message)
	t.Logf("the probe (pod %s on %s): %s", pod.Name, pod.Spec.NodeName, strings.TrimSpace(log))
	logWorkflowTimes(t, s, run)
}
