package controller

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
)

// ExperimentActionKind is what the reconciler does after a stage decision.
type ExperimentActionKind string

// The first kinds make the reconciler do one thing, record what it saw in
// the observations and ask again; ExperimentWait ends the reconcile.
const (
	// ExperimentRender resolves the Repository and renders; the digest,
	// generated resources and validation workflow go into
	// ExperimentObservations.Rendered and Workflow.
	ExperimentRender ExperimentActionKind = "Render"
	// ExperimentCommit publishes the render; the commit goes into
	// ExperimentObservations.Commit.
	ExperimentCommit ExperimentActionKind = "Commit"
	// ExperimentReadTargets reads the applier's verdict on status.revision
	// and every target's cluster and components into
	// ExperimentObservations.Targets.
	ExperimentReadTargets ExperimentActionKind = "ReadTargets"
	// ExperimentReadWorkflow reads the validation workflow into
	// ExperimentObservations.Run.
	ExperimentReadWorkflow ExperimentActionKind = "ReadWorkflow"
	// ExperimentWait: nothing to do until Requeue (0: the next watch event).
	ExperimentWait ExperimentActionKind = "Wait"
)

// ExperimentAction is what a stage decision asks of the reconciler.
type ExperimentAction struct {
	Kind ExperimentActionKind
	// SaveIntent asks for the status (whose revision is empty) to be saved
	// before publishing, so a controller restarted during the push
	// publishes the same bundle again and never makes a second commit.
	SaveIntent bool
	// Requeue is when to come back (ExperimentWait).
	Requeue time.Duration
	// Marks are the condition changes to make, in order.
	Marks []Mark
	// Events are the phase transitions to record, in order: each event's
	// reason is the phase entered.
	Events []Event
}

// ExperimentObservations is what the reconciler knows when it asks for a
// decision: its settings and the object's, then what each action it
// carried out in this reconcile showed. A nil (or empty) observation was
// not made yet.
type ExperimentObservations struct {
	// Poll is how often read-back objects are re-read while waiting.
	Poll time.Duration
	// NewGeneration says the spec changed since the last reconcile: a
	// finished Experiment renders again.
	NewGeneration bool
	// CompleteRequested says CompleteAnnotation is set.
	CompleteRequested bool

	// Rendered is the render (ExperimentRender).
	Rendered *Rendered
	// Workflow is the rendered validation workflow, nil when the render
	// has none (ExperimentRender).
	Workflow *scribev1.ObjectIdentity
	// Commit carries the render (ExperimentCommit).
	Commit string
	// Targets is the read-back of the commit and the targets
	// (ExperimentReadTargets).
	Targets *TargetsReadBack
	// Run is the read-back of the validation workflow (ExperimentReadWorkflow).
	Run *WorkflowRun
}

// TargetsReadBack is the applier's verdict on the commit and each
// target's state.
type TargetsReadBack struct {
	Applier health.Verdict
	// Targets as read back, in spec order; a target is Ready when its
	// cluster, its components and the targets it depends on are.
	Targets []scribev1.TargetStatus
}

// WorkflowRun is the validation workflow as read back.
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

// DecideExperiment walks an Experiment's stages, Pending → Provisioning →
// Ready → Running → Complete | Failed: from the spec and status and what
// the reconciler observed at now, the status to record and the one action
// to carry out. It reads top to bottom:
//
//  1. A new Experiment is Pending; one finished at this generation stays.
//  2. Commit: a new render is committed, with its intent saved first; a
//     commit starts Provisioning over.
//  3. Provisioning: the commit applied and every target ready → Ready.
//     A failed apply or target is Failed, and read again (the applier and
//     Cluster API retry).
//  4. Ready, Running: the workflow runs → Complete, or Failed for good
//     when it fails or times out.
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

// finished reports a terminal phase: Complete, or Failed because the
// workflow failed or timed out. Failures of the applier or of a cluster are
// not terminal: they are re-read, as Flux and Cluster API retry.
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

// commit asks for the render, and for its commit when it is new: the
// digest is saved with an empty revision before the push and the commit
// recorded after, so a controller restarted in between publishes the same
// bundle again (a no-op in Git) and never makes a second commit for it.
func (d *stage) commit() *ExperimentAction {
	st, obs := d.st, d.obs
	if obs.Rendered == nil {
		return &ExperimentAction{Kind: ExperimentRender}
	}
	if st.Revision != "" && st.Digest == obs.Rendered.Digest {
		return nil
	}
	if obs.Commit == "" {
		st.Revision, st.Digest = "", obs.Rendered.Digest
		return &ExperimentAction{Kind: ExperimentCommit, SaveIntent: true}
	}
	st.Revision, st.Digest = obs.Commit, obs.Rendered.Digest
	st.GeneratedResources = obs.Rendered.Generated.DeepCopy()
	st.Workflow = nil
	d.marks = append(d.marks, unmark(scribev1.StalledCondition)) // a new render starts over
	d.setPhase(scribev1.ExperimentProvisioning, "published %s; waiting for the applier and the target clusters", shortRev(st.Revision))
	return nil
}

// provision waits for the applier to apply the commit and for every target
// to be ready, in depends order; then the Experiment is Ready.
func (d *stage) provision() *ExperimentAction {
	st, rb := d.st, d.obs.Targets
	if rb == nil {
		return &ExperimentAction{Kind: ExperimentReadTargets}
	}
	st.Targets = rb.Targets
	if rb.Applier.State == health.Failed {
		return d.failed(d.obs.Poll, ReasonApplyFailed, "%s failed to apply: %s", shortRev(st.Revision), rb.Applier.Message)
	}
	var waiting []string
	for _, ts := range rb.Targets {
		switch ts.Phase {
		case scribev1.ExperimentFailed:
			reason := ReasonClusterFailed
			if ts.ClusterReady {
				reason = ReasonComponentFailed
			}
			return d.failed(d.obs.Poll, reason, "target %s: %s", ts.Name, ts.Message)
		case scribev1.ExperimentReady:
		default:
			waiting = append(waiting, ts.Name+": "+ts.Message)
		}
	}
	if rb.Applier.State != health.Healthy {
		d.setPhase(scribev1.ExperimentProvisioning, "waiting for %s to be applied", shortRev(st.Revision))
		return &ExperimentAction{Kind: ExperimentWait, Requeue: d.obs.Poll, Marks: []Mark{
			markReconciling(ReasonApplyPending, "waiting for %s to be applied: %s", shortRev(st.Revision), rb.Applier.Message),
			markNotReady(ReasonApplyPending, "waiting for %s to be applied: %s", shortRev(st.Revision), rb.Applier.Message),
		}}
	}
	if len(waiting) > 0 {
		msg := fmt.Sprintf("%s applied; waiting for %d of %d targets: %s", shortRev(st.Revision), len(waiting), len(rb.Targets), strings.Join(waiting, "; "))
		d.setPhase(scribev1.ExperimentProvisioning, "%s", msg)
		return &ExperimentAction{Kind: ExperimentWait, Requeue: d.obs.Poll, Marks: []Mark{
			markReconciling(ReasonProvisioning, "%s", msg),
			markNotReady(ReasonProvisioning, "%s", msg),
		}}
	}
	msg := fmt.Sprintf("%s applied; all %d targets ready", shortRev(st.Revision), len(rb.Targets))
	d.setPhase(scribev1.ExperimentReady, "%s", msg)
	// The next pass, at once, looks at the workflow: each phase is recorded
	// on its own.
	return &ExperimentAction{Kind: ExperimentWait, Requeue: time.Millisecond, Marks: []Mark{
		markReady(ReasonSucceeded, "%s", msg),
		markReconciling(ReasonWaitingForWorkflow, "%s", msg),
	}}
}

// run follows the validation workflow once every target is Ready.
func (d *stage) run() *ExperimentAction {
	st, wf, id := d.st, d.spec.Workflow, d.obs.Workflow
	if wf == nil || id == nil {
		// Without a workflow the experiment is the environment itself: it is
		// complete once every target is ready.
		d.setPhase(scribev1.ExperimentComplete, "no workflow to run; every target is ready")
		return &ExperimentAction{Kind: ExperimentWait, Marks: []Mark{
			markReady(ReasonSucceeded, "%s applied; every target ready; no workflow to run", shortRev(st.Revision)),
			unmark(scribev1.ReconcilingCondition),
			unmark(scribev1.StalledCondition),
		}}
	}
	manual := wf.Completion != nil && wf.Completion.Mode == scribev1.CompletionManual
	if st.Workflow == nil || st.Workflow.Kind != id.Kind || st.Workflow.Name != id.Name {
		st.Workflow = &scribev1.WorkflowStatus{Kind: id.Kind, Name: id.Name}
	}
	run := d.obs.Run
	if run == nil {
		return &ExperimentAction{Kind: ExperimentReadWorkflow}
	}
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

// complete ends the Experiment: Complete, and Ready.
func (d *stage) complete(format string, args ...any) *ExperimentAction {
	msg := fmt.Sprintf(format, args...)
	d.setPhase(scribev1.ExperimentComplete, "%s", msg)
	return &ExperimentAction{Kind: ExperimentWait, Marks: []Mark{
		markReady(ReasonSucceeded, "%s", msg),
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
