package controller_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/controller"
	"github.com/scribe-gitops/scribe/internal/crds/crdstest"
)

// expInstallCRDs installs upstream CRDs, named "<project>/<file>" (see
// internal/crds), that the package's envtest does not install: Argo
// Workflows' Workflow and Cluster API's Cluster. A test whose CRD cannot be
// found (Argo Workflows needs SCRIBE_CRDS_DIR) is skipped. Installing is
// idempotent.
func expInstallCRDs(t *testing.T, f *fixture, crds ...string) {
	t.Helper()
	paths := make([]string, 0, len(crds))
	for _, crd := range crds {
		project, file, _ := strings.Cut(crd, "/")
		files := crdstest.Files(t, project)
		i := slices.IndexFunc(files, func(p string) bool { return filepath.Base(p) == file })
		if i < 0 {
			t.Fatalf("upstream project %s has no CRD file %s", project, file)
		}
		paths = append(paths, files[i])
	}
	if _, err := envtest.InstallCRDs(f.e.cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("install CRDs %v: %v", crds, err)
	}
}

const (
	argoWorkflowCRD = "argo-workflows/argoproj.io_workflows.yaml"
	capiClusterCRD  = "cluster-api/cluster.x-k8s.io_clusters.yaml"
)

// hubExperiment is gateway-tutorial reduced to the hub: two hub targets, the
// second depending on the first, and the Argo validation workflow.
func hubExperiment(ns, name string) *scribev1.Experiment {
	return &scribev1.Experiment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: scribev1.ExperimentSpec{
			Description: "Gateway API tutorial on the hub",
			Targets: []scribev1.Target{
				{Name: "app", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Components: []scribev1.Component{{App: "demo-services"}}},
				{Name: "loadgen", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Depends: []string{"app"}},
			},
			Workflow: &scribev1.ExperimentWorkflow{
				Engine:     "argo",
				Template:   "gateway-validation",
				Completion: &scribev1.Completion{Mode: "workflow"},
			},
		},
	}
}

func (f *fixture) experiment(t *testing.T, name string) *scribev1.Experiment {
	t.Helper()
	e := &scribev1.Experiment{}
	if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: name}, e); err != nil {
		t.Fatal(err)
	}
	return e
}

func expState(e *scribev1.Experiment) string {
	ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
	s := fmt.Sprintf("phase=%s revision=%s targets=%+v workflow=%+v", e.Status.Phase, e.Status.Revision, e.Status.Targets, e.Status.Workflow)
	if ready != nil {
		s += fmt.Sprintf(" Ready=%s/%s: %s", ready.Status, ready.Reason, ready.Message)
	}
	return s
}

// waitPhase waits for phase and returns the Experiment as it was then.
func (f *fixture) waitPhase(t *testing.T, name string, phase scribev1.ExperimentPhase) *scribev1.Experiment {
	t.Helper()
	var e *scribev1.Experiment
	waitFor(t, fmt.Sprintf("experiment %s in phase %s", name, phase), func() (bool, string) {
		e = f.experiment(t, name)
		return e.Status.Phase == phase && e.Status.ObservedGeneration == e.Generation, expState(e)
	})
	return e
}

// holdsPhase checks the Experiment stays in phase for d: without new
// evidence the controller must not move it.
func (f *fixture) holdsPhase(t *testing.T, name string, phase scribev1.ExperimentPhase, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if e := f.experiment(t, name); e.Status.Phase != phase {
			t.Fatalf("experiment %s left phase %s without evidence: %s", name, phase, expState(e))
		}
	}
}

// validationWorkflow is the Argo Workflow the render gives the experiment.
func validationWorkflow(t *testing.T, e *scribev1.Experiment) scribev1.ObjectIdentity {
	t.Helper()
	if e.Status.GeneratedResources == nil {
		t.Fatalf("no generatedResources: %s", expState(e))
	}
	for _, o := range e.Status.GeneratedResources.Objects {
		if o.Kind == "Workflow" && strings.HasPrefix(o.Name, e.Name+"-validation-") {
			return o
		}
	}
	t.Fatalf("no validation Workflow in %+v", e.Status.GeneratedResources.Objects)
	return scribev1.ObjectIdentity{}
}

// playArgo does what Flux and the Argo Workflows controller do: the Workflow
// exists (phase "" means not picked up yet) and reports phase.
func (f *fixture) playArgo(t *testing.T, id scribev1.ObjectIdentity, phase, message string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(id.APIVersion)
	u.SetKind(id.Kind)
	err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: id.Namespace, Name: id.Name}, u)
	if apierrors.IsNotFound(err) {
		u.SetNamespace(id.Namespace)
		u.SetName(id.Name)
		// The labels render gives the validation Workflow <exp>-validation-<hash>.
		exp, _, _ := strings.Cut(id.Name, "-validation-")
		u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "scribe", "scribe.dev/experiment": exp, "scribe.dev/workflow": "validation"})
		if err := unstructured.SetNestedField(u.Object, "gateway-validation", "spec", "workflowTemplateRef", "name"); err != nil {
			t.Fatal(err)
		}
		if err := f.e.c.Create(f.ctx(), u); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if phase == "" {
		return
	}
	// The Workflow CRD has no status subresource: Argo updates the object.
	status := map[string]any{"phase": phase}
	if message != "" {
		status["message"] = message
	}
	u.Object["status"] = status
	if err := f.e.c.Update(f.ctx(), u); err != nil {
		t.Fatal(err)
	}
}

// playComponent does what Flux does with the Kustomization that delivers
// the hub Experiment's demo-services component: it exists, and reports
// Ready (ready) or Ready=False with reason and message. The source it reads
// is a GitRepository that is Ready with an artifact.
func (f *fixture) playComponent(t *testing.T, exp string, ready bool, reason, message string) {
	t.Helper()
	ctx := f.ctx()
	name := exp + "-app-demo-services"
	src := &sourcev1.GitRepository{}
	if err := f.e.c.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: name}, src); apierrors.IsNotFound(err) {
		src = &sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
			Spec:       sourcev1.GitRepositorySpec{URL: "https://example.com/catalog", Interval: metav1.Duration{Duration: 10 * time.Minute}},
		}
		if err := f.e.c.Create(ctx, src); err != nil {
			t.Fatal(err)
		}
		src.Status.ObservedGeneration = src.Generation
		src.Status.Artifact = &meta.Artifact{Path: "gitrepository/x.tar.gz", URL: "http://source-controller/x.tar.gz", Revision: "v0.1.0@sha1:0123456789abcdef0123456789abcdef01234567",
			Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000000", LastUpdateTime: metav1.Now()}
		src.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason,
			Message: "stored artifact", ObservedGeneration: src.Generation, LastTransitionTime: metav1.Now()}}
		if err := f.e.c.Status().Update(ctx, src); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	ks := &kustomizev1.Kustomization{}
	if err := f.e.c.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: name}, ks); apierrors.IsNotFound(err) {
		ks = &kustomizev1.Kustomization{
			// The labels render gives a component's delivery.
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: map[string]string{
				"app.kubernetes.io/managed-by": "scribe", "scribe.dev/experiment": exp, "scribe.dev/target": "app", "scribe.dev/component": "demo-services"}},
			Spec: kustomizev1.KustomizationSpec{
				Interval: metav1.Duration{Duration: 10 * time.Minute}, Path: "./apps/demo-services", Prune: true, Wait: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: name},
			},
		}
		if err := f.e.c.Create(ctx, ks); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	status := metav1.ConditionFalse
	if ready {
		status, reason, message = metav1.ConditionTrue, meta.ReconciliationSucceededReason, "Applied revision: "+src.Status.Artifact.Revision
		ks.Status.LastAppliedRevision = src.Status.Artifact.Revision
	}
	ks.Status.ObservedGeneration = ks.Generation
	ks.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: ks.Generation, LastTransitionTime: metav1.Now()}}
	if err := f.e.c.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}
}

// playExperimentApplied plays Flux applying commit for the Experiment and
// installing its component.
func (f *fixture) playExperimentApplied(t *testing.T, exp, commit string) {
	t.Helper()
	f.playFlux(t, kustomizationName("Experiment", f.ns, exp), commit, true, "", "")
	f.playComponent(t, exp, true, "", "")
}

func (f *fixture) startExperimentController(t *testing.T) {
	t.Helper()
	if f.repo.Spec.Catalog == nil {
		f.publishCatalog(t) // the built-in components are delivered from it
	}
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	startController(t, f.e, f.ns)
}

func experimentObject(ns, name string) string { return "Experiment/" + ns + "/" + name }

// TestExperimentLifecycle walks a hub-only Experiment through every phase,
// each entered only once the test (playing Flux and Argo Workflows) has
// given the evidence, with exactly one commit.
func TestExperimentLifecycle(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, argoWorkflowCRD)
	f.startExperimentController(t)
	const name = "gateway-hub"
	if err := f.e.c.Create(f.ctx(), hubExperiment(f.ns, name)); err != nil {
		t.Fatal(err)
	}

	// Published: one commit, recorded in status; nothing applied yet.
	e := f.waitPhase(t, name, scribev1.ExperimentProvisioning)
	if e.Status.Revision == "" || e.Status.Digest == "" || e.Status.GeneratedResources == nil {
		t.Fatalf("provisioning without a recorded commit: %s", expState(e))
	}
	rev := e.Status.Revision
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 1 || commits[0] != rev {
		t.Fatalf("commits %v, want exactly [%s]", commits, rev)
	}
	if sync := f.fileAt(t, rev, "clusters/dev/"+f.ns+"/experiment/"+name+".sync.yaml"); !strings.Contains(sync, "experiment-"+f.ns+"-"+name) {
		t.Fatalf("commit %s has no sync object for the experiment:\n%s", rev, sync)
	}
	if !slices.Contains(e.Finalizers, controller.Finalizer) {
		t.Fatalf("finalizer missing: %v", e.Finalizers)
	}
	f.holdsPhase(t, name, scribev1.ExperimentProvisioning, time.Second)
	e = f.experiment(t, name)
	if c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonApplyPending {
		t.Fatalf("Ready before apply: %s", expState(e))
	}

	// Flux applies the commit: every (hub) target is ready, so is the experiment.
	ks := kustomizationName("Experiment", f.ns, name)
	f.playFlux(t, ks, rev, true, "", "")
	// Applied, but the component's own Kustomization has not reported yet:
	// still Provisioning, and the target says what it waits for.
	waitFor(t, "the app target waiting for its component", func() (bool, string) {
		e = f.experiment(t, name)
		return len(e.Status.Targets) == 2 && strings.Contains(e.Status.Targets[0].Message, "waiting for components demo-services"), expState(e)
	})
	f.holdsPhase(t, name, scribev1.ExperimentProvisioning, time.Second)
	f.playComponent(t, name, true, "", "")
	e = f.waitPhase(t, name, scribev1.ExperimentReady)
	if len(e.Status.Targets) != 2 {
		t.Fatalf("targets: %s", expState(e))
	}
	for _, ts := range e.Status.Targets {
		if ts.Phase != scribev1.ExperimentReady || !ts.ClusterReady {
			t.Fatalf("target %s not ready in phase Ready: %s", ts.Name, expState(e))
		}
	}
	if c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready condition in phase Ready: %s", expState(e))
	}

	// The workflow does not exist yet, then exists without a phase: still Ready.
	f.holdsPhase(t, name, scribev1.ExperimentReady, time.Second)
	wf := validationWorkflow(t, e)
	f.playArgo(t, wf, "", "")
	f.holdsPhase(t, name, scribev1.ExperimentReady, time.Second)

	// Argo runs it.
	f.playArgo(t, wf, "Running", "")
	e = f.waitPhase(t, name, scribev1.ExperimentRunning)
	if e.Status.Workflow == nil || e.Status.Workflow.Name != wf.Name || e.Status.Workflow.Kind != "Workflow" || e.Status.Workflow.Phase != "Running" {
		t.Fatalf("workflow status while running: %s", expState(e))
	}
	f.holdsPhase(t, name, scribev1.ExperimentRunning, time.Second)

	// Argo reports success.
	f.playArgo(t, wf, "Succeeded", "all routes answer")
	e = f.waitPhase(t, name, scribev1.ExperimentComplete)
	if c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue || c.Reason != controller.ReasonSucceeded {
		t.Fatalf("Ready condition when complete: %s", expState(e))
	}
	if apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReconcilingCondition) != nil {
		t.Fatalf("still reconciling when complete: %s", expState(e))
	}
	if e.Status.Workflow == nil || e.Status.Workflow.Phase != "Succeeded" {
		t.Fatalf("workflow status when complete: %s", expState(e))
	}

	// Still the one commit; every transition has its event.
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 1 || commits[0] != rev {
		t.Fatalf("commits %v, want exactly [%s]", commits, rev)
	}
	waitFor(t, "an event per phase", func() (bool, string) {
		list := &eventsv1.EventList{}
		if err := f.e.c.List(f.ctx(), list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		seen := map[string]bool{}
		for _, ev := range list.Items {
			if ev.Regarding.Name == name {
				seen[ev.Reason] = true
			}
		}
		for _, p := range []scribev1.ExperimentPhase{scribev1.ExperimentProvisioning, scribev1.ExperimentReady, scribev1.ExperimentRunning, scribev1.ExperimentComplete} {
			if !seen[string(p)] {
				return false, fmt.Sprintf("events seen: %v", seen)
			}
		}
		return true, ""
	})
}

// TestExperimentApplyFailed: the Kustomization fails at Scribe's commit, so
// the experiment fails with Flux's message; when Flux later applies the
// commit the experiment resumes.
func TestExperimentApplyFailed(t *testing.T) {
	f := newFixture(t)
	f.startExperimentController(t)
	const name = "gateway-broken"
	exp := hubExperiment(f.ns, name)
	exp.Spec.Workflow = nil
	if err := f.e.c.Create(f.ctx(), exp); err != nil {
		t.Fatal(err)
	}
	e := f.waitPhase(t, name, scribev1.ExperimentProvisioning)
	rev := e.Status.Revision

	const fluxMsg = "Deployment/demo/demo-services dry-run failed: field is immutable"
	ks := kustomizationName("Experiment", f.ns, name)
	f.playFlux(t, ks, rev, false, meta.ReconciliationFailedReason, fluxMsg)
	e = f.waitPhase(t, name, scribev1.ExperimentFailed)
	ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != controller.ReasonApplyFailed || !strings.Contains(ready.Message, fluxMsg) {
		t.Fatalf("Ready condition after the apply failed: %s", expState(e))
	}
	if c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.StalledCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("not stalled after the apply failed: %s", expState(e))
	}
	f.holdsPhase(t, name, scribev1.ExperimentFailed, time.Second)

	// Flux retries and applies the same commit: no workflow, so Complete.
	f.playExperimentApplied(t, name, rev)
	e = f.waitPhase(t, name, scribev1.ExperimentComplete)
	if apimeta.FindStatusCondition(e.Status.Conditions, scribev1.StalledCondition) != nil {
		t.Fatalf("still stalled: %s", expState(e))
	}
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 1 {
		t.Fatalf("commits %v, want one", commits)
	}
}

// TestExperimentComponentFailed: Flux applied Scribe's commit, but the
// Kustomization delivering a component cannot find its path in the
// component's (ready) source: the Experiment is Failed with Flux's message in
// Ready and in the target's status, and resumes when Flux reports the
// component installed.
func TestExperimentComponentFailed(t *testing.T) {
	f := newFixture(t)
	f.startExperimentController(t)
	const name = "gateway-bad-path"
	exp := hubExperiment(f.ns, name)
	exp.Spec.Workflow = nil
	if err := f.e.c.Create(f.ctx(), exp); err != nil {
		t.Fatal(err)
	}
	e := f.waitPhase(t, name, scribev1.ExperimentProvisioning)
	f.playFlux(t, kustomizationName("Experiment", f.ns, name), e.Status.Revision, true, "", "")
	const fluxMsg = "kustomization path not found: stat /tmp/kustomization-2188/apps/demo-services: no such file or directory"
	f.playComponent(t, name, false, meta.ArtifactFailedReason, fluxMsg)
	e = f.waitPhase(t, name, scribev1.ExperimentFailed)
	ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
	if ready == nil || ready.Reason != controller.ReasonComponentFailed || !strings.Contains(ready.Message, fluxMsg) ||
		!strings.Contains(ready.Message, "Kustomization/"+f.ns+"/"+name+"-app-demo-services") {
		t.Fatalf("Ready condition after the component failed: %s", expState(e))
	}
	app := e.Status.Targets[0]
	if app.Phase != scribev1.ExperimentFailed || len(app.Components) != 1 || app.Components[0].Ready || app.Components[0].Message != fluxMsg {
		t.Fatalf("app target after the component failed: %+v", app)
	}

	f.playComponent(t, name, true, "", "")
	e = f.waitPhase(t, name, scribev1.ExperimentComplete)
	if app := e.Status.Targets[0]; len(app.Components) != 1 || !app.Components[0].Ready {
		t.Fatalf("app target once the component is installed: %+v", app)
	}
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 1 {
		t.Fatalf("commits %v, want one", commits)
	}
}

// TestExperimentMovesOnWatchedReadBackWithoutPolling: with health re-read
// only once an hour, the status updates of the sync Kustomization, of the
// component's delivery and of the Argo Workflow alone walk the Experiment to
// Complete.
func TestExperimentMovesOnWatchedReadBackWithoutPolling(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, argoWorkflowCRD)
	f.publishCatalog(t)
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	startControllerWith(t, f.e, f.ns, controller.Options{Poll: time.Hour, Concurrency: 2})
	const name = "watched"
	exp := hubExperiment(f.ns, name)
	if err := f.e.c.Create(f.ctx(), exp); err != nil {
		t.Fatal(err)
	}
	e := f.waitPhase(t, name, scribev1.ExperimentProvisioning)
	f.playFlux(t, kustomizationName("Experiment", f.ns, name), e.Status.Revision, true, "", "")
	waitFor(t, "the applied commit read from the sync Kustomization's event", func() (bool, string) {
		e = f.experiment(t, name)
		return len(e.Status.Targets) > 0 && strings.Contains(e.Status.Targets[0].Message, "waiting for components"), expState(e)
	})
	f.playComponent(t, name, true, "", "")
	e = f.waitPhase(t, name, scribev1.ExperimentReady)
	// The Argo Workflow's updates (watched as metadata) move it on too.
	wf := validationWorkflow(t, e)
	f.playArgo(t, wf, "Running", "")
	f.waitPhase(t, name, scribev1.ExperimentRunning)
	f.playArgo(t, wf, "Succeeded", "all routes answer")
	f.waitPhase(t, name, scribev1.ExperimentComplete)
}

// TestExperimentWorkflowFailed: a failed workflow fails the experiment for
// good, with the workflow's message.
func TestExperimentWorkflowFailed(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, argoWorkflowCRD)
	f.startExperimentController(t)
	const name = "gateway-wf-fails"
	if err := f.e.c.Create(f.ctx(), hubExperiment(f.ns, name)); err != nil {
		t.Fatal(err)
	}
	e := f.waitPhase(t, name, scribev1.ExperimentProvisioning)
	f.playExperimentApplied(t, name, e.Status.Revision)
	e = f.waitPhase(t, name, scribev1.ExperimentReady)
	wf := validationWorkflow(t, e)
	f.playArgo(t, wf, "Running", "")
	f.waitPhase(t, name, scribev1.ExperimentRunning)
	f.playArgo(t, wf, "Failed", "child 'check-routes' failed")
	e = f.waitPhase(t, name, scribev1.ExperimentFailed)
	ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
	if ready == nil || ready.Reason != controller.ReasonWorkflowFailed || !strings.Contains(ready.Message, "child 'check-routes' failed") {
		t.Fatalf("Ready condition after the workflow failed: %s", expState(e))
	}
	// Terminal: a later success report changes nothing.
	f.playArgo(t, wf, "Succeeded", "")
	f.holdsPhase(t, name, scribev1.ExperimentFailed, time.Second)
}

// TestExperimentRenderFailed: specs that do not render stall with
// RenderFailed and never reach Git.
func TestExperimentRenderFailed(t *testing.T) {
	f := newFixture(t)
	f.startExperimentController(t)

	badParam := hubExperiment(f.ns, "bad-param")
	badParam.Spec.Targets[0].Components[0].Params = &apiextensionsv1.JSON{Raw: []byte(`{"replicaz":"2"}`)}
	wfOnGKE := hubExperiment(f.ns, "wf-on-gke")
	wfOnGKE.Spec.Targets[1].Cluster = scribev1.ClusterSpec{Type: scribev1.ClusterGKE, Zone: "us-central1-a"}
	wfOnGKE.Spec.Targets[1].Components = []scribev1.Component{{Workflow: "k6-http-loadgen", Params: &apiextensionsv1.JSON{Raw: []byte(`{"targetUrl":"http://demo"}`)}}}
	for _, tc := range []struct {
		exp  *scribev1.Experiment
		want string
	}{
		{badParam, `no parameter "replicaz"`},
		{wfOnGKE, "workflow components run on the hub"},
	} {
		if err := f.e.c.Create(f.ctx(), tc.exp); err != nil {
			t.Fatal(err)
		}
		name := tc.exp.Name
		var e *scribev1.Experiment
		waitFor(t, name+" stalled with RenderFailed", func() (bool, string) {
			e = f.experiment(t, name)
			c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.StalledCondition)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == scribev1.RenderFailedReason, expState(e)
		})
		ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != scribev1.RenderFailedReason || !strings.Contains(ready.Message, tc.want) {
			t.Fatalf("%s: Ready condition: %s", name, expState(e))
		}
		if (e.Status.Phase != scribev1.ExperimentPending && e.Status.Phase != "") || e.Status.Revision != "" {
			t.Fatalf("%s: published despite the render error: %s", name, expState(e))
		}
	}
	f.holdsPhase(t, "bad-param", scribev1.ExperimentPending, time.Second)
	for _, name := range []string{"bad-param", "wf-on-gke"} {
		if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 0 {
			t.Fatalf("%s: commits %v, want none", name, commits)
		}
	}
}

// TestExperimentClusterTarget: a gke target is ready only when its Cluster
// API Cluster is Available and its kubeconfig Secret exists; the hub target
// depending on it waits for it.
func TestExperimentClusterTarget(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, capiClusterCRD)
	f.startExperimentController(t)
	const name = "edge"
	exp := hubExperiment(f.ns, name)
	exp.Spec.Workflow = nil
	exp.Spec.Targets[0].Cluster = scribev1.ClusterSpec{Type: scribev1.ClusterGKE, Zone: "us-central1-a"}
	if err := f.e.c.Create(f.ctx(), exp); err != nil {
		t.Fatal(err)
	}
	e := f.waitPhase(t, name, scribev1.ExperimentProvisioning)
	f.playExperimentApplied(t, name, e.Status.Revision)
	clusterName := name + "-app"
	targetsSay := func(what string, want func(app, loadgen scribev1.TargetStatus) bool) {
		t.Helper()
		waitFor(t, what, func() (bool, string) {
			e := f.experiment(t, name)
			if len(e.Status.Targets) != 2 {
				return false, expState(e)
			}
			return want(e.Status.Targets[0], e.Status.Targets[1]), expState(e)
		})
	}
	targetsSay("targets waiting for the cluster", func(app, loadgen scribev1.TargetStatus) bool {
		return app.Phase == scribev1.ExperimentProvisioning && !app.ClusterReady && app.KubeconfigSecret == clusterName+"-kubeconfig" &&
			loadgen.Phase == scribev1.ExperimentProvisioning && loadgen.ClusterReady && strings.Contains(loadgen.Message, "waiting for targets app")
	})

	// Cluster API reports the cluster Available; the kubeconfig is not there yet.
	cl := &unstructured.Unstructured{}
	cl.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	cl.SetKind("Cluster")
	cl.SetNamespace(f.ns)
	cl.SetName(clusterName)
	cl.Object["spec"] = map[string]any{
		"controlPlaneRef":   map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "GCPManagedControlPlane", "name": clusterName},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "GCPManagedCluster", "name": clusterName},
	}
	if err := f.e.c.Create(f.ctx(), cl); err != nil {
		t.Fatal(err)
	}
	cl.Object["status"] = map[string]any{
		"observedGeneration": cl.GetGeneration(),
		"phase":              "Provisioned",
		"conditions": []any{map[string]any{
			"type": "Available", "status": "True", "reason": "Available", "message": "",
			"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339), "observedGeneration": cl.GetGeneration(),
		}},
	}
	if err := f.e.c.Status().Update(f.ctx(), cl); err != nil {
		t.Fatal(err)
	}
	targetsSay("the app target waiting for its kubeconfig", func(app, _ scribev1.TargetStatus) bool {
		return !app.ClusterReady && strings.Contains(app.Message, "kubeconfig")
	})
	f.holdsPhase(t, name, scribev1.ExperimentProvisioning, time.Second)

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: clusterName + "-kubeconfig"}, Data: map[string][]byte{"value": []byte("apiVersion: v1\nkind: Config\n")}}
	if err := f.e.c.Create(f.ctx(), secret); err != nil {
		t.Fatal(err)
	}
	// Ready, then (no workflow) Complete.
	e = f.waitPhase(t, name, scribev1.ExperimentComplete)
	for _, ts := range e.Status.Targets {
		if ts.Phase != scribev1.ExperimentReady || !ts.ClusterReady {
			t.Fatalf("target %s: %s", ts.Name, expState(e))
		}
	}
}

// TestExperimentDeletion: deleting commits the removal and keeps the
// finalizer until the applier has pruned the per-CR Kustomization.
func TestExperimentDeletion(t *testing.T) {
	f := newFixture(t)
	f.startExperimentController(t)
	const name = "short-lived"
	exp := hubExperiment(f.ns, name)
	exp.Spec.Workflow = nil
	if err := f.e.c.Create(f.ctx(), exp); err != nil {
		t.Fatal(err)
	}
	e := f.waitPhase(t, name, scribev1.ExperimentProvisioning)
	ks := kustomizationName("Experiment", f.ns, name)
	f.playExperimentApplied(t, name, e.Status.Revision)
	f.waitPhase(t, name, scribev1.ExperimentComplete)

	if err := f.e.c.Delete(f.ctx(), f.experiment(t, name)); err != nil {
		t.Fatal(err)
	}
	var commits []string
	waitFor(t, "the removal commit", func() (bool, string) {
		commits = f.scribeCommits(t, experimentObject(f.ns, name))
		return len(commits) == 2, fmt.Sprintf("commits %v", commits)
	})
	if sync := f.fileAt(t, commits[1], "clusters/dev/"+f.ns+"/experiment/"+name+".sync.yaml"); sync != "" {
		t.Fatalf("the removal commit still has the sync object:\n%s", sync)
	}
	time.Sleep(500 * time.Millisecond)
	if e := f.experiment(t, name); e.DeletionTimestamp.IsZero() {
		t.Fatalf("not being deleted: %s", expState(e))
	}

	// Flux prunes the Kustomization: the finalizer goes.
	if err := f.e.c.Delete(f.ctx(), &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: ks.Namespace, Name: ks.Name}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the experiment gone", func() (bool, string) {
		err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: name}, &scribev1.Experiment{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 2 {
		t.Fatalf("commits %v, want the render and the removal", commits)
	}
}

// TestExperimentCompletion: manual completion waits for the annotation
// after the workflow succeeded; a workflow running past the timeout fails
// the experiment.
func TestExperimentCompletion(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, argoWorkflowCRD)
	f.startExperimentController(t)
	manual := hubExperiment(f.ns, "manual")
	manual.Spec.Workflow.Completion = &scribev1.Completion{Mode: "manual"}
	timeout := hubExperiment(f.ns, "timeout")
	timeout.Spec.Workflow.Completion = &scribev1.Completion{Mode: "workflow", Timeout: &metav1.Duration{Duration: 2 * time.Second}}
	wfs := map[string]scribev1.ObjectIdentity{}
	for _, exp := range []*scribev1.Experiment{manual, timeout} {
		if err := f.e.c.Create(f.ctx(), exp); err != nil {
			t.Fatal(err)
		}
		e := f.waitPhase(t, exp.Name, scribev1.ExperimentProvisioning)
		f.playExperimentApplied(t, exp.Name, e.Status.Revision)
		e = f.waitPhase(t, exp.Name, scribev1.ExperimentReady)
		wfs[exp.Name] = validationWorkflow(t, e)
		f.playArgo(t, wfs[exp.Name], "Running", "")
	}

	f.playArgo(t, wfs["manual"], "Succeeded", "")
	waitFor(t, "manual: waiting for the annotation", func() (bool, string) {
		e := f.experiment(t, "manual")
		c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReconcilingCondition)
		return e.Status.Phase == scribev1.ExperimentRunning && c != nil && c.Reason == controller.ReasonWaitingForCompletion, expState(e)
	})
	f.holdsPhase(t, "manual", scribev1.ExperimentRunning, time.Second)
	e := f.experiment(t, "manual")
	e.Annotations = map[string]string{controller.CompleteAnnotation: "true"}
	if err := f.e.c.Update(f.ctx(), e); err != nil {
		t.Fatal(err)
	}
	f.waitPhase(t, "manual", scribev1.ExperimentComplete)

	e = f.waitPhase(t, "timeout", scribev1.ExperimentFailed)
	if ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition); ready == nil || ready.Reason != controller.ReasonWorkflowTimeout {
		t.Fatalf("timeout: %s", expState(e))
	}
}
