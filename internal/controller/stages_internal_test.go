package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
)

// lab is an Experiment spec with two hub targets and an Argo workflow;
// the edits change it.
func lab(edits ...func(*scribev1.ExperimentSpec)) *scribev1.ExperimentSpec {
	s := &scribev1.ExperimentSpec{
		Targets:  []scribev1.Target{{Name: "app", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}}, {Name: "load", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Depends: []string{"app"}}},
		Workflow: &scribev1.ExperimentWorkflow{Engine: scribev1.EngineArgo, Template: "smoke"},
	}
	for _, e := range edits {
		e(s)
	}
	return s
}

func noWorkflow(s *scribev1.ExperimentSpec) { s.Workflow = nil }

func manually(s *scribev1.ExperimentSpec) {
	s.Workflow.Completion = &scribev1.Completion{Mode: scribev1.CompletionManual}
}

func timeoutOf(d time.Duration) func(*scribev1.ExperimentSpec) {
	return func(s *scribev1.ExperimentSpec) {
		s.Workflow.Completion = &scribev1.Completion{Mode: scribev1.CompletionWorkflow, Timeout: &metav1.Duration{Duration: d}}
	}
}

// inPhase is an Experiment committed as c1 (digest d1) in phase, with
// Ready=False for reason when one is given.
func inPhase(phase scribev1.ExperimentPhase, reason string, edits ...func(*scribev1.ExperimentStatus)) scribev1.ExperimentStatus {
	st := scribev1.ExperimentStatus{Phase: phase}
	st.Revision, st.Digest = "c1", "d1"
	if reason != "" {
		st.Conditions = []metav1.Condition{{Type: scribev1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason}}
	}
	for _, e := range edits {
		e(&st)
	}
	return st
}

func following(kind, name, phase string) func(*scribev1.ExperimentStatus) {
	return func(st *scribev1.ExperimentStatus) {
		st.Workflow = &scribev1.WorkflowStatus{Kind: kind, Name: name, Phase: phase}
	}
}

var validation = &scribev1.ObjectIdentity{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Namespace: "team", Name: "lab-validation-1a2b"}

func target(name string, phase scribev1.ExperimentPhase, clusterReady bool, msg string) scribev1.TargetStatus {
	return scribev1.TargetStatus{Name: name, Phase: phase, ClusterReady: clusterReady, Message: msg}
}

// readTargets is the applier's verdict on c1 and the targets' states.
func readTargets(applier health.State, targets ...scribev1.TargetStatus) *TargetsReadBack {
	v := health.Verdict{State: applier, Message: "Kustomization: " + string(applier)}
	return &TargetsReadBack{Applier: v, Targets: targets}
}

var bothReady = []scribev1.TargetStatus{target("app", scribev1.ExperimentReady, true, "the hub cluster"), target("load", scribev1.ExperimentReady, true, "the hub cluster")}

// workflowRun is the validation workflow, created at t0+created.
func workflowRun(state health.State, reason, phase string, created time.Duration) *WorkflowRun {
	return &WorkflowRun{Found: true, Verdict: health.Verdict{State: state, Reason: reason, Message: phase}, Phase: phase, Created: t0.Add(created)}
}

func experimentView(st scribev1.ExperimentStatus) map[string]string {
	wf := ""
	if w := st.Workflow; w != nil {
		wf = fmt.Sprintf("%s/%s %s: %s", w.Kind, w.Name, w.Phase, w.Message)
	}
	var targets []string
	for _, ts := range st.Targets {
		targets = append(targets, ts.Name+"="+string(ts.Phase))
	}
	gen := ""
	if st.GeneratedResources != nil {
		gen = st.GeneratedResources.Path
	}
	return map[string]string{
		"phase": string(st.Phase), "revision": st.Revision, "digest": st.Digest, "workflow": wf,
		"targets": strings.Join(targets, ","), "generated": gen,
	}
}

func TestDecideExperimentWalksTheStageTable(t *testing.T) {
	type fields = map[string]string
	for _, tc := range []struct {
		name   string
		spec   *scribev1.ExperimentSpec
		status scribev1.ExperimentStatus
		obs    ExperimentObservations
		// want
		kind    ExperimentActionKind
		save    bool
		requeue time.Duration
		fields  fields
		marks   []string
		events  []string
	}{
		// 1. A new Experiment is Pending; one finished at this generation stays.
		{name: "new Experiment: Pending, then render",
			spec: lab(), status: scribev1.ExperimentStatus{},
			kind: ExperimentRender, fields: fields{"phase": "Pending", "revision": ""},
			marks:  []string{"Reconciling=True/Progressing", "Ready=Unknown/Progressing"},
			events: []string{"Pending: waiting for the first render"}},
		{name: "Complete at this generation: nothing to read back",
			spec: lab(), status: inPhase(scribev1.ExperimentComplete, ""),
			kind: ExperimentWait, fields: fields{"phase": "Complete"}},
		{name: "workflow failed at this generation: Failed for good, nothing to read back",
			spec: lab(), status: inPhase(scribev1.ExperimentFailed, ReasonWorkflowFailed),
			kind: ExperimentWait, fields: fields{"phase": "Failed"}},
		{name: "workflow timed out at this generation: Failed for good, nothing to read back",
			spec: lab(), status: inPhase(scribev1.ExperimentFailed, ReasonWorkflowTimeout),
			kind: ExperimentWait, fields: fields{"phase": "Failed"}},
		{name: "Failed on a cluster: not terminal, the targets are read again",
			spec: lab(), status: inPhase(scribev1.ExperimentFailed, ReasonClusterFailed), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation},
			kind: ExperimentReadTargets, fields: fields{"phase": "Failed"}},
		{name: "Complete, new generation with the same render: stays Complete",
			spec: lab(), status: inPhase(scribev1.ExperimentComplete, ""), obs: ExperimentObservations{NewGeneration: true, Rendered: rendered("d1"), Workflow: validation},
			kind: ExperimentWait, fields: fields{"phase": "Complete", "revision": "c1"}},
		{name: "workflow failed, new generation with the same render: stays Failed",
			spec: lab(), status: inPhase(scribev1.ExperimentFailed, ReasonWorkflowFailed), obs: ExperimentObservations{NewGeneration: true, Rendered: rendered("d1"), Workflow: validation},
			kind: ExperimentWait, fields: fields{"phase": "Failed"}},
		{name: "Complete, new generation: rendered again",
			spec: lab(), status: inPhase(scribev1.ExperimentComplete, ""), obs: ExperimentObservations{NewGeneration: true},
			kind: ExperimentRender, fields: fields{"phase": "Complete"}},

		// 2. Commit: the digest is saved with an empty revision, then pushed.
		{name: "new render: its digest is saved with an empty revision, then committed",
			spec: lab(), status: inPhase(scribev1.ExperimentComplete, ""), obs: ExperimentObservations{NewGeneration: true, Rendered: rendered("d2"), Workflow: validation},
			kind: ExperimentCommit, save: true, fields: fields{"revision": "", "digest": "d2", "phase": "Complete"}},
		{name: "first render: committed",
			spec: lab(), status: scribev1.ExperimentStatus{Phase: scribev1.ExperimentPending}, obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation},
			kind: ExperimentCommit, save: true, fields: fields{"revision": "", "digest": "d1"}},
		{name: "committed: Provisioning starts over, the old workflow forgotten, Stalled removed",
			spec: lab(), status: inPhase(scribev1.ExperimentFailed, ReasonWorkflowFailed, following("Workflow", "lab-validation-old", "Failed"), func(st *scribev1.ExperimentStatus) { st.Revision = "" }),
			obs:  ExperimentObservations{NewGeneration: true, Rendered: rendered("d2"), Workflow: validation, Commit: "c2"},
			kind: ExperimentReadTargets, fields: fields{"phase": "Provisioning", "revision": "c2", "digest": "d2", "workflow": "", "generated": generatedAt.Path},
			marks:  []string{"-Stalled"},
			events: []string{"Provisioning: published c2; waiting for the applier and the target clusters"}},

		// 3. Provisioning: the commit applied and every target ready.
		{name: "apply failed: Failed, and read again",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: readTargets(health.Failed, bothReady...)},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed", "targets": "app=Ready,load=Ready"},
			marks:  []string{"Ready=False/ApplyFailed", "Stalled=True/ApplyFailed"},
			events: []string{"Warning Failed: c1 failed to apply: Kustomization: Failed"}},
		{name: "a target's cluster failed: ClusterFailed, and read again",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: readTargets(health.Healthy, target("app", scribev1.ExperimentFailed, false, "Cluster lab-app: quota exceeded"), target("load", scribev1.ExperimentProvisioning, false, ""))},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed"},
			marks:  []string{"Ready=False/ClusterFailed", "Stalled=True/ClusterFailed"},
			events: []string{"Warning Failed: target app: Cluster lab-app: quota exceeded"}},
		{name: "a component failed on a ready cluster: ComponentFailed, and read again",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: readTargets(health.Healthy, target("app", scribev1.ExperimentFailed, true, "component web: HelmRelease/team/lab-app-web: install failed"), bothReady[1])},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed"},
			marks:  []string{"Ready=False/ComponentFailed", "Stalled=True/ComponentFailed"},
			events: []string{"Warning Failed: target app: component web: HelmRelease/team/lab-app-web: install failed"}},
		{name: "not applied yet: Provisioning, waiting for the apply",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: readTargets(health.Pending, bothReady...)},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Provisioning", "targets": "app=Ready,load=Ready"},
			marks: []string{"Reconciling=True/ApplyPending", "Ready=False/ApplyPending"}},
		{name: "a failed apply that recovered but is pending: back to Provisioning",
			spec: lab(), status: inPhase(scribev1.ExperimentFailed, ReasonApplyFailed), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: readTargets(health.Pending, bothReady...)},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Provisioning"},
			marks:  []string{"Reconciling=True/ApplyPending", "Ready=False/ApplyPending"},
			events: []string{"Provisioning: waiting for c1 to be applied"}},
		{name: "applied, targets waiting: Provisioning, saying which",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: readTargets(health.Healthy, bothReady[0], target("load", scribev1.ExperimentProvisioning, true, "cluster ready; waiting for targets app"))},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Provisioning", "targets": "app=Ready,load=Provisioning"},
			marks: []string{"Reconciling=True/Provisioning", "Ready=False/Provisioning"}},
		{name: "applied, every target ready: Ready, and the workflow at once",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: readTargets(health.Healthy, bothReady...)},
			kind: ExperimentWait, requeue: time.Millisecond, fields: fields{"phase": "Ready"},
			marks:  []string{"Ready=True/Succeeded", "Reconciling=True/WaitingForWorkflow"},
			events: []string{"Ready: c1 applied; all 2 targets ready"}},

		// 4. Ready, Running: the validation workflow.
		{name: "Ready without a workflow: Complete",
			spec: lab(noWorkflow), status: inPhase(scribev1.ExperimentReady, ""), obs: ExperimentObservations{Rendered: rendered("d1")},
			kind: ExperimentWait, fields: fields{"phase": "Complete"},
			marks:  []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"},
			events: []string{"Complete: no workflow to run; every target is ready"}},
		{name: "Ready, the render has no workflow object: Complete",
			spec: lab(), status: inPhase(scribev1.ExperimentReady, ""), obs: ExperimentObservations{Rendered: rendered("d1")},
			kind: ExperimentWait, fields: fields{"phase": "Complete"},
			marks:  []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"},
			events: []string{"Complete: no workflow to run; every target is ready"}},
		{name: "Ready with a workflow: read it",
			spec: lab(), status: inPhase(scribev1.ExperimentReady, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation},
			kind: ExperimentReadWorkflow, fields: fields{"phase": "Ready", "workflow": "Workflow/lab-validation-1a2b : "}},
		{name: "the rendered workflow changed: its status starts over",
			spec: lab(), status: inPhase(scribev1.ExperimentRunning, "", following("Workflow", "lab-validation-old", "Running")), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation},
			kind: ExperimentReadWorkflow, fields: fields{"workflow": "Workflow/lab-validation-1a2b : "}},
		{name: "workflow not created yet: wait for it",
			spec: lab(), status: inPhase(scribev1.ExperimentReady, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: &WorkflowRun{}},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Ready", "workflow": "Workflow/lab-validation-1a2b : not created yet"},
			marks: []string{"Reconciling=True/WaitingForWorkflow"}},
		{name: "manual, workflow not created, complete annotation: Complete",
			spec: lab(manually), status: inPhase(scribev1.ExperimentReady, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: &WorkflowRun{}, CompleteRequested: true},
			kind: ExperimentWait, fields: fields{"phase": "Complete"},
			marks:  []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"},
			events: []string{"Complete: completed by the scribe.dev/complete annotation"}},
		{name: "workflow applied, not started by its engine: wait for it",
			spec: lab(), status: inPhase(scribev1.ExperimentReady, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Pending, health.ReasonNotObserved, "", 0)},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Ready"},
			marks: []string{"Reconciling=True/WaitingForWorkflow"}},
		{name: "workflow running: Running, back at the next poll",
			spec: lab(), status: inPhase(scribev1.ExperimentReady, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Pending, health.ReasonProgressing, "Running", -time.Minute)},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Running", "workflow": "Workflow/lab-validation-1a2b Running: Running"},
			marks:  []string{"Reconciling=True/WorkflowRunning"},
			events: []string{"Running: Workflow lab-validation-1a2b is running"}},
		{name: "workflow running close to its timeout: back when it times out",
			spec: lab(timeoutOf(2 * time.Minute)), status: inPhase(scribev1.ExperimentRunning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Pending, health.ReasonProgressing, "Running", -119*time.Second)},
			kind: ExperimentWait, requeue: time.Second, fields: fields{"phase": "Running"},
			marks: []string{"Reconciling=True/WorkflowRunning"}},
		{name: "workflow ran past its timeout: Failed for good",
			spec: lab(timeoutOf(2 * time.Minute)), status: inPhase(scribev1.ExperimentRunning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Pending, health.ReasonProgressing, "Running", -2*time.Minute)},
			kind: ExperimentWait, fields: fields{"phase": "Failed"},
			marks:  []string{"Ready=False/WorkflowTimeout", "Stalled=True/WorkflowTimeout"},
			events: []string{"Warning Failed: Workflow lab-validation-1a2b ran longer than 2m0s"}},
		{name: "workflow failed: Failed for good",
			spec: lab(), status: inPhase(scribev1.ExperimentRunning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Failed, "", "Failed", -time.Minute)},
			kind: ExperimentWait, fields: fields{"phase": "Failed", "workflow": "Workflow/lab-validation-1a2b Failed: Failed"},
			marks:  []string{"Ready=False/WorkflowFailed", "Stalled=True/WorkflowFailed"},
			events: []string{"Warning Failed: Workflow lab-validation-1a2b failed: Failed"}},
		{name: "workflow failed with the complete annotation: the failure wins",
			spec: lab(manually), status: inPhase(scribev1.ExperimentRunning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Failed, "", "Failed", -time.Minute), CompleteRequested: true},
			kind: ExperimentWait, fields: fields{"phase": "Failed"},
			marks:  []string{"Ready=False/WorkflowFailed", "Stalled=True/WorkflowFailed"},
			events: []string{"Warning Failed: Workflow lab-validation-1a2b failed: Failed"}},
		{name: "workflow succeeded: Complete",
			spec: lab(), status: inPhase(scribev1.ExperimentRunning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Healthy, "", "Succeeded", -time.Minute)},
			kind: ExperimentWait, fields: fields{"phase": "Complete", "workflow": "Workflow/lab-validation-1a2b Succeeded: Succeeded"},
			marks:  []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"},
			events: []string{"Complete: Workflow lab-validation-1a2b succeeded"}},
		{name: "manual, workflow succeeded: Running until the annotation",
			spec: lab(manually), status: inPhase(scribev1.ExperimentRunning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Healthy, "", "Succeeded", -time.Minute)},
			kind: ExperimentWait, fields: fields{"phase": "Running"},
			marks: []string{"Reconciling=True/WaitingForCompletion"}},
		{name: "manual, workflow running, complete annotation: Complete",
			spec: lab(manually), status: inPhase(scribev1.ExperimentRunning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Pending, health.ReasonProgressing, "Running", -time.Minute), CompleteRequested: true},
			kind: ExperimentWait, fields: fields{"phase": "Complete"},
			marks:  []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"},
			events: []string{"Complete: completed by the scribe.dev/complete annotation"}},
		{name: "workflow mode ignores the complete annotation: still Running",
			spec: lab(), status: inPhase(scribev1.ExperimentRunning, ""), obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Pending, health.ReasonProgressing, "Running", -time.Minute), CompleteRequested: true},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Running"},
			marks: []string{"Reconciling=True/WorkflowRunning"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := tc.obs
			obs.Poll = poll
			before := tc.status.DeepCopy()
			got, act := DecideExperiment(tc.spec, tc.status, obs, t0)
			if act.Kind != tc.kind || act.SaveIntent != tc.save || act.Requeue != tc.requeue {
				t.Errorf("action %s (save intent %v) requeue %s, want %s (save intent %v) requeue %s", act.Kind, act.SaveIntent, act.Requeue, tc.kind, tc.save, tc.requeue)
			}
			v := experimentView(got)
			checkOutcome(t, v, tc.fields, act.Marks, tc.marks, act.Events, tc.events)
			if fmt.Sprint(experimentView(tc.status)) != fmt.Sprint(experimentView(*before)) {
				t.Errorf("the decision changed the status it was given")
			}
		})
	}
}

func TestDecideExperimentWalksANewExperimentToCompleteOneObservationAtATime(t *testing.T) {
	// Reconciles as the reconciler runs them: each carries out the actions
	// asked for until a wait; the next starts with fresh observations.
	spec := lab()
	st := scribev1.ExperimentStatus{}
	var got []string
	reconcile := func() {
		obs := ExperimentObservations{Poll: poll}
		for range maxDecisions {
			var act ExperimentAction
			st, act = DecideExperiment(spec, st, obs, t0)
			got = append(got, string(act.Kind))
			switch act.Kind {
			case ExperimentRender:
				obs.Rendered, obs.Workflow = rendered("d1"), validation
			case ExperimentCommit:
				obs.Commit = "c1"
			case ExperimentReadTargets:
				obs.Targets = readTargets(health.Healthy, bothReady...)
			case ExperimentReadWorkflow:
				obs.Run = workflowRun(health.Healthy, "", "Succeeded", -time.Minute)
			default:
				got = append(got, string(st.Phase))
				return
			}
		}
		t.Fatalf("no wait after %d decisions: %v", maxDecisions, got)
	}
	reconcile() // Pending → committed → Provisioning → Ready
	reconcile() // Ready → Complete
	reconcile() // Complete at this generation: nothing to do
	want := "Render Commit ReadTargets Wait Ready Render ReadWorkflow Wait Complete Wait Complete"
	if strings.Join(got, " ") != want {
		t.Fatalf("reconciles %q, want %q", strings.Join(got, " "), want)
	}
}
