package controller_test

// Longer than 500 lines on purpose: the Experiment's envtest scenarios
// share one fixture (fakes of the clusters, appliers and runs), and each
// scenario walks several stages.

import (
	"crypto/sha256"
	"encoding/hex"
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
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/crds/crdstest"
	"github.com/scribe-gitops/scribe/internal/publish/forge/forgetest"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// expInstallCRDs installs upstream CRDs, named "<project>/<file>" (see
// internal/crds), that the package's envtest does not install: Argo
// Workflows' Workflow, Testkube's CRDs and Cluster API's Cluster (the
// repository carries the first two, the Go module proxy serves the third).
// A test whose CRD cannot be found is skipped, or fails under
// SCRIBE_CRDS_REQUIRED=1 (package crdstest). Installing is idempotent.
func expInstallCRDs(t testing.TB, f *fixture, crds ...string) {
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
	if _, err := envtest.InstallCRDs(f.e.cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute}); err != nil {
		t.Fatalf("install CRDs %v: %v", crds, err)
	}
}

const (
	argoWorkflowCRD = "argo-workflows/argoproj.io_workflows.yaml"
	capiClusterCRD  = "cluster-api/cluster.x-k8s.io_clusters.yaml"
)

// testkubeCRDs are Testkube's CRDs: the TestWorkflow and its templates,
// the execution that runs one, and the trigger that re-runs it.
var testkubeCRDs = []string{
	"testkube/testworkflows.testkube.io_testworkflows.yaml",
	"testkube/testworkflows.testkube.io_testworkflowtemplates.yaml",
	"testkube/testworkflows.testkube.io_testworkflowexecutions.yaml",
	"testkube/tests.testkube.io_testtriggers.yaml",
}

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

func (f *fixture) experiment(t testing.TB, name string) *scribev1.Experiment {
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
// Ready (ready) or Ready=False with reason and message.
func (f *fixture) playComponent(t testing.TB, exp string, ready bool, reason, message string) {
	t.Helper()
	f.playDelivery(t, exp+"-app-demo-services", map[string]string{
		"app.kubernetes.io/managed-by": "scribe", "scribe.dev/experiment": exp, "scribe.dev/target": "app", "scribe.dev/component": "demo-services"},
		"./apps/demo-services", ready, reason, message)
}

// playTemplate does what Flux does with the Kustomization that delivers the
// workflow template comp (the hub Experiment's validation workflow, or a
// workflow component of target).
func (f *fixture) playTemplate(t testing.TB, exp, target, comp string, ready bool, reason, message string) {
	t.Helper()
	labels := map[string]string{"app.kubernetes.io/managed-by": "scribe", "scribe.dev/experiment": exp, "scribe.dev/component": comp}
	name := exp + "-" + comp
	if target != "" {
		labels["scribe.dev/target"] = target
		name = exp + "-" + target + "-" + comp
	}
	f.playDelivery(t, name, labels, "./workflows/"+comp, ready, reason, message)
}

// playDelivery does what Flux does with a Kustomization that delivers a
// catalog entry: it exists with the labels render gives it, and reports
// Ready (ready) or Ready=False with reason and message. The source it
// reads is a GitRepository that is Ready with an artifact.
func (f *fixture) playDelivery(t testing.TB, name string, labels map[string]string, path string, ready bool, reason, message string) {
	t.Helper()
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	f.playDeliveryCondition(t, name, labels, path, status, reason, message)
}

// playDeliveryCondition is playDelivery with the Ready condition's status:
// True (applied and healthy), False (reason and message), or Unknown, as
// kustomize-controller writes it while a reconcile is in progress (reason
// Progressing, Reconciling=True, no observed generation yet).
func (f *fixture) playDeliveryCondition(t testing.TB, name string, labels map[string]string, path string, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	ctx := f.ctx()
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
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: labels},
			Spec: kustomizev1.KustomizationSpec{
				Interval: metav1.Duration{Duration: 10 * time.Minute}, Path: path, Prune: true, Wait: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: name},
			},
		}
		if err := f.e.c.Create(ctx, ks); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if status == metav1.ConditionTrue {
		reason, message = meta.ReconciliationSucceededReason, "Applied revision: "+src.Status.Artifact.Revision
		ks.Status.LastAppliedRevision = src.Status.Artifact.Revision
	}
	ks.Status.ObservedGeneration = ks.Generation
	ks.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: ks.Generation, LastTransitionTime: metav1.Now()}}
	if status == metav1.ConditionUnknown {
		ks.Status.ObservedGeneration = 0
		ks.Status.Conditions = append(ks.Status.Conditions, metav1.Condition{Type: meta.ReconcilingCondition, Status: metav1.ConditionTrue,
			Reason: meta.ProgressingReason, Message: "Running health checks for revision " + src.Status.Artifact.Revision + " with a timeout of 10m0s",
			ObservedGeneration: ks.Generation, LastTransitionTime: metav1.Now()})
	}
	if err := f.e.c.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}
}

// waitStage waits for stage n's commit to be recorded and returns the
// Experiment as it was then.
func (f *fixture) waitStage(t testing.TB, name string, n int32) *scribev1.Experiment {
	t.Helper()
	var e *scribev1.Experiment
	waitFor(t, fmt.Sprintf("experiment %s: stage %d committed", name, n), func() (bool, string) {
		e = f.experiment(t, name)
		return stageCommitted(e, n), expState(e)
	})
	return e
}

// stageCommitted reports whether e's status records stage n's commit.
// The stage's commit is recorded in status.stages too: an intent saved
// before the push already says stage n, with the previous stage's
// revision still in status.revision.
func stageCommitted(e *scribev1.Experiment, n int32) bool {
	recorded := false
	for _, s := range e.Status.Stages {
		recorded = recorded || (s.Stage == n && s.Commit == e.Status.Revision)
	}
	return e.Status.Stage == n && e.Status.Revision != "" && recorded && e.Status.ObservedGeneration == e.Generation
}

// applyStage waits for stage n's commit and plays Flux applying it and
// installing what it adds of the hub Experiment: the demo-services
// component (stage 2) and the validation workflow's template (stage 3).
func (f *fixture) applyStage(t testing.TB, name string, n int32) string {
	t.Helper()
	e := f.waitStage(t, name, n)
	f.playFlux(t, kustomizationName("Experiment", f.ns, name), e.Status.Revision, true, "", "")
	switch n {
	case scribev1.StageComponents:
		if len(e.Spec.Targets[0].Components) > 0 && e.Spec.Targets[0].Components[0].App == "demo-services" {
			f.playComponent(t, name, true, "", "")
		}
	case scribev1.StageWorkflowTemplates:
		if e.Spec.Workflow != nil {
			f.playTemplate(t, name, "", workflowTemplate(e.Spec.Workflow), true, "", "")
		}
	}
	return e.Status.Revision
}

// workflowTemplate is the catalog entry that delivers the validation
// workflow's templates: the Argo WorkflowTemplate the spec names, or the
// agent-eval TestWorkflowTemplates of a Testkube evaluation.
func workflowTemplate(wf *scribev1.ExperimentWorkflow) string {
	if wf.Engine == scribev1.EngineTestkube {
		return "agent-eval"
	}
	return wf.Template
}

// provisionExperiment walks the hub Experiment through its four stages,
// each applied as Flux would, and returns the commits.
func (f *fixture) provisionExperiment(t *testing.T, name string) []string {
	t.Helper()
	var commits []string
	for n := scribev1.StageClusters; n <= scribev1.StageWorkflow; n++ {
		commits = append(commits, f.applyStage(t, name, n))
	}
	return commits
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

// TestExperimentLifecycle walks a hub-only Experiment through its four
// commit stages and every phase, each entered only once the test (playing
// Flux and Argo Workflows) has given the evidence: the validation Workflow
// is committed only once every target is Ready and its template is
// delivered, and exactly once.
func TestExperimentLifecycle(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, argoWorkflowCRD)
	f.startExperimentController(t)
	const name = "gateway-hub"
	if err := f.e.c.Create(f.ctx(), hubExperiment(f.ns, name)); err != nil {
		t.Fatal(err)
	}
	dir := "clusters/dev/" + f.ns + "/experiment/" + name + "/"
	ks := kustomizationName("Experiment", f.ns, name)

	// Stage 1 (clusters): one commit, recorded in status; nothing applied yet.
	e := f.waitStage(t, name, scribev1.StageClusters)
	if e.Status.Phase != scribev1.ExperimentProvisioning || e.Status.Digest == "" || e.Status.GeneratedResources == nil {
		t.Fatalf("stage 1 without a recorded commit: %s", expState(e))
	}
	rev1 := e.Status.Revision
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 1 || commits[0] != rev1 {
		t.Fatalf("commits %v, want exactly [%s]", commits, rev1)
	}
	if sync := f.fileAt(t, rev1, "clusters/dev/"+f.ns+"/experiment/"+name+".sync.yaml"); !strings.Contains(sync, "name: "+kustomizationName("Experiment", f.ns, name).Name+"\n") {
		t.Fatalf("commit %s has no sync object for the experiment:\n%s", rev1, sync)
	}
	if f.fileAt(t, rev1, dir+"kustomization-"+name+"-app-demo-services.yaml") != "" {
		t.Fatalf("stage 1 commits the components already")
	}
	if !slices.Contains(e.Finalizers, controller.Finalizer) {
		t.Fatalf("finalizer missing: %v", e.Finalizers)
	}
	f.holdsPhase(t, name, scribev1.ExperimentProvisioning, time.Second)
	e = f.experiment(t, name)
	if c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonApplyPending || e.Status.Stage != 1 {
		t.Fatalf("Ready or past stage 1 before its apply: %s", expState(e))
	}

	// Flux applies stage 1; the hub clusters are ready: stage 2 (components).
	f.playFlux(t, ks, rev1, true, "", "")
	e = f.waitStage(t, name, scribev1.StageComponents)
	rev2 := e.Status.Revision
	if f.fileAt(t, rev2, dir+"kustomization-"+name+"-app-demo-services.yaml") == "" {
		t.Fatalf("stage 2 (%s) does not deliver the component", rev2)
	}
	if f.fileAt(t, rev2, dir+"kustomization-"+name+"-gateway-validation.yaml") != "" {
		t.Fatalf("stage 2 delivers the workflow template already")
	}
	// Applied, but the component's own Kustomization has not reported yet:
	// still stage 2, and the target says what it waits for.
	f.playFlux(t, ks, rev2, true, "", "")
	waitFor(t, "the app target waiting for its component", func() (bool, string) {
		e = f.experiment(t, name)
		return len(e.Status.Targets) == 2 && strings.Contains(e.Status.Targets[0].Message, "waiting for components demo-services"), expState(e)
	})
	f.holdsPhase(t, name, scribev1.ExperimentProvisioning, time.Second)
	if e = f.experiment(t, name); e.Status.Stage != scribev1.StageComponents || len(f.scribeCommits(t, experimentObject(f.ns, name))) != 2 {
		t.Fatalf("moved past stage 2 before its targets were ready: %s", expState(e))
	}

	// The component is installed: stage 3 (workflow templates).
	f.playComponent(t, name, true, "", "")
	e = f.waitStage(t, name, scribev1.StageWorkflowTemplates)
	rev3 := e.Status.Revision
	if f.fileAt(t, rev3, dir+"kustomization-"+name+"-gateway-validation.yaml") == "" {
		t.Fatalf("stage 3 (%s) does not deliver the workflow template", rev3)
	}
	f.playFlux(t, ks, rev3, true, "", "")
	f.playTemplate(t, name, "", "gateway-validation", true, "", "")

	// Stage 4 (workflow runs): the Workflow, in this commit only.
	e = f.waitStage(t, name, scribev1.StageWorkflow)
	rev4 := e.Status.Revision
	wf := validationWorkflow(t, e)
	for _, c := range []string{rev1, rev2, rev3} {
		if f.fileAt(t, c, dir+"workflow-"+wf.Name+".yaml") != "" {
			t.Fatalf("the Workflow is in %s, before stage 4", c)
		}
	}
	if f.fileAt(t, rev4, dir+"workflow-"+wf.Name+".yaml") == "" {
		t.Fatalf("stage 4 (%s) has no Workflow %s", rev4, wf.Name)
	}
	if got := e.Status.Stages; len(got) != 4 || got[0].Commit != rev1 || got[1].Commit != rev2 || got[2].Commit != rev3 || got[3].Commit != rev4 {
		t.Fatalf("status.stages = %+v, want the four commits in order", got)
	}
	if msg, err := f.commitMessage(t, rev4); err != nil || !strings.Contains(msg, "stage 4 (workflow runs)") || !strings.Contains(msg, "target app: Ready") {
		t.Fatalf("stage 4's commit message does not say which stage and on what evidence (%v):\n%s", err, msg)
	}
	f.holdsPhase(t, name, scribev1.ExperimentProvisioning, 500*time.Millisecond)
	f.playFlux(t, ks, rev4, true, "", "")
	e = f.waitPhase(t, name, scribev1.ExperimentReady)
	for _, ts := range e.Status.Targets {
		if ts.Phase != scribev1.ExperimentReady || !ts.ClusterReady {
			t.Fatalf("target %s not ready in phase Ready: %s", ts.Name, expState(e))
		}
	}
	if len(e.Status.Templates) != 1 || !e.Status.Templates[0].Ready || e.Status.Templates[0].Name != "gateway-validation" {
		t.Fatalf("templates in phase Ready: %+v", e.Status.Templates)
	}

	// The workflow does not exist yet, then exists without a phase: still Ready.
	f.holdsPhase(t, name, scribev1.ExperimentReady, time.Second)
	f.playArgo(t, wf, "", "")
	f.holdsPhase(t, name, scribev1.ExperimentReady, time.Second)

	// Argo runs it.
	f.playArgo(t, wf, "Running", "")
	e = f.waitPhase(t, name, scribev1.ExperimentRunning)
	if e.Status.Workflow == nil || e.Status.Workflow.Name != wf.Name || e.Status.Workflow.Kind != "Workflow" || e.Status.Workflow.Phase != "Running" {
		t.Fatalf("workflow status while running: %s", expState(e))
	}

	// Argo reports success.
	f.playArgo(t, wf, "Succeeded", "all routes answer")
	e = f.waitPhase(t, name, scribev1.ExperimentComplete)
	if c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue || c.Reason != controller.ReasonSucceeded {
		t.Fatalf("Ready condition when complete: %s", expState(e))
	}
	if apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReconcilingCondition) != nil {
		t.Fatalf("still reconciling when complete: %s", expState(e))
	}

	// Exactly the four stage commits, the Workflow committed once.
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); !slices.Equal(commits, []string{rev1, rev2, rev3, rev4}) {
		t.Fatalf("commits %v, want exactly the stages' [%s %s %s %s]", commits, rev1, rev2, rev3, rev4)
	}
	waitFor(t, "an event per phase and stage", func() (bool, string) {
		list := &eventsv1.EventList{}
		if err := f.e.c.List(f.ctx(), list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		seen := map[string]int{}
		for _, ev := range list.Items {
			if ev.Regarding.Name == name {
				seen[ev.Reason] += max(int(ev.DeprecatedCount), 1)
			}
		}
		for _, p := range []scribev1.ExperimentPhase{scribev1.ExperimentProvisioning, scribev1.ExperimentReady, scribev1.ExperimentRunning, scribev1.ExperimentComplete} {
			if seen[string(p)] == 0 {
				return false, fmt.Sprintf("events seen: %v", seen)
			}
		}
		return seen[controller.ReasonStageCommitted] >= 4, fmt.Sprintf("events seen: %v", seen)
	})
}

// TestExperimentMissingWorkflowTemplateHoldsProvisioning: stage 3 is
// applied but the validation workflow's template delivery does not exist
// (then fails): the Experiment stays in Provisioning with the reason and
// the Workflow is never committed, until the template is delivered.
func TestExperimentMissingWorkflowTemplateHoldsProvisioning(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, argoWorkflowCRD)
	f.startExperimentController(t)
	const name = "no-template"
	if err := f.e.c.Create(f.ctx(), hubExperiment(f.ns, name)); err != nil {
		t.Fatal(err)
	}
	f.applyStage(t, name, scribev1.StageClusters)
	f.applyStage(t, name, scribev1.StageComponents)
	e := f.waitStage(t, name, scribev1.StageWorkflowTemplates)
	f.playFlux(t, kustomizationName("Experiment", f.ns, name), e.Status.Revision, true, "", "")
	waitFor(t, "Provisioning, waiting for the workflow template", func() (bool, string) {
		e = f.experiment(t, name)
		c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
		return e.Status.Phase == scribev1.ExperimentProvisioning && c != nil && c.Reason == controller.ReasonWaitingForWorkflowTemplate &&
			strings.Contains(c.Message, "gateway-validation") && strings.Contains(c.Message, "Kustomization/"+f.ns+"/"+name+"-gateway-validation"), expState(e)
	})
	f.holdsPhase(t, name, scribev1.ExperimentProvisioning, 2*time.Second)
	if e = f.experiment(t, name); e.Status.Stage != scribev1.StageWorkflowTemplates || len(f.scribeCommits(t, experimentObject(f.ns, name))) != 3 {
		t.Fatalf("committed past stage 3 without the template: %s", expState(e))
	}

	// Flux cannot build the template's path: Failed with Flux's message
	// (not terminal), still no Workflow.
	const fluxMsg = "kustomization path not found: stat /tmp/kustomization-1/workflows/gateway-validation: no such file or directory"
	f.playTemplate(t, name, "", "gateway-validation", false, meta.ArtifactFailedReason, fluxMsg)
	e = f.waitPhase(t, name, scribev1.ExperimentFailed)
	if c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition); c == nil || c.Reason != controller.ReasonComponentFailed || !strings.Contains(c.Message, fluxMsg) {
		t.Fatalf("Ready after the template failed: %s", expState(e))
	}
	if len(f.scribeCommits(t, experimentObject(f.ns, name))) != 3 {
		t.Fatalf("committed after the template failed: %s", expState(e))
	}

	// Delivered: stage 4 follows.
	f.playTemplate(t, name, "", "gateway-validation", true, "", "")
	e = f.waitStage(t, name, scribev1.StageWorkflow)
	validationWorkflow(t, e)
}

// TestExperimentFailedLoadGeneratorFailsTheExperiment: a workflow
// component's Workflow (a load generator) is committed at stage 4 beside
// the validation run and read back like it; when Argo Workflows reports it
// failed, the Experiment fails for good with the workflow's message.
func TestExperimentFailedLoadGeneratorFailsTheExperiment(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, argoWorkflowCRD)
	f.startExperimentController(t)
	const name = "loadgen-fails"
	exp := hubExperiment(f.ns, name)
	exp.Spec.Targets[1].Components = []scribev1.Component{{Workflow: "k6-http-loadgen", Params: &apiextensionsv1.JSON{Raw: []byte(`{"targetUrl":"http://demo-services.demo-apps/api"}`)}}}
	if err := f.e.c.Create(f.ctx(), exp); err != nil {
		t.Fatal(err)
	}
	f.applyStage(t, name, scribev1.StageClusters)
	f.applyStage(t, name, scribev1.StageComponents)
	e := f.waitStage(t, name, scribev1.StageWorkflowTemplates)
	f.playFlux(t, kustomizationName("Experiment", f.ns, name), e.Status.Revision, true, "", "")
	f.playTemplate(t, name, "", "gateway-validation", true, "", "")
	// The load generator's template is not delivered yet: no stage 4.
	waitFor(t, "waiting for the load generator's template", func() (bool, string) {
		e = f.experiment(t, name)
		c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
		return c != nil && c.Reason == controller.ReasonWaitingForWorkflowTemplate && strings.Contains(c.Message, "k6-http-loadgen"), expState(e)
	})
	f.playTemplate(t, name, "loadgen", "k6-http-loadgen", true, "", "")
	e = f.waitStage(t, name, scribev1.StageWorkflow)
	var loadgen scribev1.ObjectIdentity
	for _, o := range e.Status.GeneratedResources.Objects {
		if o.Kind == "Workflow" && strings.HasPrefix(o.Name, name+"-loadgen-k6-http-loadgen-") {
			loadgen = o
		}
	}
	if loadgen.Name == "" {
		t.Fatalf("stage 4 has no load generator Workflow: %+v", e.Status.GeneratedResources.Objects)
	}
	f.playFlux(t, kustomizationName("Experiment", f.ns, name), e.Status.Revision, true, "", "")
	f.waitPhase(t, name, scribev1.ExperimentReady)
	f.playArgo(t, validationWorkflow(t, e), "Running", "")
	f.playArgo(t, loadgen, "Running", "")
	e = f.waitPhase(t, name, scribev1.ExperimentRunning)
	const argoMsg = "child 'k6-run' failed: thresholds on metrics 'http_req_failed' have been crossed"
	f.playArgo(t, loadgen, "Failed", argoMsg)
	e = f.waitPhase(t, name, scribev1.ExperimentFailed)
	ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
	if ready == nil || ready.Reason != controller.ReasonWorkflowFailed || !strings.Contains(ready.Message, argoMsg) || !strings.Contains(ready.Message, "k6-http-loadgen") {
		t.Fatalf("Ready after the load generator failed: %s", expState(e))
	}
	if len(e.Status.Runs) != 1 || e.Status.Runs[0].Phase != "Failed" || e.Status.Runs[0].Target != "loadgen" || e.Status.Runs[0].Component != "k6-http-loadgen" {
		t.Fatalf("status.runs after the load generator failed: %+v", e.Status.Runs)
	}
	f.holdsPhase(t, name, scribev1.ExperimentFailed, time.Second)
}

// testkubeExperiment is an agent evaluation on the hub: the agent's
// demo-services on one target, a second target depending on it, and the
// Testkube engine with inline scenarios and a trigger.
func testkubeExperiment(ns, name string) *scribev1.Experiment {
	e := hubExperiment(ns, name)
	e.Spec.Description = "Agent evaluation on the hub"
	e.Spec.Workflow = &scribev1.ExperimentWorkflow{
		Engine:     scribev1.EngineTestkube,
		Completion: &scribev1.Completion{Mode: "workflow"},
		Testkube: &scribev1.TestkubeSpec{
			Scenarios: []scribev1.Scenario{
				{Name: "refund", Input: "I want a refund for order 1234", ExpectedOutput: "routes to billing", Tags: []string{"billing"}},
				{Name: "outage", Input: "Your API returns 503", ExpectedOutput: "routes to on-call"},
			},
			AgentRef:         scribev1.AgentReference{Name: "demo-services"},
			LLMAsAJudgeModel: "gpt-judge-small",
			JudgeURL:         "http://llm-judge.ml.svc.cluster.local/v1/chat/completions",
			Trigger:          &scribev1.Trigger{Enabled: true},
		},
	}
	return e
}

// filesAt lists the files under dir in the repository at a commit.
func (f *fixture) filesAt(t *testing.T, commit, dir string) []string {
	t.Helper()
	return strings.Fields(publishtest.Git(t, "", "--git-dir", f.srv.BareDir(repoName), "ls-tree", "-r", "--name-only", commit, "--", dir))
}

// withPrefix are the files whose base name starts with prefix.
func withPrefix(files []string, prefix string) []string {
	var out []string
	for _, p := range files {
		if strings.HasPrefix(filepath.Base(p), prefix) {
			out = append(out, p)
		}
	}
	return out
}

// applyAdded does what Flux does with the Testkube objects and ConfigMaps
// a commit adds under dir (to the tree of prev): it creates each as
// committed, so the real CRDs' schemas judge them. It returns their paths.
func (f *fixture) applyAdded(t *testing.T, prev, commit, dir string) []string {
	t.Helper()
	before := map[string]bool{}
	for _, p := range f.filesAt(t, prev, dir) {
		before[p] = true
	}
	var applied []string
	for _, p := range f.filesAt(t, commit, dir) {
		// The sync Kustomization applies the directory's own files; a
		// hydrated component's subdirectory is its delivery's.
		if before[p] || strings.Contains(strings.TrimPrefix(p, dir), "/") {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(f.fileAt(t, commit, p)))
		if err != nil {
			t.Fatalf("%s at %s: %v", p, commit, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s at %s: %v", p, commit, err)
		}
		if !strings.HasSuffix(u.GroupVersionKind().Group, "testkube.io") && u.GetKind() != "ConfigMap" {
			continue
		}
		if err := f.e.c.Create(f.ctx(), u); err != nil {
			t.Fatalf("apply %s of %s: %v", p, commit, err)
		}
		applied = append(applied, p)
	}
	return applied
}

// testkubeRun is one state of a Testkube execution: the result's status
// and each step's, in the TestWorkflow's order, and the error message of
// the first failed step.
type testkubeRun struct {
	status string
	steps  []string
	failed string
}

// playTestkube does what Testkube does with the TestWorkflowExecution id:
// it runs the TestWorkflow the object names for the object's generation and
// records the execution through the status subresource as Testkube maps it
// (MapTestWorkflowExecutionStatusAPIToKube): status.generation, and
// status.latestExecution with the execution's id, name, number, signature,
// result (predictedStatus is written from status), the TestWorkflow it ran
// and the running context of an execution started by a
// TestWorkflowExecution object.
func (f *fixture) playTestkube(t *testing.T, id scribev1.ObjectIdentity, run testkubeRun) {
	t.Helper()
	ctx := f.ctx()
	twe := &unstructured.Unstructured{}
	twe.SetAPIVersion(id.APIVersion)
	twe.SetKind(id.Kind)
	if err := f.e.c.Get(ctx, types.NamespacedName{Namespace: id.Namespace, Name: id.Name}, twe); err != nil {
		t.Fatal(err)
	}
	twName, _, _ := unstructured.NestedString(twe.Object, "spec", "testWorkflow", "name")
	tw := &unstructured.Unstructured{}
	tw.SetAPIVersion("testworkflows.testkube.io/v1")
	tw.SetKind("TestWorkflow")
	if err := f.e.c.Get(ctx, types.NamespacedName{Namespace: id.Namespace, Name: twName}, tw); err != nil {
		t.Fatalf("the TestWorkflow %s the execution runs: %v", twName, err)
	}
	steps, _, _ := unstructured.NestedSlice(tw.Object, "spec", "steps")
	if len(steps) != len(run.steps) {
		t.Fatalf("TestWorkflow %s has %d steps, the run gives %d", twName, len(steps), len(run.steps))
	}
	at := func(d time.Duration) string { return twe.GetCreationTimestamp().Add(d).UTC().Format(time.RFC3339) }
	signature := make([]any, 0, len(steps))
	results := map[string]any{}
	for i, s := range steps {
		step, _ := s.(map[string]any)
		stepName, _, _ := unstructured.NestedString(step, "name")
		ref := fmt.Sprintf("r%d%s", i+1, stepName)
		signature = append(signature, map[string]any{"ref": ref, "name": stepName})
		if run.steps[i] == "queued" {
			results[ref] = map[string]any{"status": "queued", "queuedAt": at(time.Second)}
			continue
		}
		r := map[string]any{"status": run.steps[i], "queuedAt": at(time.Second), "startedAt": at(2 * time.Second)}
		switch run.steps[i] {
		case "passed":
			r["finishedAt"], r["exitCode"] = at(10*time.Second), int64(0)
		case "failed":
			r["finishedAt"], r["exitCode"], r["errorMessage"] = at(10*time.Second), int64(1), run.failed
		case "skipped", "aborted":
			r["finishedAt"] = at(10 * time.Second)
		}
		results[ref] = r
	}
	result := map[string]any{
		"status": run.status, "predictedStatus": run.status,
		"queuedAt": at(time.Second), "initialization": map[string]any{"status": "passed", "exitCode": int64(0)},
		"steps": results,
	}
	if run.status != "queued" {
		result["startedAt"] = at(2 * time.Second)
	}
	switch run.status {
	case "passed", "failed", "aborted":
		result["finishedAt"], result["duration"], result["durationMs"] = at(30*time.Second), "29s", int64(29000)
	}
	labels, _, _ := unstructured.NestedMap(tw.Object, "metadata", "labels")
	ran := map[string]any{
		"apiVersion": tw.GetAPIVersion(), "kind": tw.GetKind(),
		"metadata": map[string]any{"name": tw.GetName(), "namespace": tw.GetNamespace(), "labels": labels,
			"creationTimestamp": tw.GetCreationTimestamp().UTC().Format(time.RFC3339)},
		"spec": tw.Object["spec"],
	}
	twe.Object["status"] = map[string]any{
		"generation": twe.GetGeneration(),
		"latestExecution": map[string]any{
			"id": "6650a1b2c3d4e5f6a7b8c9d0", "name": twName + "-1", "namespace": id.Namespace, "number": int64(1),
			"scheduledAt": at(time.Second), "statusAt": at(time.Minute),
			"signature": signature, "result": result, "workflow": ran, "resolvedWorkflow": ran,
			"testWorkflowExecutionName": id.Name,
			"runningContext": map[string]any{
				"interface": map[string]any{"type": "api"},
				"actor":     map[string]any{"name": id.Name, "type": "testworkflowexecution"},
			},
		},
	}
	if err := f.e.c.Status().Update(ctx, twe); err != nil {
		t.Fatalf("write the execution's status as Testkube does: %v", err)
	}
}

// TestExperimentTestkubeEvaluationIsCommittedLastAndDecidesTheOutcome walks
// an agent evaluation (workflow.engine: testkube) through its four commit
// stages against the real Testkube CRDs: the TestWorkflow and its
// experiment.json ConfigMap arrive at stage 3 with the agent-eval
// templates' delivery; while that delivery is missing or still
// reconciling the Experiment stays in Provisioning with the reason; the
// TestWorkflowExecution is in stage 4's commit only; every Testkube object
// is in Testkube's namespace (testkube), named after the Experiment's
// namespace and name, and read back there; and the execution Testkube
// records decides the outcome.
func TestExperimentTestkubeEvaluationIsCommittedLastAndDecidesTheOutcome(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, testkubeCRDs...)
	// Testkube's namespace, where the evaluation's objects are rendered.
	if err := f.e.c.Create(f.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scribev1.DefaultTestkubeNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	f.startExperimentController(t)
	for _, tc := range []struct {
		name      string
		ends      testkubeRun
		wantPhase scribev1.ExperimentPhase
		wantReady metav1.ConditionStatus
		// wantReason and wantMessage are in the Ready condition.
		wantReason  string
		wantMessage []string
	}{
		{
			name:      "a failed step fails the Experiment with the step's message",
			ends:      testkubeRun{status: "failed", steps: []string{"passed", "failed", "skipped", "skipped"}, failed: "judge scored 2 of 2 scenarios below 0.7"},
			wantPhase: scribev1.ExperimentFailed, wantReady: metav1.ConditionFalse, wantReason: controller.ReasonWorkflowFailed,
			wantMessage: []string{"failed: step r2evaluate: judge scored 2 of 2 scenarios below 0.7"},
		},
		{
			name:      "an aborted execution fails the Experiment",
			ends:      testkubeRun{status: "aborted", steps: []string{"passed", "aborted", "skipped", "skipped"}},
			wantPhase: scribev1.ExperimentFailed, wantReady: metav1.ConditionFalse, wantReason: controller.ReasonWorkflowFailed,
			wantMessage: []string{"test workflow execution", "-evaluation-1 aborted"},
		},
		{
			name:      "a passed execution completes the Experiment",
			ends:      testkubeRun{status: "passed", steps: []string{"passed", "passed", "passed", "passed"}},
			wantPhase: scribev1.ExperimentComplete, wantReady: metav1.ConditionTrue, wantReason: controller.ReasonSucceeded,
			wantMessage: []string{"succeeded"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("eval-%s", tc.ends.status)
			if err := f.e.c.Create(f.ctx(), testkubeExperiment(f.ns, name)); err != nil {
				t.Fatal(err)
			}
			dir := "clusters/dev/" + f.ns + "/experiment/" + name + "/"
			// The Testkube objects are in Testkube's namespace, named
			// after the Experiment's namespace and name and a hash of both.
			sum := sha256.Sum256([]byte(f.ns + "/" + name))
			tk := f.ns + "-" + name + "-" + hex.EncodeToString(sum[:])[:8]
			ks := kustomizationName("Experiment", f.ns, name)
			rev1 := f.applyStage(t, name, scribev1.StageClusters)
			rev2 := f.applyStage(t, name, scribev1.StageComponents)

			// Stage 3: the TestWorkflow, its ConfigMap and the templates'
			// delivery; Flux applies them, the delivery has not reported.
			e := f.waitStage(t, name, scribev1.StageWorkflowTemplates)
			rev3 := e.Status.Revision
			if got := f.applyAdded(t, rev2, rev3, dir); !slices.Equal(got, []string{dir + "configmap-" + tk + "-experiment.yaml", dir + "testworkflow-" + tk + "-evaluation.yaml"}) {
				t.Fatalf("stage 3 (%s) adds %v, want the TestWorkflow and its experiment.json ConfigMap", rev3, got)
			}
			if f.fileAt(t, rev3, dir+"kustomization-"+name+"-agent-eval.yaml") == "" {
				t.Fatalf("stage 3 (%s) does not deliver the agent-eval templates", rev3)
			}
			f.playFlux(t, ks, rev3, true, "", "")
			delivery := "Kustomization/" + f.ns + "/" + name + "-agent-eval"
			heldFor := func(what string) {
				t.Helper()
				waitFor(t, "Provisioning while the agent-eval templates' delivery is "+what, func() (bool, string) {
					e = f.experiment(t, name)
					c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
					return e.Status.Phase == scribev1.ExperimentProvisioning && c != nil && c.Reason == controller.ReasonWaitingForWorkflowTemplate &&
						strings.Contains(c.Message, "agent-eval ("+delivery) && strings.Contains(c.Message, what), expState(e)
				})
				f.holdsPhase(t, name, scribev1.ExperimentProvisioning, time.Second)
				if e = f.experiment(t, name); e.Status.Stage != scribev1.StageWorkflowTemplates || len(f.scribeCommits(t, experimentObject(f.ns, name))) != 3 {
					t.Fatalf("committed past stage 3 while the templates' delivery is %s: %s", what, expState(e))
				}
			}
			heldFor("not created yet")
			f.playDeliveryCondition(t, name+"-agent-eval", map[string]string{"app.kubernetes.io/managed-by": "scribe", "scribe.dev/experiment": name, "scribe.dev/component": "agent-eval"},
				"./workflows/agent-eval", metav1.ConditionUnknown, meta.ProgressingReason, "Reconciliation in progress")
			heldFor("Reconciliation in progress")

			// Delivered and healthy: stage 4, the execution, in this commit only.
			f.playTemplate(t, name, "", "agent-eval", true, "", "")
			e = f.waitStage(t, name, scribev1.StageWorkflow)
			rev4 := e.Status.Revision
			if e.Status.GeneratedResources == nil {
				t.Fatalf("no generatedResources: %s", expState(e))
			}
			var run scribev1.ObjectIdentity
			for _, o := range e.Status.GeneratedResources.Objects {
				if o.Kind == "TestWorkflowExecution" {
					run = o
				}
			}
			if run.Name == "" || !strings.HasPrefix(run.Name, tk+"-evaluation-") {
				t.Fatalf("stage 4 generates no TestWorkflowExecution: %+v", e.Status.GeneratedResources.Objects)
			}
			if run.Namespace != scribev1.DefaultTestkubeNamespace {
				t.Fatalf("the TestWorkflowExecution %s is in namespace %q, want Testkube's %q", run.Name, run.Namespace, scribev1.DefaultTestkubeNamespace)
			}
			commits := f.scribeCommits(t, experimentObject(f.ns, name))
			if !slices.Equal(commits, []string{rev1, rev2, rev3, rev4}) {
				t.Fatalf("commits %v, want exactly the stages' [%s %s %s %s]", commits, rev1, rev2, rev3, rev4)
			}
			var carrying []string
			for _, c := range commits {
				if len(withPrefix(f.filesAt(t, c, dir), "testworkflowexecution-")) > 0 {
					carrying = append(carrying, c)
				}
			}
			if !slices.Equal(carrying, []string{rev4}) {
				t.Fatalf("commits carrying a TestWorkflowExecution: %v, want stage 4's %s only", carrying, rev4)
			}
			if msg, err := f.commitMessage(t, rev4); err != nil || !strings.Contains(msg, "stage 4 (workflow runs)") || !strings.Contains(msg, "workflow template agent-eval: ready=true") {
				t.Fatalf("stage 4's commit message does not say which stage and on what evidence (%v):\n%s", err, msg)
			}
			// Flux applies stage 4: the execution (and the trigger) exist,
			// Testkube has not picked the execution up.
			if got := f.applyAdded(t, rev3, rev4, dir); !slices.Equal(got, []string{dir + "testtrigger-" + tk + "-evaluation.yaml", dir + "testworkflowexecution-" + run.Name + ".yaml"}) {
				t.Fatalf("stage 4 (%s) adds %v, want the trigger and the execution", rev4, got)
			}
			f.playFlux(t, ks, rev4, true, "", "")
			f.waitPhase(t, name, scribev1.ExperimentReady)
			f.holdsPhase(t, name, scribev1.ExperimentReady, time.Second)

			// Testkube queues and runs the execution.
			f.playTestkube(t, run, testkubeRun{status: "queued", steps: []string{"queued", "queued", "queued", "queued"}})
			f.playTestkube(t, run, testkubeRun{status: "running", steps: []string{"passed", "running", "queued", "queued"}})
			waitFor(t, "Running, with the execution's status", func() (bool, string) {
				e = f.experiment(t, name)
				w := e.Status.Workflow
				return e.Status.Phase == scribev1.ExperimentRunning && w != nil && w.Kind == "TestWorkflowExecution" && w.Name == run.Name && w.Phase == "running", expState(e)
			})

			// It ends.
			f.playTestkube(t, run, tc.ends)
			e = f.waitPhase(t, name, tc.wantPhase)
			ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
			if ready == nil || ready.Status != tc.wantReady || ready.Reason != tc.wantReason || !strings.Contains(ready.Message, "TestWorkflowExecution "+run.Name) {
				t.Fatalf("Ready once the execution %s: %s", tc.ends.status, expState(e))
			}
			for _, want := range tc.wantMessage {
				if !strings.Contains(ready.Message, want) {
					t.Fatalf("Ready's message does not say %q: %s", want, expState(e))
				}
			}
			if e.Status.Workflow == nil || e.Status.Workflow.Phase != tc.ends.status {
				t.Fatalf("status.workflow once the execution %s: %s", tc.ends.status, expState(e))
			}
			// Final at this generation, and still exactly the four commits.
			f.holdsPhase(t, name, tc.wantPhase, time.Second)
			if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 4 {
				t.Fatalf("commits %v after the execution ended, want the four stages'", commits)
			}
		})
	}
}

// TestExperimentRestartedMidStageNeitherRepeatsNorSkipsAStage: the
// controller stops after pushing stage 2 but before recording its commit
// (status holds the saved intent: stage 2, no revision); the controller
// started again records the same commit, waits for stage 2's evidence, and
// walks on with exactly one commit per stage.
func TestExperimentRestartedMidStageNeitherRepeatsNorSkipsAStage(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, argoWorkflowCRD)
	f.publishCatalog(t) // the built-in components are delivered from it
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	stop := startController(t, f.e, f.ns)
	const name = "restarted"
	if err := f.e.c.Create(f.ctx(), hubExperiment(f.ns, name)); err != nil {
		t.Fatal(err)
	}
	f.applyStage(t, name, scribev1.StageClusters)
	e := f.waitStage(t, name, scribev1.StageComponents)
	rev2 := e.Status.Revision
	stop()
	// What a controller stopped between the push and recording the commit
	// leaves: the intent, saved before the push.
	e = f.experiment(t, name)
	e.Status.Revision = ""
	e.Status.Stages = e.Status.Stages[:1]
	if err := f.e.c.Status().Update(f.ctx(), e); err != nil {
		t.Fatal(err)
	}
	startController(t, f.e, f.ns)
	e = f.waitStage(t, name, scribev1.StageComponents)
	if e.Status.Revision != rev2 {
		t.Fatalf("after the restart stage 2 is %s, want the pushed %s", e.Status.Revision, rev2)
	}
	f.holdsPhase(t, name, scribev1.ExperimentProvisioning, time.Second)
	if e = f.experiment(t, name); e.Status.Stage != scribev1.StageComponents {
		t.Fatalf("skipped past stage 2 without its evidence: %s", expState(e))
	}
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 2 || commits[1] != rev2 {
		t.Fatalf("commits after the restart %v, want stage 1 and %s", commits, rev2)
	}
	f.applyStage(t, name, scribev1.StageComponents)
	f.applyStage(t, name, scribev1.StageWorkflowTemplates)
	f.applyStage(t, name, scribev1.StageWorkflow)
	e = f.waitPhase(t, name, scribev1.ExperimentReady)
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 4 {
		t.Fatalf("commits %v, want one per stage", commits)
	}
	if len(e.Status.Stages) != 4 || e.Status.Stages[1].Commit != rev2 {
		t.Fatalf("status.stages %+v", e.Status.Stages)
	}
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
	if e = f.experiment(t, name); e.Status.Stage != scribev1.StageClusters {
		t.Fatalf("moved past stage 1 although it failed to apply: %s", expState(e))
	}

	// Flux retries and applies the same commit: the stages follow; no
	// workflow, so stages 3 and 4 are stage 2's tree, and Complete.
	f.playFlux(t, ks, rev, true, "", "")
	rev2 := f.applyStage(t, name, scribev1.StageComponents)
	e = f.waitPhase(t, name, scribev1.ExperimentComplete)
	if apimeta.FindStatusCondition(e.Status.Conditions, scribev1.StalledCondition) != nil {
		t.Fatalf("still stalled: %s", expState(e))
	}
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 2 || commits[1] != rev2 || e.Status.Stage != scribev1.StageWorkflow || e.Status.Revision != rev2 {
		t.Fatalf("commits %v, want stage 1 and 2 (%s): %s", commits, rev2, expState(e))
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
	f.applyStage(t, name, scribev1.StageClusters)
	e := f.waitStage(t, name, scribev1.StageComponents)
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
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 2 {
		t.Fatalf("commits %v, want stages 1 and 2", commits)
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
	f.applyStage(t, name, scribev1.StageClusters)
	e := f.waitStage(t, name, scribev1.StageComponents)
	f.playFlux(t, kustomizationName("Experiment", f.ns, name), e.Status.Revision, true, "", "")
	waitFor(t, "the applied commit read from the sync Kustomization's event", func() (bool, string) {
		e = f.experiment(t, name)
		return len(e.Status.Targets) > 0 && strings.Contains(e.Status.Targets[0].Message, "waiting for components"), expState(e)
	})
	f.playComponent(t, name, true, "", "")
	f.applyStage(t, name, scribev1.StageWorkflowTemplates)
	f.applyStage(t, name, scribev1.StageWorkflow)
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
	f.provisionExperiment(t, name)
	e := f.waitPhase(t, name, scribev1.ExperimentReady)
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
	wfOnGKE.Spec.Targets[1].Cluster = scribev1.ClusterSpec{Type: scribev1.ClusterGKE, Zone: "us-central1-a", Project: "scribe-experiments"}
	noProject := hubExperiment(f.ns, "no-project")
	noProject.Spec.Workflow = nil
	noProject.Spec.Targets[0].Cluster = scribev1.ClusterSpec{Type: scribev1.ClusterGKE, Zone: "us-central1-a"}
	wfOnGKE.Spec.Targets[1].Components = []scribev1.Component{{Workflow: "k6-http-loadgen", Params: &apiextensionsv1.JSON{Raw: []byte(`{"targetUrl":"http://demo"}`)}}}
	for _, tc := range []struct {
		exp  *scribev1.Experiment
		want string
	}{
		{badParam, `no parameter "replicaz"`},
		{wfOnGKE, "workflow components run on the hub"},
		{noProject, "spec.targets[0].cluster.project: a gke cluster is created in a GCP project and none is given"},
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
	for _, name := range []string{"bad-param", "wf-on-gke", "no-project"} {
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
	exp.Spec.Targets[0].Cluster = scribev1.ClusterSpec{Type: scribev1.ClusterGKE, Zone: "us-central1-a", Project: "scribe-experiments"}
	if err := f.e.c.Create(f.ctx(), exp); err != nil {
		t.Fatal(err)
	}
	rev1 := f.applyStage(t, name, scribev1.StageClusters)
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

	if e := f.experiment(t, name); e.Status.Stage != scribev1.StageClusters || e.Status.Revision != rev1 {
		t.Fatalf("the components committed before the cluster is reachable: %s", expState(e))
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: clusterName + "-kubeconfig"}, Data: map[string][]byte{"value": []byte("apiVersion: v1\nkind: Config\n")}}
	if err := f.e.c.Create(f.ctx(), secret); err != nil {
		t.Fatal(err)
	}
	// Stage 2 delivers the components; then (no workflow) Complete.
	f.applyStage(t, name, scribev1.StageComponents)
	e := f.waitPhase(t, name, scribev1.ExperimentComplete)
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
	ks := kustomizationName("Experiment", f.ns, name)
	f.applyStage(t, name, scribev1.StageClusters)
	f.applyStage(t, name, scribev1.StageComponents)
	f.waitPhase(t, name, scribev1.ExperimentComplete)

	if err := f.e.c.Delete(f.ctx(), f.experiment(t, name)); err != nil {
		t.Fatal(err)
	}
	var commits []string
	waitFor(t, "the removal commit", func() (bool, string) {
		commits = f.scribeCommits(t, experimentObject(f.ns, name))
		return len(commits) == 3, fmt.Sprintf("commits %v", commits)
	})
	if sync := f.fileAt(t, commits[2], "clusters/dev/"+f.ns+"/experiment/"+name+".sync.yaml"); sync != "" {
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
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 3 {
		t.Fatalf("commits %v, want stages 1 and 2 and the removal", commits)
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
		f.provisionExperiment(t, exp.Name)
		e := f.waitPhase(t, exp.Name, scribev1.ExperimentReady)
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

// startReviewedExperiments starts the Experiment controller on a
// Repository that takes changes by pull request through a fake GitHub
// (GitHub's REST wire format), and returns the fake.
func (f *fixture) startReviewedExperiments(t *testing.T) *forgetest.GitHub {
	t.Helper()
	gh, prs := f.githubForPullRequests(t)
	f.repo.Spec.Git.PullRequest = prs
	f.startExperimentController(t)
	return gh
}

// waitProposed waits for stage n to be proposed in a pull request other
// than number not, not merged yet, and returns the Experiment as it was
// then.
func (f *fixture) waitProposed(t *testing.T, name string, n int32, not int) *scribev1.Experiment {
	t.Helper()
	var e *scribev1.Experiment
	waitFor(t, fmt.Sprintf("experiment %s: stage %d proposed", name, n), func() (bool, string) {
		e = f.experiment(t, name)
		return e.Status.Stage == n && e.Status.PullRequest != nil && e.Status.PullRequest.Number != not && e.Status.Revision == "", expState(e)
	})
	return e
}

// prBody is the description of pull request number on the fake GitHub.
func prBody(gh *forgetest.GitHub, number int) string {
	for _, pr := range gh.PullRequests() {
		if pr.Number == number {
			return pr.Body
		}
	}
	return ""
}

// TestExperimentPullRequestModeProposesEachStage: with a Repository that
// takes changes by pull request, each stage is proposed, never committed
// to the branch, and the next stage is proposed only after the previous
// one's merge was applied and read back.
func TestExperimentPullRequestModeProposesEachStage(t *testing.T) {
	f := newFixture(t)
	gh := f.startReviewedExperiments(t)
	initial := f.head(t)
	const name = "reviewed"
	exp := hubExperiment(f.ns, name)
	exp.Spec.Workflow = nil
	if err := f.e.c.Create(f.ctx(), exp); err != nil {
		t.Fatal(err)
	}
	ks := kustomizationName("Experiment", f.ns, name)
	branch := "scribe/" + f.ns + "/experiment/" + name

	// Stage 1 is proposed, not committed.
	e := f.waitProposed(t, name, scribev1.StageClusters, 0)
	if f.head(t) != initial {
		t.Fatalf("stage 1 not proposed, or main moved: %s", expState(e))
	}
	pr1 := e.Status.PullRequest.Number
	f.holdsPhase(t, name, e.Status.Phase, time.Second)
	merge1 := f.mergePR(t, gh, pr1, branch)
	e = f.waitStage(t, name, scribev1.StageClusters)
	if e.Status.Revision != merge1 {
		t.Fatalf("stage 1 recorded as %s, want the merge %s", e.Status.Revision, merge1)
	}
	// The merged branch is deleted, as a Workload's is; the next stage
	// pushes it again.
	f.waitBranchGone(t, branch)

	// Stage 2 only after stage 1's merge is applied.
	f.holdsPhase(t, name, scribev1.ExperimentProvisioning, time.Second)
	if e := f.experiment(t, name); e.Status.Stage != scribev1.StageClusters || len(gh.PullRequests()) != 1 {
		t.Fatalf("stage 2 proposed before stage 1 was applied: %s", expState(e))
	}
	f.playFlux(t, ks, merge1, true, "", "")
	e = f.waitProposed(t, name, scribev1.StageComponents, pr1)
	if f.head(t) != merge1 {
		t.Fatalf("stage 2 not proposed, or main moved without a merge: %s", expState(e))
	}
	if body := prBody(gh, e.Status.PullRequest.Number); !strings.Contains(body, "stage 2 (components)") || !strings.Contains(body, "target app: Ready") {
		t.Errorf("stage 2's pull request does not say which stage and on what evidence:\n%s", body)
	}
	merge2 := f.mergePR(t, gh, e.Status.PullRequest.Number, branch)
	if f.fileAt(t, merge2, "clusters/dev/"+f.ns+"/experiment/"+name+"/kustomization-"+name+"-app-demo-services.yaml") == "" {
		t.Fatalf("stage 2's merge does not deliver the component")
	}
	e = f.waitStage(t, name, scribev1.StageComponents)
	if e.Status.Revision != merge2 {
		t.Fatalf("stage 2 recorded as %s, want the merge %s", e.Status.Revision, merge2)
	}
	f.waitBranchGone(t, branch)
	f.playFlux(t, ks, merge2, true, "", "")
	f.playComponent(t, name, true, "", "")
	// Stages 3 and 4 add nothing without a workflow: already on the branch,
	// no pull request.
	e = f.waitPhase(t, name, scribev1.ExperimentComplete)
	if e.Status.Stage != scribev1.StageWorkflow || e.Status.Revision != merge2 || len(gh.PullRequests()) != 2 {
		t.Fatalf("after stage 2's merge: %s; pull requests %+v", expState(e), gh.PullRequests())
	}
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 2 {
		t.Fatalf("Scribe's commits %v, want the two proposed stages", commits)
	}
}

// TestExperimentPullRequestModeProposesTheWorkflowStagesAfterTheirEvidence:
// with a Repository that takes changes by pull request, stage 3 (the
// workflow template's delivery) and stage 4 (the validation Workflow) are
// each their own pull request. Stage 4 is proposed only once stage 3's
// merge is applied and the template's delivery read back healthy, and the
// Workflow reaches the base branch with stage 4's merge and in no commit
// before it.
func TestExperimentPullRequestModeProposesTheWorkflowStagesAfterTheirEvidence(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, argoWorkflowCRD)
	gh := f.startReviewedExperiments(t)
	const name = "reviewed-run"
	if err := f.e.c.Create(f.ctx(), hubExperiment(f.ns, name)); err != nil {
		t.Fatal(err)
	}
	ks := kustomizationName("Experiment", f.ns, name)
	branch := "scribe/" + f.ns + "/experiment/" + name
	dir := "clusters/dev/" + f.ns + "/experiment/" + name + "/"
	delivery := dir + "kustomization-" + name + "-gateway-validation.yaml"
	workflows := func(commit string) []string { return withPrefix(f.filesAt(t, commit, dir), "workflow-") }

	// Stages 1 and 2: each proposed, merged, applied and read back.
	pr := 0
	for n := scribev1.StageClusters; n <= scribev1.StageComponents; n++ {
		e := f.waitProposed(t, name, n, pr)
		pr = e.Status.PullRequest.Number
		merge := f.mergePR(t, gh, pr, branch)
		if e = f.waitStage(t, name, n); e.Status.Revision != merge {
			t.Fatalf("stage %d recorded as %s, want the merge %s", n, e.Status.Revision, merge)
		}
		f.playFlux(t, ks, merge, true, "", "")
	}
	merge2 := f.head(t)
	f.playComponent(t, name, true, "", "")

	// Stage 3 is its own pull request: the template's delivery, no Workflow.
	e := f.waitProposed(t, name, scribev1.StageWorkflowTemplates, pr)
	pr3 := *e.Status.PullRequest
	if f.head(t) != merge2 {
		t.Fatalf("main moved without a merge: %s", expState(e))
	}
	if f.fileAt(t, pr3.Head, delivery) == "" || len(workflows(pr3.Head)) != 0 {
		t.Fatalf("stage 3's pull request (%s) holds %v, want the template's delivery and no Workflow", pr3.Head, f.filesAt(t, pr3.Head, dir))
	}
	if body := prBody(gh, pr3.Number); !strings.Contains(body, "stage 3 (workflow templates)") || !strings.Contains(body, "target app: Ready") || !strings.Contains(body, "target loadgen: Ready") {
		t.Errorf("stage 3's pull request does not say which stage and on what evidence:\n%s", body)
	}
	merge3 := f.mergePR(t, gh, pr3.Number, branch)
	if e = f.waitStage(t, name, scribev1.StageWorkflowTemplates); e.Status.Revision != merge3 {
		t.Fatalf("stage 3 recorded as %s, want the merge %s", e.Status.Revision, merge3)
	}

	// Merged but not applied, then applied while the template's delivery
	// has not reported: no stage 4 pull request.
	noStage4 := func(why string) {
		t.Helper()
		f.holdsPhase(t, name, scribev1.ExperimentProvisioning, time.Second)
		if e := f.experiment(t, name); e.Status.Stage != scribev1.StageWorkflowTemplates || len(gh.PullRequests()) != 3 || f.head(t) != merge3 {
			t.Fatalf("stage 4 proposed or committed %s: %s; pull requests %+v", why, expState(e), gh.PullRequests())
		}
	}
	noStage4("before stage 3's merge was applied")
	f.playFlux(t, ks, merge3, true, "", "")
	waitFor(t, "waiting for the workflow template's delivery", func() (bool, string) {
		e = f.experiment(t, name)
		c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
		return c != nil && c.Reason == controller.ReasonWaitingForWorkflowTemplate && strings.Contains(c.Message, "gateway-validation"), expState(e)
	})
	noStage4("before the template's delivery was read back healthy")

	// The delivery is healthy: stage 4 is proposed, the Workflow on its
	// pull request's branch only.
	f.playTemplate(t, name, "", "gateway-validation", true, "", "")
	e = f.waitProposed(t, name, scribev1.StageWorkflow, pr3.Number)
	pr4 := *e.Status.PullRequest
	if f.head(t) != merge3 || len(workflows(merge3)) != 0 || len(workflows(pr4.Head)) != 1 {
		t.Fatalf("stage 4: main %s (want %s), Workflows on main %v, on the pull request's branch %v (want one)", f.head(t), merge3, workflows(f.head(t)), workflows(pr4.Head))
	}
	if body := prBody(gh, pr4.Number); !strings.Contains(body, "stage 4 (workflow runs)") || !strings.Contains(body, "workflow template gateway-validation: ready=true") {
		t.Errorf("stage 4's pull request does not say which stage and on what evidence:\n%s", body)
	}
	merge4 := f.mergePR(t, gh, pr4.Number, branch)
	if e = f.waitStage(t, name, scribev1.StageWorkflow); e.Status.Revision != merge4 {
		t.Fatalf("stage 4 recorded as %s, want the merge %s", e.Status.Revision, merge4)
	}
	wf := validationWorkflow(t, e)
	if got := workflows(merge4); !slices.Equal(got, []string{dir + "workflow-" + wf.Name + ".yaml"}) {
		t.Fatalf("stage 4's merge holds Workflows %v, want %s", got, wf.Name)
	}
	// No commit of the base branch before stage 4's merge has a Workflow.
	for _, c := range strings.Fields(publishtest.Git(t, "", "--git-dir", f.srv.BareDir(repoName), "rev-list", merge4+"^1")) {
		if got := workflows(c); len(got) != 0 {
			t.Fatalf("commit %s, on the base branch before stage 4's merge, has Workflows %v", c, got)
		}
	}

	// Flux applies the merge, Argo Workflows runs the Workflow: Complete,
	// with one pull request and one commit per stage.
	f.playFlux(t, ks, merge4, true, "", "")
	f.waitPhase(t, name, scribev1.ExperimentReady)
	f.playArgo(t, wf, "Running", "")
	f.waitPhase(t, name, scribev1.ExperimentRunning)
	f.playArgo(t, wf, "Succeeded", "all routes answer")
	f.waitPhase(t, name, scribev1.ExperimentComplete)
	if prs := gh.PullRequests(); len(prs) != 4 {
		t.Fatalf("pull requests %+v, want one per stage", prs)
	}
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 4 {
		t.Fatalf("Scribe's commits %v, want the four proposed stages", commits)
	}
}
