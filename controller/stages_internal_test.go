package controller

// Longer than 500 lines on purpose: the stages' decision table, one row
// per transition.

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

// inPhase is an Experiment whose last stage (4, the runs) was committed as
// c1 (digest d1), in phase, with Ready=False for reason when one is given.
func inPhase(phase scribev1.ExperimentPhase, reason string, edits ...func(*scribev1.ExperimentStatus)) scribev1.ExperimentStatus {
	st := scribev1.ExperimentStatus{Phase: phase, Stage: scribev1.StageWorkflow}
	st.Revision, st.Digest = "c1", "d1"
	if reason != "" {
		st.Conditions = []metav1.Condition{{Type: scribev1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason}}
	}
	for _, e := range edits {
		e(&st)
	}
	return st
}

// atStage puts the Experiment at stage n.
func atStage(n int32) func(*scribev1.ExperimentStatus) {
	return func(st *scribev1.ExperimentStatus) { st.Stage = n }
}

// proposed records the open pull request #7 of the stage.
func proposed(st *scribev1.ExperimentStatus) {
	st.Revision = ""
	st.PullRequest = &scribev1.PullRequestStatus{Number: 7, URL: "https://github.com/acme/exp/pull/7", Head: "h7", State: "open"}
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

// heldBy gives a target the reason Scribe holds it for.
func heldBy(ts scribev1.TargetStatus, reason string) scribev1.TargetStatus {
	ts.Reason = reason
	return ts
}

// readTargets is the applier's verdict on c1 and the targets' states.
func readTargets(applier health.State, targets ...scribev1.TargetStatus) *TargetsReadBack {
	v := health.Verdict{State: applier, Message: "Kustomization: " + string(applier)}
	return &TargetsReadBack{Applier: v, Targets: targets}
}

// applierFailed is the applier's Failed verdict on c1, with its reason and
// message, and the targets' states.
func applierFailed(reason, msg string, targets ...scribev1.TargetStatus) *TargetsReadBack {
	return &TargetsReadBack{Applier: health.Verdict{State: health.Failed, Reason: reason, Message: msg}, Targets: targets}
}

// withTemplate adds the read-back of the validation workflow's template
// delivery.
func withTemplate(rb *TargetsReadBack, state health.State, msg string) *TargetsReadBack {
	rb.Templates = []scribev1.ComponentStatus{{Name: "smoke", Delivery: "Kustomization/team/lab-smoke", Ready: state == health.Healthy, Message: msg}}
	rb.TemplatesFailed = state == health.Failed
	return rb
}

var loadRun = []ComponentRunRef{{Target: "load", Component: "k6", ID: scribev1.ObjectIdentity{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Namespace: "team", Name: "lab-load-k6-1a2b"}}}

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
	var stages []string
	for _, s := range st.Stages {
		stages = append(stages, fmt.Sprintf("%d=%s", s.Stage, s.Commit))
	}
	var runs []string
	for _, r := range st.Runs {
		runs = append(runs, fmt.Sprintf("%s/%s %s", r.Target, r.Component, r.Phase))
	}
	pr := ""
	if st.PullRequest != nil {
		pr = fmt.Sprintf("#%d %s", st.PullRequest.Number, st.PullRequest.State)
	}
	return map[string]string{
		"phase": string(st.Phase), "revision": st.Revision, "digest": st.Digest, "workflow": wf,
		"targets": strings.Join(targets, ","), "generated": gen, "stage": fmt.Sprint(st.Stage),
		"stages": strings.Join(stages, ","), "runs": strings.Join(runs, ","), "pr": pr,
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
		{name: "new Experiment: Pending, then render stage 1",
			spec: lab(), status: scribev1.ExperimentStatus{},
			kind: ExperimentRender, fields: fields{"phase": "Pending", "revision": "", "stage": "1"},
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
		{name: "Complete, new generation: back to stage 3, so new runs wait for new evidence",
			spec: lab(), status: inPhase(scribev1.ExperimentComplete, ""), obs: ExperimentObservations{NewGeneration: true, Rendered: rendered("d1"), RenderedStage: 4, Workflow: validation},
			kind: ExperimentRender, fields: fields{"phase": "Provisioning", "revision": "", "stage": "3"},
			events: []string{"Provisioning: the spec changed: committing stage 3 (workflow templates) again before new runs"}},
		{name: "workflow failed, new generation: back to stage 3",
			spec: lab(), status: inPhase(scribev1.ExperimentFailed, ReasonWorkflowFailed, following("Workflow", "lab-validation-old", "Failed")), obs: ExperimentObservations{NewGeneration: true},
			kind: ExperimentRender, fields: fields{"phase": "Provisioning", "stage": "3", "workflow": ""},
			events: []string{"Provisioning: the spec changed: committing stage 3 (workflow templates) again before new runs"}},
		{name: "new generation before the runs: the stage is rendered again",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(2)), obs: ExperimentObservations{NewGeneration: true},
			kind: ExperimentRender, fields: fields{"phase": "Provisioning", "stage": "2", "revision": "c1"}},

		// 2. Commit: the stage and its digest are saved with an empty revision, then pushed.
		{name: "new render of stage 3: its digest is saved with an empty revision, then committed",
			spec: lab(), status: inPhase(scribev1.ExperimentComplete, ""), obs: ExperimentObservations{NewGeneration: true, Rendered: rendered("d2"), RenderedStage: 3, Workflow: validation},
			kind: ExperimentCommit, save: true, fields: fields{"revision": "", "digest": "d2", "phase": "Provisioning", "stage": "3"},
			events: []string{"Provisioning: the spec changed: committing stage 3 (workflow templates) again before new runs"}},
		{name: "first render: stage 1 committed",
			spec: lab(), status: scribev1.ExperimentStatus{Phase: scribev1.ExperimentPending}, obs: ExperimentObservations{Rendered: rendered("d1"), RenderedStage: 1},
			kind: ExperimentCommit, save: true, fields: fields{"revision": "", "digest": "d1", "stage": "1"}},
		{name: "a render of another stage is not committed: rendered again",
			spec: lab(), status: scribev1.ExperimentStatus{Phase: scribev1.ExperimentPending}, obs: ExperimentObservations{Rendered: rendered("d1"), RenderedStage: 2},
			kind: ExperimentRender, fields: fields{"revision": "", "stage": "1"}},
		{name: "committed: recorded as the stage's commit, Provisioning starts over, the old workflow forgotten, Stalled removed",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ReasonWorkflowFailed, following("Workflow", "lab-validation-old", "Failed"), func(st *scribev1.ExperimentStatus) {
				st.Revision, st.Stage = "", 3
				st.Stages = []scribev1.StageStatus{{Stage: 1, Commit: "a1"}, {Stage: 2, Commit: "a2"}, {Stage: 3, Commit: "a3"}, {Stage: 4, Commit: "a4"}}
			}),
			obs:  ExperimentObservations{Rendered: rendered("d2"), RenderedStage: 3, Commit: "c2"},
			kind: ExperimentReadTargets, fields: fields{"phase": "Provisioning", "revision": "c2", "digest": "d2", "workflow": "", "generated": generatedAt.Path, "stages": "1=a1,2=a2,3=c2"},
			marks:  []string{"-Stalled"},
			events: []string{"StageCommitted: stage 3 (workflow templates) of 4 committed c2"}},
		{name: "committed after a failed apply: Provisioning again",
			spec: lab(), status: inPhase(scribev1.ExperimentFailed, ReasonApplyFailed, func(st *scribev1.ExperimentStatus) { st.Revision, st.Stage = "", 2 }),
			obs:  ExperimentObservations{Rendered: rendered("d2"), RenderedStage: 2, Commit: "c2"},
			kind: ExperimentReadTargets, fields: fields{"phase": "Provisioning", "revision": "c2", "stages": "2=c2"},
			marks:  []string{"-Stalled"},
			events: []string{"StageCommitted: stage 2 (components) of 4 committed c2", "Provisioning: stage 2 (components) committed c2; waiting for the applier and the target clusters"}},
		{name: "an intent saved by an earlier reconcile, its commit not recorded: the status read is confirmed the latest first (a lagging cache shows it too after the commit)",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(2), func(st *scribev1.ExperimentStatus) { st.Revision = "" }),
			obs:  ExperimentObservations{Rendered: rendered("d1"), RenderedStage: 2},
			kind: ExperimentConfirmIntent, fields: fields{"revision": "", "digest": "d1", "stage": "2"}},
		{name: "restarted after the push, before the commit was recorded: the same bundle is published again",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(2), func(st *scribev1.ExperimentStatus) { st.Revision = "" }),
			obs:  ExperimentObservations{Rendered: rendered("d1"), RenderedStage: 2, Current: true},
			kind: ExperimentCommit, save: true, fields: fields{"revision": "", "digest": "d1", "stage": "2"}},

		// Pull requests: each stage proposed, the next after the merge.
		{name: "pull requests: the stage is proposed, its intent saved",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(2), func(st *scribev1.ExperimentStatus) { st.Revision = "" }),
			obs:  ExperimentObservations{PullRequests: true, Rendered: rendered("d1"), RenderedStage: 2, Current: true},
			kind: ExperimentPropose, save: true, fields: fields{"revision": "", "stage": "2"}},
		{name: "pull requests: proposed, recorded, the forge asked",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(2), func(st *scribev1.ExperimentStatus) { st.Revision = "" }),
			obs: ExperimentObservations{PullRequests: true, Rendered: rendered("d1"), RenderedStage: 2,
				Proposed: &Proposed{PullRequest: scribev1.PullRequestStatus{Number: 7, URL: "https://github.com/acme/exp/pull/7", Head: "h7", State: "open"}}},
			kind: ExperimentReadPullRequest, fields: fields{"revision": "", "pr": "#7 open"},
			events: []string{"PullRequestOpened: proposed stage 2 (components) in https://github.com/acme/exp/pull/7"}},
		{name: "pull requests: open, waiting for the merge",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(2), proposed),
			obs:  ExperimentObservations{PullRequests: true, Rendered: rendered("d1"), RenderedStage: 2, PullRequest: &PullRequestState{State: "open"}},
			kind: ExperimentWait, requeue: poll, fields: fields{"revision": "", "pr": "#7 open", "stage": "2"},
			marks: []string{"Reconciling=True/AwaitingMerge", "Ready=False/AwaitingMerge"}},
		{name: "pull requests: merged, the merge is the stage's commit",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(2), proposed),
			obs:  ExperimentObservations{PullRequests: true, Rendered: rendered("d1"), RenderedStage: 2, PullRequest: &PullRequestState{State: "closed", Merged: true, Revision: "m7", MergedBy: "forge"}},
			kind: ExperimentReadTargets, fields: fields{"revision": "m7", "pr": "#7 merged", "stages": "2=m7"},
			marks:  []string{"-Stalled"},
			events: []string{"PullRequestMerged: pull request #7 of stage 2 (components) merged as m7 (recognised by forge)", "StageCommitted: stage 2 (components) of 4 merged as m7"}},
		{name: "pull requests: closed without merging, Stalled",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(2), proposed),
			obs:  ExperimentObservations{PullRequests: true, Rendered: rendered("d1"), RenderedStage: 2, PullRequest: &PullRequestState{State: "closed"}},
			kind: ExperimentWait, requeue: 30 * time.Second, fields: fields{"revision": "", "stage": "2"},
			marks: []string{"Ready=False/PullRequestClosed", "Stalled=True/PullRequestClosed"}},

		// Stages: each moves on only on its evidence.
		{name: "stage 1 applied, every cluster ready: stage 2 is the intent",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(1)), obs: ExperimentObservations{Rendered: rendered("d1"), Targets: readTargets(health.Healthy, bothReady...)},
			kind: ExperimentRender, fields: fields{"phase": "Provisioning", "stage": "2", "revision": ""},
			marks: []string{"Reconciling=True/Progressing", "Ready=False/Progressing"}},
		{name: "stage 1 applied, a cluster not ready: stays at stage 1",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(1)),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Targets: readTargets(health.Healthy, bothReady[0], target("load", scribev1.ExperimentProvisioning, false, "HelmRelease lab-load: installing"))},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Provisioning", "stage": "1", "revision": "c1"},
			marks: []string{"Reconciling=True/Provisioning", "Ready=False/Provisioning"}},
		{name: "stage 2 not applied yet: stays at stage 2",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(2)), obs: ExperimentObservations{Rendered: rendered("d1"), Targets: readTargets(health.Pending, bothReady...)},
			kind: ExperimentWait, requeue: poll, fields: fields{"stage": "2", "revision": "c1"},
			marks: []string{"Reconciling=True/ApplyPending", "Ready=False/ApplyPending"}},
		{name: "stage 3 applied, the template not delivered: Provisioning with the reason, no runs",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(3)),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Targets: withTemplate(readTargets(health.Healthy, bothReady...), health.Pending, "not created yet")},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Provisioning", "stage": "3", "revision": "c1"},
			marks: []string{"Reconciling=True/WaitingForWorkflowTemplate", "Ready=False/WaitingForWorkflowTemplate"}},
		{name: "stage 3 applied, the template delivery failed: Failed, and read again",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(3)),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Targets: withTemplate(readTargets(health.Healthy, bothReady...), health.Failed, "kustomization path not found")},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed", "stage": "3"},
			marks:  []string{"Ready=False/ComponentFailed", "Stalled=True/ComponentFailed"},
			events: []string{"Warning Failed: workflow template delivery failed: smoke (Kustomization/team/lab-smoke: kustomization path not found)"}},
		{name: "stage 3 applied, targets ready, the template delivered: stage 4 is the intent",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(3)),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Targets: withTemplate(readTargets(health.Healthy, bothReady...), health.Healthy, "Applied revision: v1")},
			kind: ExperimentRender, fields: fields{"stage": "4", "revision": ""},
			marks: []string{"Reconciling=True/Progressing", "Ready=False/Progressing"}},
		{name: "stage 3 applied, the template delivered, a target not ready: stays at stage 3",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(3)),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Targets: withTemplate(readTargets(health.Healthy, bothReady[0], target("load", scribev1.ExperimentProvisioning, true, "waiting for components k6")), health.Healthy, "")},
			kind: ExperimentWait, requeue: poll, fields: fields{"stage": "3", "revision": "c1"},
			marks: []string{"Reconciling=True/Provisioning", "Ready=False/Provisioning"}},

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
		{name: "a target's cluster does not answer: Provisioning with TargetUnreachable, not the applier's failure of the deliveries that cannot reach it",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(2)),
			obs: ExperimentObservations{Rendered: rendered("d1"), Targets: applierFailed(health.ReasonHealthCheckFailed, "health check failed after 30s: Kustomization/team/lab-app-web status: 'Failed'",
				heldBy(target("app", scribev1.ExperimentProvisioning, true, "its cluster's API server https://10.0.0.1:6443 (kubeconfig Secret lab-app-kubeconfig) does not answer: connection refused"), ReasonTargetUnreachable), bothReady[1])},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Provisioning", "stage": "2", "revision": "c1"},
			marks: []string{"Reconciling=True/TargetUnreachable", "Ready=False/TargetUnreachable"}},
		{name: "a target's kubeconfig cannot register it with Argo CD: Provisioning with KubeconfigUnusable",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(1)),
			obs: ExperimentObservations{Rendered: rendered("d1"), Targets: readTargets(health.Healthy,
				bothReady[0], heldBy(target("load", scribev1.ExperimentProvisioning, false, "Cluster lab-load is ready; its kubeconfig Secret lab-load-kubeconfig cannot register it with Argo CD: exec (a credential plugin)"), ReasonKubeconfigUnusable))},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Provisioning", "stage": "1"},
			marks: []string{"Reconciling=True/KubeconfigUnusable", "Ready=False/KubeconfigUnusable"}},
		{name: "a held target that is Ready anyway holds nothing",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(1)),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Targets: readTargets(health.Healthy, heldBy(bothReady[0], ReasonTargetUnreachable), bothReady[1])},
			kind: ExperimentRender, fields: fields{"stage": "2", "revision": ""},
			marks: []string{"Reconciling=True/Progressing", "Ready=False/Progressing"}},
		{name: "a component failed on a ready cluster: ComponentFailed, and read again",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: readTargets(health.Healthy, target("app", scribev1.ExperimentFailed, true, "component web: HelmRelease/team/lab-app-web: install failed"), bothReady[1])},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed"},
			marks:  []string{"Ready=False/ComponentFailed", "Stalled=True/ComponentFailed"},
			events: []string{"Warning Failed: target app: component web: HelmRelease/team/lab-app-web: install failed"}},
		{name: "the Experiment's Application Degraded by a failed component: ComponentFailed with the component's message",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: applierFailed(health.ReasonDegraded, "Application/argocd/lab-app-web is Degraded",
				bothReady[0], target("load", scribev1.ExperimentFailed, true, "component k6: Application/argocd/lab-load-k6: Deployment/load/k6: Deployment \"k6\" exceeded its progress deadline"))},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed", "targets": "app=Ready,load=Failed"},
			marks:  []string{"Ready=False/ComponentFailed", "Stalled=True/ComponentFailed"},
			events: []string{"Warning Failed: target load: component k6: Application/argocd/lab-load-k6: Deployment/load/k6: Deployment \"k6\" exceeded its progress deadline"}},
		{name: "the Experiment's Application sync failed, a template delivery failed: ComponentFailed with the template's message",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(3)),
			obs: ExperimentObservations{Rendered: rendered("d1"), Targets: &TargetsReadBack{
				Applier:   health.Verdict{State: health.Failed, Reason: health.ReasonSyncFailed, Message: "one or more synchronization tasks completed unsuccessfully"},
				Targets:   bothReady,
				Templates: []scribev1.ComponentStatus{{Name: "smoke", Delivery: "Application/argocd/lab-smoke", Message: "Application is Degraded"}}, TemplatesFailed: true,
			}},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed", "stage": "3"},
			marks:  []string{"Ready=False/ComponentFailed", "Stalled=True/ComponentFailed"},
			events: []string{"Warning Failed: workflow template delivery failed: smoke (Application/argocd/lab-smoke: Application is Degraded)"}},
		{name: "the sync Kustomization's health check failed on a failed component: ComponentFailed with the component's message",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: applierFailed(health.ReasonHealthCheckFailed, "health check failed after 30s: failed early due to stalled resources: [HelmRelease/team/lab-app-web status: 'Failed']",
				target("app", scribev1.ExperimentFailed, true, "component web: HelmRelease/team/lab-app-web: install failed"), bothReady[1])},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed"},
			marks:  []string{"Ready=False/ComponentFailed", "Stalled=True/ComponentFailed"},
			events: []string{"Warning Failed: target app: component web: HelmRelease/team/lab-app-web: install failed"}},
		{name: "the Experiment's Application Degraded by a failed cluster: ClusterFailed with the cluster's message",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: applierFailed(health.ReasonDegraded, "Application/argocd/lab-load-cluster is Degraded",
				bothReady[0], target("load", scribev1.ExperimentFailed, false, "HelmRelease/load/lab-load-vcluster: install failed"))},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed", "targets": "app=Ready,load=Failed"},
			marks:  []string{"Ready=False/ClusterFailed", "Stalled=True/ClusterFailed"},
			events: []string{"Warning Failed: target load: HelmRelease/load/lab-load-vcluster: install failed"}},
		{name: "the Experiment's Application Degraded, every component ready, the run running: ApplyFailed",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Pending, health.ReasonProgressing, "Running", -time.Minute),
				Targets: applierFailed(health.ReasonDegraded, "ConfigMap/team/lab-settings is Degraded", bothReady...)},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed"},
			marks:  []string{"Ready=False/ApplyFailed", "Stalled=True/ApplyFailed"},
			events: []string{"Warning Failed: c1 failed to apply: ConfigMap/team/lab-settings is Degraded"}},
		{name: "stage 4, the Experiment's Application Degraded, every component ready: the run is read first",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: applierFailed(health.ReasonDegraded, "Application is Degraded", bothReady...)},
			kind: ExperimentReadWorkflow, fields: fields{"phase": "Provisioning"}},
		{name: "stage 4, the Experiment's Application Degraded by its failed run (Argo CD's Workflow health): WorkflowFailed for good, with the run's message",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Run: workflowRun(health.Failed, health.ReasonFailed, "main: Error (exit code 1)", -time.Minute),
				Targets: applierFailed(health.ReasonDegraded, "Application is Degraded", bothReady...)},
			kind: ExperimentWait, fields: fields{"phase": "Failed", "workflow": "Workflow/lab-validation-1a2b main: Error (exit code 1): main: Error (exit code 1)"},
			marks:  []string{"Ready=False/WorkflowFailed", "Stalled=True/WorkflowFailed"},
			events: []string{"Warning Failed: Workflow lab-validation-1a2b failed: main: Error (exit code 1)"}},
		{name: "stage 3, the Experiment's Application Degraded, every component ready: ApplyFailed, no run to read",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, "", atStage(3)),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Targets: applierFailed(health.ReasonDegraded, "Application is Degraded", bothReady...)},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed", "stage": "3"},
			marks:  []string{"Ready=False/ApplyFailed", "Stalled=True/ApplyFailed"},
			events: []string{"Warning Failed: c1 failed to apply: Application is Degraded"}},
		{name: "the Experiment's Application cannot compare its revision, a component failed: ApplyFailed, the sync's own error",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: applierFailed(health.ReasonComparisonError, "Failed to load target state: app path does not exist",
				target("app", scribev1.ExperimentFailed, true, "component web: Application/argocd/lab-app-web: Degraded"), bothReady[1])},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed"},
			marks:  []string{"Ready=False/ApplyFailed", "Stalled=True/ApplyFailed"},
			events: []string{"Warning Failed: c1 failed to apply: Failed to load target state: app path does not exist"}},
		{name: "the sync Kustomization failed to apply, a component failed: ApplyFailed, the sync's own error",
			spec: lab(), status: inPhase(scribev1.ExperimentProvisioning, ""),
			obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Targets: applierFailed(health.ReasonApplyFailed, "Deployment/demo/demo-services dry-run failed: field is immutable",
				target("app", scribev1.ExperimentFailed, true, "component web: HelmRelease/team/lab-app-web: install failed"), bothReady[1])},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Failed"},
			marks:  []string{"Ready=False/ApplyFailed", "Stalled=True/ApplyFailed"},
			events: []string{"Warning Failed: c1 failed to apply: Deployment/demo/demo-services dry-run failed: field is immutable"}},
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
		// Workflow components' runs.
		{name: "a load generator's Workflow failed: Failed for good, with its message",
			spec: lab(), status: inPhase(scribev1.ExperimentRunning, ""),
			obs: ExperimentObservations{Rendered: rendered("d1"), Workflow: validation, Runs: loadRun, Run: workflowRun(health.Pending, health.ReasonProgressing, "Running", -time.Minute),
				ComponentRuns: []WorkflowRun{*workflowRun(health.Failed, "", "Failed", -time.Minute)}},
			kind: ExperimentWait, fields: fields{"phase": "Failed", "runs": "load/k6 Failed"},
			marks:  []string{"Ready=False/WorkflowFailed", "Stalled=True/WorkflowFailed"},
			events: []string{"Warning Failed: workflow component k6 of target load: Workflow lab-load-k6-1a2b failed: Failed"}},
		{name: "only load generators, all succeeded: Complete",
			spec: lab(noWorkflow), status: inPhase(scribev1.ExperimentRunning, ""),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Runs: loadRun, Run: &WorkflowRun{}, ComponentRuns: []WorkflowRun{*workflowRun(health.Healthy, "", "Succeeded", -time.Minute)}},
			kind: ExperimentWait, fields: fields{"phase": "Complete", "runs": "load/k6 Succeeded"},
			marks:  []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"},
			events: []string{"Complete: every workflow component's Workflow succeeded"}},
		{name: "only load generators, one running: Running",
			spec: lab(noWorkflow), status: inPhase(scribev1.ExperimentReady, ""),
			obs:  ExperimentObservations{Rendered: rendered("d1"), Runs: loadRun, Run: &WorkflowRun{}, ComponentRuns: []WorkflowRun{*workflowRun(health.Pending, health.ReasonProgressing, "Running", -time.Minute)}},
			kind: ExperimentWait, requeue: poll, fields: fields{"phase": "Running"},
			marks:  []string{"Reconciling=True/WorkflowRunning"},
			events: []string{"Running: Workflows lab-load-k6-1a2b are running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := tc.obs
			obs.Poll = poll
			if obs.Rendered != nil && obs.RenderedStage == 0 {
				// Rendered at the status's stage unless the case says otherwise.
				obs.RenderedStage = tc.status.Stage
			}
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
	// asked for until a wait; a render resets what follows it, and the next
	// reconcile starts with fresh observations.
	spec := lab()
	st := scribev1.ExperimentStatus{}
	var got []string
	reconcile := func() {
		obs := ExperimentObservations{Poll: poll}
		for range maxExperimentDecisions {
			var act ExperimentAction
			st, act = DecideExperiment(spec, st, obs, t0)
			got = append(got, string(act.Kind))
			switch act.Kind {
			case ExperimentRender:
				obs = ExperimentObservations{Poll: poll, Rendered: rendered(fmt.Sprintf("d%d", st.Stage)), RenderedStage: st.Stage}
				if st.Stage == scribev1.StageWorkflow {
					obs.Workflow = validation
				}
			case ExperimentCommit:
				obs.Commit = fmt.Sprintf("c%d", st.Stage)
			case ExperimentReadTargets:
				obs.Targets = readTargets(health.Healthy, bothReady...)
				if st.Stage >= scribev1.StageWorkflowTemplates {
					withTemplate(obs.Targets, health.Healthy, "")
				}
			case ExperimentReadWorkflow:
				obs.Run = workflowRun(health.Healthy, "", "Succeeded", -time.Minute)
			default:
				got = append(got, string(st.Phase))
				return
			}
		}
		t.Fatalf("no wait after %d decisions: %v", maxExperimentDecisions, got)
	}
	reconcile() // Pending → stage 1 … stage 4 committed, each on its read-back → Ready
	reconcile() // Ready → Complete
	reconcile() // Complete at this generation: nothing to do
	want := "Render Commit ReadTargets Render Commit ReadTargets Render Commit ReadTargets Render Commit ReadTargets Wait Ready Render ReadWorkflow Wait Complete Wait Complete"
	if strings.Join(got, " ") != want {
		t.Fatalf("reconciles %q, want %q", strings.Join(got, " "), want)
	}
	if v := experimentView(st); v["stages"] != "1=c1,2=c2,3=c3,4=c4" || v["revision"] != "c4" {
		t.Fatalf("stages %s, revision %s", v["stages"], v["revision"])
	}
}
