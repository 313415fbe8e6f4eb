package controller

// Longer than 500 lines on purpose: the Experiment's four stages and its
// phases are one state machine read top to bottom (intend, deliver,
// provision, validate, complete); DecideExperiment's table test follows
// the same order.

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
)

// ExperimentActionKind is what the reconciler does after a stage decision.
type ExperimentActionKind string

// The first kinds make the reconciler do one thing, record what it saw in
// the observations and ask again; ExperimentWait ends the reconcile.
const (
	// ExperimentRender resolves the Repository and renders status.stage;
	// the digest, generated resources and the runs go into
	// ExperimentObservations.Rendered, Workflow and Runs.
	ExperimentRender ExperimentActionKind = "Render"
	// ExperimentConfirmIntent reads, past the cache, whether the status
	// read is the API server's latest (DeliveryConfirmIntent); the answer
	// goes into ExperimentObservations.Current.
	ExperimentConfirmIntent ExperimentActionKind = "ConfirmIntent"
	// ExperimentCommit publishes the render; the commit goes into
	// ExperimentObservations.Commit.
	ExperimentCommit ExperimentActionKind = "Commit"
	// ExperimentPropose opens or updates the pull request of the stage;
	// the result goes into ExperimentObservations.Proposed.
	ExperimentPropose ExperimentActionKind = "Propose"
	// ExperimentReadPullRequest asks the forge about the recorded pull
	// request; the answer goes into ExperimentObservations.PullRequest.
	ExperimentReadPullRequest ExperimentActionKind = "ReadPullRequest"
	// ExperimentReadTargets reads the applier's verdict on status.revision,
	// every target's cluster and components and the workflow templates'
	// deliveries into ExperimentObservations.Targets.
	ExperimentReadTargets ExperimentActionKind = "ReadTargets"
	// ExperimentReadWorkflow reads the validation run and the workflow
	// components' Workflows into ExperimentObservations.Run and
	// ComponentRuns.
	ExperimentReadWorkflow ExperimentActionKind = "ReadWorkflow"
	// ExperimentWait: nothing to do until Requeue (0: the next watch event).
	ExperimentWait ExperimentActionKind = "Wait"
)

// Experiment-specific reasons of the stages.
const (
	// ReasonWaitingForWorkflowTemplate: stage 3 is applied, but a workflow
	// template's delivery is missing or not ready; the workflow runs are
	// not committed until it is.
	ReasonWaitingForWorkflowTemplate = "WaitingForWorkflowTemplate"
	// ReasonStageCommitted is the event of a stage's commit.
	ReasonStageCommitted = "StageCommitted"
)

// maxExperimentDecisions bounds the decisions of one Experiment reconcile:
// a reconcile may walk every stage when their evidence is already in (a
// stage with nothing new is the previous commit, applied already), four
// decisions each (render, commit or propose, read, move on), then read the
// runs.
const maxExperimentDecisions = 4*scribev1.StageWorkflow + maxDecisions

// stageName names commit stage n.
func stageName(n int32) string {
	switch n {
	case scribev1.StageClusters:
		return "stage 1 (clusters)"
	case scribev1.StageComponents:
		return "stage 2 (components)"
	case scribev1.StageWorkflowTemplates:
		return "stage 3 (workflow templates)"
	case scribev1.StageWorkflow:
		return "stage 4 (workflow runs)"
	}
	return fmt.Sprintf("stage %d", n)
}

// ExperimentAction is what a stage decision asks of the reconciler.
type ExperimentAction struct {
	Kind ExperimentActionKind
	// SaveIntent asks for the status (whose revision is empty, its stage
	// the one to commit) to be saved before publishing, so a controller
	// restarted during the push publishes the same stage again (a no-op in
	// Git) and never skips or repeats one.
	SaveIntent bool
	// Requeue is when to come back (ExperimentWait).
	Requeue time.Duration
	// Marks are the condition changes to make, in order.
	Marks []Mark
	// Events are the events to record, in order: a phase transition's
	// reason is the phase entered.
	Events []Event
}

// ExperimentObservations is what the reconciler knows when it asks for a
// decision: its settings and the object's, then what each action it
// carried out in this reconcile showed. A nil (or empty) observation was
// not made yet. A render resets every observation that follows it.
type ExperimentObservations struct {
	// Poll is how often read-back objects are re-read while waiting.
	Poll time.Duration
	// NewGeneration says the spec changed since the last reconcile: a
	// finished Experiment renders again.
	NewGeneration bool
	// CompleteRequested says CompleteAnnotation is set.
	CompleteRequested bool
	// PullRequests says the Repository takes changes by pull request:
	// each stage is proposed, and the next one follows its merge.
	PullRequests bool

	// Rendered is the render of RenderedStage (ExperimentRender).
	Rendered      *Rendered
	RenderedStage int32
	// Workflow is the rendered validation run, nil when the render has
	// none (ExperimentRender).
	Workflow *scribev1.ObjectIdentity
	// Runs are the rendered Workflows of the workflow components
	// (ExperimentRender).
	Runs []ComponentRunRef
	// Current says the status read is the API server's latest
	// (ExperimentConfirmIntent).
	Current bool
	// Commit carries the render (ExperimentCommit).
	Commit string
	// Proposed is the pull request just opened or updated
	// (ExperimentPropose).
	Proposed *Proposed
	// PullRequest is the forge's word on the recorded pull request
	// (ExperimentReadPullRequest).
	PullRequest *PullRequestState
	// Targets is the read-back of the commit, the targets and the
	// workflow templates (ExperimentReadTargets).
	Targets *TargetsReadBack
	// Run is the read-back of the validation run, ComponentRuns of the
	// workflow components' Workflows, in Runs order (ExperimentReadWorkflow).
	Run           *WorkflowRun
	ComponentRuns []WorkflowRun
}

// ComponentRunRef is the Workflow of one workflow component.
type ComponentRunRef struct {
	Target, Component string
	ID                scribev1.ObjectIdentity
}

// TargetsReadBack is the applier's verdict on the commit, each target's
// state and the workflow templates' deliveries.
type TargetsReadBack struct {
	Applier health.Verdict
	// Targets as read back, in spec order; a target is Ready when its
	// cluster, its components and the targets it depends on are.
	Targets []scribev1.TargetStatus
	// Templates are the workflow templates' deliveries (stage 3 on).
	Templates []scribev1.ComponentStatus
	// TemplatesFailed says a template's delivery reports a failure.
	TemplatesFailed bool
}

// WorkflowRun is a workflow run as read back.
type WorkflowRun struct {
	// Found says the workflow object exists.
	Found bool
	// Verdict is the object's own health: Pending with reason Progressing
	// while it runs, Pending otherwise until its engine picks it up.
	Verdict health.Verdict
	// Phase is the engine's own phase.
	Phase string
	// Created is when the workflow object was created.
	Created time.Time
}

// DecideExperiment walks an Experiment's commit stages and phases: from
// the spec and status and what the reconciler observed at now, the status
// to record and the one action to carry out. It reads top to bottom:
//
//  1. A new Experiment is Pending; one finished at this generation stays.
//     A new generation of an Experiment whose runs were committed goes
//     back to stage 3: its runs are committed again only on new evidence.
//  2. Commit: the render of status.stage is committed (or proposed and
//     merged), its intent saved first and its commit recorded after.
//  3. Provisioning: the commit applied and its evidence read back moves
//     to the next stage: every cluster ready (1), every target ready (2),
//     every workflow template delivered (3); at stage 4 the Experiment is
//     Ready. A failed apply, target or template is Failed, and read again
//     (the applier and Cluster API retry).
//  4. Ready, Running: the runs → Complete, or Failed for good when one
//     fails or the validation run times out.
//
// Stages are cumulative: each stage's tree holds the previous one's.
func DecideExperiment(spec *scribev1.ExperimentSpec, status scribev1.ExperimentStatus, obs ExperimentObservations, now time.Time) (scribev1.ExperimentStatus, ExperimentAction) {
	d := &stage{spec: spec, st: status.DeepCopy(), obs: obs, now: now}
	if d.st.Phase == "" {
		d.setPhase(scribev1.ExperimentPending, "waiting for the first render")
		d.marks = append(d.marks, markReconciling(ReasonProgressing, "rendering"), markUnknown(scribev1.ReadyCondition, ReasonProgressing, "rendering"))
	}
	var a *ExperimentAction
	if !obs.NewGeneration && finished(*d.st) {
		// Complete, or failed for good, at this generation: nothing to read
		// back any more. A new generation renders and runs again.
		a = &ExperimentAction{Kind: ExperimentWait}
	}
	if a == nil {
		d.intend()
		a = d.commit()
	}
	if a == nil {
		switch d.st.Phase {
		case scribev1.ExperimentReady, scribev1.ExperimentRunning:
			a = d.run()
		case scribev1.ExperimentComplete:
			a = &ExperimentAction{Kind: ExperimentWait}
		case scribev1.ExperimentFailed:
			if finished(*d.st) {
				a = &ExperimentAction{Kind: ExperimentWait}
			}
		}
	}
	if a == nil {
		a = d.provision()
	}
	a.Marks = append(d.marks, a.Marks...)
	a.Events = append(d.events, a.Events...)
	return *d.st, *a
}

// stage is one decision in the making.
type stage struct {
	spec   *scribev1.ExperimentSpec
	st     *scribev1.ExperimentStatus
	obs    ExperimentObservations
	now    time.Time
	marks  []Mark
	events []Event
}

// finished reports a terminal phase: Complete, or Failed because a run
// failed or timed out. Failures of the applier or of a cluster are not
// terminal: they are re-read, as Flux and Cluster API retry.
func finished(st scribev1.ExperimentStatus) bool {
	switch st.Phase {
	case scribev1.ExperimentComplete:
		return true
	case scribev1.ExperimentFailed:
		var reason string
		if c := apimeta.FindStatusCondition(st.Conditions, scribev1.ReadyCondition); c != nil {
			reason = c.Reason
		}
		return reason == ReasonWorkflowFailed || reason == ReasonWorkflowTimeout
	}
	return false
}

// intend sets the stage to commit: the first one for a new Experiment; for
// a new generation whose runs were committed, the workflow templates
// again, so that new runs wait for new evidence. The reconciler passes a
// new generation to the first decision of a reconcile only: its intent is
// saved with the observed generation.
func (d *stage) intend() {
	st := d.st
	switch {
	case st.Stage < scribev1.StageClusters:
		st.Stage, st.Revision, st.PullRequest = scribev1.StageClusters, "", nil
	case d.obs.NewGeneration && st.Stage == scribev1.StageWorkflow:
		st.Stage, st.Revision, st.PullRequest = scribev1.StageWorkflowTemplates, "", nil
		st.Workflow, st.Runs = nil, nil
		d.setPhase(scribev1.ExperimentProvisioning, "the spec changed: committing %s again before new runs", stageName(st.Stage))
	}
}

// commit asks for the render of status.stage, and for its commit (or pull
// request) when it is new (DecideDelivery): the intent (the stage and its
// digest, with an empty revision) is saved before the push and the commit
// recorded after, so a controller restarted in between publishes the same
// bundle again (a no-op in Git) and never makes a second commit for it.
func (d *stage) commit() *ExperimentAction {
	st, obs := d.st, d.obs
	step := DecideDelivery(&st.CommonStatus, obs.delivery(st.Stage))
	if step.Opened {
		d.events = append(d.events, normalEvent("PullRequestOpened", "proposed %s in %s", stageName(st.Stage), st.PullRequest.URL))
	}
	switch step.Kind {
	case DeliveryRender:
		return &ExperimentAction{Kind: ExperimentRender}
	case DeliveryConfirmIntent:
		return &ExperimentAction{Kind: ExperimentConfirmIntent}
	case DeliveryCommit:
		return &ExperimentAction{Kind: ExperimentCommit, SaveIntent: true}
	case DeliveryPropose:
		return &ExperimentAction{Kind: ExperimentPropose, SaveIntent: step.SaveIntent}
	case DeliveryReadPullRequest:
		return &ExperimentAction{Kind: ExperimentReadPullRequest, SaveIntent: step.SaveIntent}
	case DeliveryClosed:
		return &ExperimentAction{Kind: ExperimentWait, Requeue: 30 * time.Second, Marks: []Mark{
			markNotReady("PullRequestClosed", "pull request #%d of %s was closed without merging", st.PullRequest.Number, stageName(st.Stage)),
			markStalled("PullRequestClosed", "pull request #%d of %s was closed without merging", st.PullRequest.Number, stageName(st.Stage)),
		}}
	case DeliveryAwaitingMerge:
		msg := fmt.Sprintf("%s proposed in %s; waiting for the merge", stageName(st.Stage), st.PullRequest.URL)
		if st.Phase != scribev1.ExperimentPending {
			d.setPhase(scribev1.ExperimentProvisioning, "%s", msg)
		}
		return &ExperimentAction{Kind: ExperimentWait, Requeue: obs.Poll, Marks: []Mark{
			markReconciling("AwaitingMerge", "waiting for pull request #%d to be merged", st.PullRequest.Number),
			markNotReady("AwaitingMerge", "%s", msg),
		}}
	}
	if step.Recorded == recordedMerged {
		d.events = append(d.events, normalEvent("PullRequestMerged", "pull request #%d of %s merged as %s (recognised by %s)", st.PullRequest.Number, stageName(st.Stage), shortRev(st.Revision), obs.PullRequest.MergedBy))
	}
	if step.Recorded != "" {
		d.committed(step.Recorded)
	}
	return nil
}

// delivery is what the delivery actions showed of the render of stage (a
// render of another stage is none).
func (o *ExperimentObservations) delivery(stage int32) DeliveryObservations {
	obs := DeliveryObservations{PullRequests: o.PullRequests, Rendered: o.Rendered, Current: o.Current, Commit: o.Commit, Proposed: o.Proposed, PullRequest: o.PullRequest}
	if o.RenderedStage != stage {
		obs.Rendered = nil
	}
	return obs
}

// committed records what follows the commit that carries the stage's
// render (DecideDelivery recorded it in status.revision, how).
func (d *stage) committed(how string) {
	st := d.st
	rev := st.Revision
	st.Workflow, st.Runs = nil, nil
	if st.Stage < scribev1.StageWorkflowTemplates {
		st.Templates = nil
	}
	at := metav1.NewTime(d.now)
	rec := scribev1.StageStatus{Stage: st.Stage, Commit: rev, CommittedAt: &at}
	kept := st.Stages[:0:0]
	for _, s := range st.Stages {
		if s.Stage < st.Stage {
			kept = append(kept, s)
		}
	}
	st.Stages = append(kept, rec)
	d.marks = append(d.marks, unmark(scribev1.StalledCondition)) // a new commit starts over
	d.events = append(d.events, normalEvent(ReasonStageCommitted, "%s of 4 %s %s", stageName(st.Stage), how, shortRev(rev)))
	d.setPhase(scribev1.ExperimentProvisioning, "%s %s %s; waiting for the applier and the target clusters", stageName(st.Stage), how, shortRev(rev))
}

// provision waits for the applier to apply the stage's commit and for its
// evidence; then it moves to the next stage, or, at the last one, the
// Experiment is Ready.
func (d *stage) provision() *ExperimentAction {
	st, rb := d.st, d.obs.Targets
	if rb == nil {
		return &ExperimentAction{Kind: ExperimentReadTargets}
	}
	st.Targets = rb.Targets
	if st.Stage >= scribev1.StageWorkflowTemplates {
		st.Templates = rb.Templates
	}
	templates := templatesNotReady(rb)
	if reason, msg, ok := targetHeld(rb); ok {
		// What Scribe knows of a target's cluster comes before what its
		// applier says of the deliveries that cannot reach it.
		d.setPhase(scribev1.ExperimentProvisioning, "%s", msg)
		return &ExperimentAction{Kind: ExperimentWait, Requeue: d.obs.Poll, Marks: []Mark{
			markReconciling(reason, "%s", msg),
			markNotReady(reason, "%s", msg),
		}}
	}
	if rb.Applier.State == health.Failed {
		// A failed component delivery is the more specific cause when the
		// applier's failure can come from it: with the argocd-cm
		// Application health check, a Degraded component Application makes
		// the Experiment's Application Degraded (and fails its sync while a
		// later wave waits).
		if failureOfAppliedObject(rb.Applier.Reason) {
			if reason, msg, ok := deliveryFailure(rb, templates); ok {
				return d.failed(d.obs.Poll, reason, "%s", msg)
			}
			if st.Stage == scribev1.StageWorkflow {
				if a := d.runFailed(); a != nil {
					return a
				}
			}
		}
		return d.failed(d.obs.Poll, ReasonApplyFailed, "%s failed to apply: %s", shortRev(st.Revision), rb.Applier.Message)
	}
	var waiting []string
	if reason, msg, ok := deliveryFailure(rb, templates); ok {
		return d.failed(d.obs.Poll, reason, "%s", msg)
	}
	for _, ts := range rb.Targets {
		if ts.Phase != scribev1.ExperimentReady {
			waiting = append(waiting, ts.Name+": "+ts.Message)
		}
	}
	if rb.Applier.State != health.Healthy {
		d.setPhase(scribev1.ExperimentProvisioning, "waiting for %s to be applied", shortRev(st.Revision))
		return &ExperimentAction{Kind: ExperimentWait, Requeue: d.obs.Poll, Marks: []Mark{
			markReconciling(ReasonApplyPending, "waiting for %s (%s) to be applied: %s", shortRev(st.Revision), stageName(st.Stage), rb.Applier.Message),
			markNotReady(ReasonApplyPending, "waiting for %s (%s) to be applied: %s", shortRev(st.Revision), stageName(st.Stage), rb.Applier.Message),
		}}
	}
	if len(waiting) > 0 {
		msg := fmt.Sprintf("%s applied (%s); waiting for %d of %d targets: %s", shortRev(st.Revision), stageName(st.Stage), len(waiting), len(rb.Targets), strings.Join(waiting, "; "))
		d.setPhase(scribev1.ExperimentProvisioning, "%s", msg)
		return &ExperimentAction{Kind: ExperimentWait, Requeue: d.obs.Poll, Marks: []Mark{
			markReconciling(ReasonProvisioning, "%s", msg),
			markNotReady(ReasonProvisioning, "%s", msg),
		}}
	}
	if len(templates) > 0 {
		msg := fmt.Sprintf("%s applied (%s); the workflow runs wait for the workflow templates' deliveries: %s", shortRev(st.Revision), stageName(st.Stage), strings.Join(templates, "; "))
		d.setPhase(scribev1.ExperimentProvisioning, "%s", msg)
		return &ExperimentAction{Kind: ExperimentWait, Requeue: d.obs.Poll, Marks: []Mark{
			markReconciling(ReasonWaitingForWorkflowTemplate, "%s", msg),
			markNotReady(ReasonWaitingForWorkflowTemplate, "%s", msg),
		}}
	}
	if st.Stage < scribev1.StageWorkflow {
		// The stage's evidence is in: the next stage is the intent, its
		// commit made by the next decision.
		msg := fmt.Sprintf("%s applied and read back ready", stageName(st.Stage))
		st.Stage, st.Revision, st.PullRequest = st.Stage+1, "", nil
		d.setPhase(scribev1.ExperimentProvisioning, "%s", msg)
		return &ExperimentAction{Kind: ExperimentRender, Marks: []Mark{
			markReconciling(ReasonProgressing, "%s; committing %s", msg, stageName(st.Stage)),
			markNotReady(ReasonProgressing, "%s; committing %s", msg, stageName(st.Stage)),
		}}
	}
	msg := fmt.Sprintf("%s applied; all %d targets ready", shortRev(st.Revision), len(rb.Targets))
	d.setPhase(scribev1.ExperimentReady, "%s", msg)
	// The next pass, at once, looks at the workflow: each phase is recorded
	// on its own.
	return &ExperimentAction{Kind: ExperimentWait, Requeue: time.Millisecond, Marks: []Mark{
		markReady("%s", msg),
		markReconciling(ReasonWaitingForWorkflow, "%s", msg),
	}}
}

// runFailed is the validation run's failure behind the applier's, at the
// workflow stage: Argo CD assesses the Workflow it applied (Failed or
// Error is Degraded), so the Application that applied a run that failed
// is Degraded, and the run's own message is the cause, as the Workflow's
// engine reported it. It asks to read the run first; nil when the run did
// not fail.
func (d *stage) runFailed() *ExperimentAction {
	id := d.obs.Workflow
	if id == nil || d.spec.Workflow == nil {
		return nil
	}
	if d.obs.Run == nil {
		return &ExperimentAction{Kind: ExperimentReadWorkflow}
	}
	run := d.obs.Run
	if !run.Found || run.Verdict.State != health.Failed {
		return nil
	}
	d.st.Workflow = &scribev1.WorkflowStatus{Kind: id.Kind, Name: id.Name, Phase: run.Phase, Message: run.Verdict.Message}
	return d.failed(0, ReasonWorkflowFailed, "%s %s failed: %s", id.Kind, id.Name, run.Verdict.Message)
}

// failureOfAppliedObject reports whether an applier's failure reason can
// come from an object it applied rather than from the sync itself: Argo CD
// Degraded or SyncFailed, Flux HealthCheckFailed. ComparisonError,
// InvalidSpecError, BuildFailed, ApplyFailed and the like are the sync's
// own.
func failureOfAppliedObject(reason string) bool {
	switch reason {
	case health.ReasonDegraded, health.ReasonSyncFailed, health.ReasonHealthCheckFailed:
		return true
	}
	return false
}

// deliveryFailure is the reason and message of the first failed target
// (ClusterFailed when its cluster failed, ComponentFailed when one of its
// component deliveries did), then of the failed workflow template
// deliveries, as provision reports them.
func deliveryFailure(rb *TargetsReadBack, templates []string) (reason, msg string, ok bool) {
	for _, ts := range rb.Targets {
		if ts.Phase == scribev1.ExperimentFailed {
			reason := ReasonClusterFailed
			if ts.ClusterReady {
				reason = ReasonComponentFailed
			}
			return reason, fmt.Sprintf("target %s: %s", ts.Name, ts.Message), true
		}
	}
	if rb.TemplatesFailed {
		return ReasonComponentFailed, "workflow template delivery failed: " + strings.Join(templates, "; "), true
	}
	return "", "", false
}

// targetHeld is the reason and message of the first target held by its
// cluster as Scribe reads it (TargetUnreachable, KubeconfigUnusable,
// ClusterNotRegistered: TargetStatus.Reason): not a failure, since the
// provider, the network or the platform may yet mend it.
func targetHeld(rb *TargetsReadBack) (reason, msg string, ok bool) {
	for _, ts := range rb.Targets {
		if ts.Reason != "" && ts.Phase != scribev1.ExperimentFailed && ts.Phase != scribev1.ExperimentReady {
			return ts.Reason, fmt.Sprintf("target %s: %s", ts.Name, ts.Message), true
		}
	}
	return "", "", false
}

// templatesNotReady describes each workflow template delivery not ready
// as "<name> (<delivery>: <message>)".
func templatesNotReady(rb *TargetsReadBack) []string {
	var out []string
	for _, c := range rb.Templates {
		if !c.Ready {
			out = append(out, fmt.Sprintf("%s (%s: %s)", c.Name, c.Delivery, c.Message))
		}
	}
	return out
}

// run follows the runs once every target is Ready: a workflow
// component's Workflow that fails fails the Experiment for good, with its
// message; the validation run completes it (or, without one, every
// workflow component's Workflow succeeding).
func (d *stage) run() *ExperimentAction {
	st, wf, id := d.st, d.spec.Workflow, d.obs.Workflow
	if id == nil {
		wf = nil
	}
	if wf == nil && len(d.obs.Runs) == 0 {
		// Without a workflow the experiment is the environment itself: it is
		// complete once every target is ready.
		d.setPhase(scribev1.ExperimentComplete, "no workflow to run; every target is ready")
		return &ExperimentAction{Kind: ExperimentWait, Marks: []Mark{
			markReady("%s applied; every target ready; no workflow to run", shortRev(st.Revision)),
			unmark(scribev1.ReconcilingCondition),
			unmark(scribev1.StalledCondition),
		}}
	}
	if wf != nil && (st.Workflow == nil || st.Workflow.Kind != id.Kind || st.Workflow.Name != id.Name) {
		st.Workflow = &scribev1.WorkflowStatus{Kind: id.Kind, Name: id.Name}
	}
	if d.obs.Run == nil {
		return &ExperimentAction{Kind: ExperimentReadWorkflow}
	}
	if a := d.componentRuns(); a != nil {
		return a
	}
	if wf == nil {
		return d.componentRunsOnly()
	}
	manual := wf.Completion != nil && wf.Completion.Mode == scribev1.CompletionManual
	run := d.obs.Run
	if !run.Found {
		st.Workflow.Phase, st.Workflow.Message = "", "not created yet"
		if manual && d.obs.CompleteRequested {
			return d.complete("completed by the %s annotation", CompleteAnnotation)
		}
		return &ExperimentAction{Kind: ExperimentWait, Requeue: d.obs.Poll, Marks: []Mark{
			markReconciling(ReasonWaitingForWorkflow, "waiting for %s %s to be created", id.Kind, id.Name),
		}}
	}
	v := run.Verdict
	st.Workflow.Phase, st.Workflow.Message = run.Phase, v.Message
	if v.State == health.Failed {
		return d.failed(0, ReasonWorkflowFailed, "%s %s failed: %s", id.Kind, id.Name, v.Message)
	}
	if manual && d.obs.CompleteRequested {
		return d.complete("completed by the %s annotation", CompleteAnnotation)
	}
	if v.State == health.Healthy {
		if manual {
			d.setPhase(scribev1.ExperimentRunning, "%s %s succeeded; waiting for the %s annotation", id.Kind, id.Name, CompleteAnnotation)
			return &ExperimentAction{Kind: ExperimentWait, Marks: []Mark{
				markReconciling(ReasonWaitingForCompletion, "%s %s succeeded; waiting for the %s annotation", id.Kind, id.Name, CompleteAnnotation),
			}}
		}
		return d.complete("%s %s succeeded", id.Kind, id.Name)
	}
	if v.Reason != health.ReasonProgressing {
		// Applied but not picked up by its engine yet.
		return &ExperimentAction{Kind: ExperimentWait, Requeue: d.obs.Poll, Marks: []Mark{
			markReconciling(ReasonWaitingForWorkflow, "waiting for %s %s to start: %s", id.Kind, id.Name, v.Message),
		}}
	}
	requeue := d.obs.Poll
	if wf.Completion != nil && wf.Completion.Timeout != nil && wf.Completion.Timeout.Duration > 0 {
		left := wf.Completion.Timeout.Duration - d.now.Sub(run.Created)
		if left <= 0 {
			return d.failed(0, ReasonWorkflowTimeout, "%s %s ran longer than %s", id.Kind, id.Name, wf.Completion.Timeout.Duration)
		}
		requeue = minDuration(requeue, left)
	}
	d.setPhase(scribev1.ExperimentRunning, "%s %s is running", id.Kind, id.Name)
	return &ExperimentAction{Kind: ExperimentWait, Requeue: requeue, Marks: []Mark{
		markReconciling(ReasonWorkflowRunning, "%s %s: %s", id.Kind, id.Name, v.Message),
	}}
}

// componentRuns records the workflow components' Workflows; the first
// that failed fails the Experiment for good with its message.
func (d *stage) componentRuns() *ExperimentAction {
	st := d.st
	st.Runs = nil
	for i, ref := range d.obs.Runs {
		ws := scribev1.WorkflowStatus{Kind: ref.ID.Kind, Name: ref.ID.Name, Target: ref.Target, Component: ref.Component, Message: "not created yet"}
		if i < len(d.obs.ComponentRuns) && d.obs.ComponentRuns[i].Found {
			r := d.obs.ComponentRuns[i]
			ws.Phase, ws.Message = r.Phase, r.Verdict.Message
		}
		st.Runs = append(st.Runs, ws)
	}
	for i, ref := range d.obs.Runs {
		if i < len(d.obs.ComponentRuns) && d.obs.ComponentRuns[i].Found && d.obs.ComponentRuns[i].Verdict.State == health.Failed {
			return d.failed(0, ReasonWorkflowFailed, "workflow component %s of target %s: %s %s failed: %s",
				ref.Component, ref.Target, ref.ID.Kind, ref.ID.Name, d.obs.ComponentRuns[i].Verdict.Message)
		}
	}
	return nil
}

// componentRunsOnly follows an Experiment without a validation run: it is
// Complete once every workflow component's Workflow succeeded.
func (d *stage) componentRunsOnly() *ExperimentAction {
	var running, waiting []string
	for i, ref := range d.obs.Runs {
		var r WorkflowRun
		if i < len(d.obs.ComponentRuns) {
			r = d.obs.ComponentRuns[i]
		}
		switch {
		case r.Found && r.Verdict.State == health.Healthy:
		case r.Found && r.Verdict.Reason == health.ReasonProgressing:
			running = append(running, ref.ID.Name)
		default:
			waiting = append(waiting, ref.ID.Name)
		}
	}
	switch {
	case len(running) == 0 && len(waiting) == 0:
		return d.complete("every workflow component's Workflow succeeded")
	case len(running) > 0:
		d.setPhase(scribev1.ExperimentRunning, "Workflows %s are running", strings.Join(running, ", "))
		return &ExperimentAction{Kind: ExperimentWait, Requeue: d.obs.Poll, Marks: []Mark{
			markReconciling(ReasonWorkflowRunning, "Workflows running: %s", strings.Join(running, ", ")),
		}}
	}
	return &ExperimentAction{Kind: ExperimentWait, Requeue: d.obs.Poll, Marks: []Mark{
		markReconciling(ReasonWaitingForWorkflow, "waiting for Workflows %s to start", strings.Join(waiting, ", ")),
	}}
}

// complete ends the Experiment: Complete, and Ready.
func (d *stage) complete(format string, args ...any) *ExperimentAction {
	msg := fmt.Sprintf(format, args...)
	d.setPhase(scribev1.ExperimentComplete, "%s", msg)
	return &ExperimentAction{Kind: ExperimentWait, Marks: []Mark{
		markReady("%s", msg),
		unmark(scribev1.ReconcilingCondition),
		unmark(scribev1.StalledCondition),
	}}
}

// failed moves the Experiment to Failed with reason and message in Ready
// and Stalled, and comes back after requeue.
func (d *stage) failed(requeue time.Duration, reason, format string, args ...any) *ExperimentAction {
	msg := fmt.Sprintf(format, args...)
	d.setPhase(scribev1.ExperimentFailed, "%s", msg)
	return &ExperimentAction{Kind: ExperimentWait, Requeue: requeue, Marks: []Mark{
		markNotReady(reason, "%s", msg),
		markStalled(reason, "%s", msg),
	}}
}

// setPhase records a phase and, on a transition, its event.
func (d *stage) setPhase(phase scribev1.ExperimentPhase, format string, args ...any) {
	if d.st.Phase == phase {
		return
	}
	d.st.Phase = phase
	typ := corev1.EventTypeNormal
	if phase == scribev1.ExperimentFailed {
		typ = corev1.EventTypeWarning
	}
	d.events = append(d.events, Event{Type: typ, Reason: string(phase), Message: fmt.Sprintf(format, args...)})
}
