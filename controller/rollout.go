package controller

// Longer than 500 lines on purpose: the rollout's state machine (intent,
// delivery, read-back, analysis, judgement) reads top to bottom as one
// decision; DecideRollout's table test follows the same order. The step
// arithmetic it uses is in rollout_steps.go.

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
)

// RolloutActionKind is what the reconciler does after a rollout decision.
type RolloutActionKind string

// The first kinds make the reconciler do one thing, record what it saw in
// the observations and ask again; the others end the reconcile: the
// reconciler sets the marks and comes back after Requeue (0: on the next
// watch event).
const (
	// RolloutRender renders the status's intent; its digest and generated
	// resources go into RolloutObservations.Rendered.
	RolloutRender RolloutActionKind = "Render"
	// RolloutConfirmIntent reads, past the cache, whether the status read
	// is the API server's latest (DeliveryConfirmIntent); the answer goes
	// into RolloutObservations.Current.
	RolloutConfirmIntent RolloutActionKind = "ConfirmIntent"
	// RolloutCommit publishes the intent to the branch; the commit goes
	// into RolloutObservations.Commit.
	RolloutCommit RolloutActionKind = "Commit"
	// RolloutPropose opens or updates the pull request of the intent; the
	// result goes into RolloutObservations.Proposed.
	RolloutPropose RolloutActionKind = "Propose"
	// RolloutReadPullRequest asks the forge about the recorded pull
	// request; the answer goes into RolloutObservations.PullRequest.
	RolloutReadPullRequest RolloutActionKind = "ReadPullRequest"
	// RolloutReadBack reads the applier's verdict on status.revision and
	// the Deployments' health into RolloutObservations.Health.
	RolloutReadBack RolloutActionKind = "ReadBack"
	// RolloutAnalyse runs the analysis checks against the canary; the
	// results go into RolloutObservations.Checks.
	RolloutAnalyse RolloutActionKind = "Analyse"
	// RolloutCallWebhooks asks the webhooks of RolloutAction.Webhook; the
	// answers go into RolloutObservations.Webhooks.
	RolloutCallWebhooks RolloutActionKind = "CallWebhooks"

	// RolloutWait: nothing to do until Requeue or a watch event.
	RolloutWait RolloutActionKind = "Wait"
	// RolloutRollBack: the status now sends all traffic back to the stable
	// version; the next reconcile commits it.
	RolloutRollBack RolloutActionKind = "RollBack"
	// RolloutPromote: the canary is the stable version; the next reconcile
	// commits it.
	RolloutPromote RolloutActionKind = "Promote"
	// RolloutAdvance: the status holds the next step; the next reconcile
	// commits it.
	RolloutAdvance RolloutActionKind = "Advance"
	// RolloutDecommission: every version but the stable one is drained;
	// Requeue is when the grace period ends and the render drops them.
	RolloutDecommission RolloutActionKind = "Decommission"
	// RolloutSettled: the intent is applied and healthy; nothing is due.
	RolloutSettled RolloutActionKind = "Settled"
)

// RolloutAction is what a rollout decision asks of the reconciler.
type RolloutAction struct {
	Kind RolloutActionKind
	// SaveIntent asks for the status (whose revision is empty) to be saved
	// before publishing, so a controller restarted during the push
	// publishes the same intent again (a no-op in Git) and never skips or
	// repeats a step.
	SaveIntent bool
	// Requeue is when to come back, for the kinds that end the reconcile.
	Requeue time.Duration
	// Marks are the condition changes to make, in order.
	Marks []Mark
	// Events are the events to record, in order.
	Events []Event
	// Why the canary was rolled back (RolloutRollBack).
	Why string
	// Webhook is the gate whose webhooks to ask (RolloutCallWebhooks).
	Webhook scribev1.WebhookType
	// CloseProposal (RolloutCommit) says the commit goes straight to the
	// branch a Repository that takes pull requests merges into (a direct
	// rollback): once it is committed, the Workload's open pull request is
	// closed, since merging it would bring back what the commit undid.
	CloseProposal bool
}

// RolloutObservations is what the reconciler knows when it asks for a
// decision: its settings, then what each action it carried out in this
// reconcile showed. A nil (or empty) observation was not made yet.
type RolloutObservations struct {
	// Name and Namespace are the Workload's, for the commands messages
	// suggest (scribe promote workload NAME -n NAMESPACE).
	Name, Namespace string
	// Poll is how often health is re-read while a step waits.
	Poll time.Duration
	// WatchedPoll, when set, replaces Poll while a commit waits to be
	// applied and healthy: the applier's objects and the Deployments are
	// watched, so their changes start a reconcile and the poll is only a
	// safety net. A burst of CRs waiting on an applier then costs the API
	// server a read per watch event, not one per CR every Poll.
	WatchedPoll time.Duration
	// Analysis says the reconciler can run analysis checks.
	Analysis bool
	// PullRequests says the Repository takes pull requests, so promotion
	// pullRequest applies.
	PullRequests bool
	// FirstIntent says the stored status has never recorded an intent (no
	// traffic, no stable version, no revision): a first rollout's intent
	// follows from the spec alone, and a reconcile that restarts from the
	// stored status commits the same render again (a no-op in Git), so a
	// direct commit of it does not save the intent first. That is one API
	// write fewer for every new CR, which is what a burst of new CRs costs.
	FirstIntent bool

	// Requests are the Workload's manual request annotations.
	Requests ManualRequests

	// Rendered is the render of the status's intent (RolloutRender).
	Rendered *Rendered
	// Current says the status read is the API server's latest
	// (RolloutConfirmIntent).
	Current bool
	// Commit carries the intent on the branch (RolloutCommit).
	Commit string
	// Proposed is the pull request just opened or updated (RolloutPropose).
	Proposed *Proposed
	// PullRequest is the forge's word on the recorded pull request
	// (RolloutReadPullRequest).
	PullRequest *PullRequestState
	// Health is the read-back of status.revision (RolloutReadBack).
	Health *Health
	// Checks are the results of the analysis round just run (RolloutAnalyse).
	Checks *AnalysisRound
	// Webhooks are the answers of a gate's webhooks (RolloutCallWebhooks).
	Webhooks *WebhookRound
}

// Rendered is what the render of an intent produced.
type Rendered struct {
	// Digest of the rendered bundle.
	Digest string
	// Generated is where the bundle goes and what it holds.
	Generated *scribev1.GeneratedResources
}

// Proposed is the outcome of proposing the intent.
type Proposed struct {
	// UpToDate says the base branch already carries the intent: no pull
	// request was opened, and Base is the commit at its tip.
	UpToDate bool
	Base     string
	// PullRequest is the pull request opened or updated otherwise.
	PullRequest scribev1.PullRequestStatus
}

// PullRequestState is what the forge and Git say about a pull request.
type PullRequestState struct {
	// State as the forge reports it: open or closed.
	State string
	// Merged says the change reached the base branch, at Revision.
	Merged   bool
	Revision string
	// MergedBy says how the merge was recognised (forge, ancestry, content).
	MergedBy string
}

// Health is the read-back of status.revision.
type Health struct {
	// Applied says the applier's own verdict on the revision was Healthy.
	Applied bool
	// Verdict is the applier's verdict, aggregated with the health of the
	// Deployments of every version with traffic once Applied.
	Verdict health.Verdict
}

// AnalysisRound is one run of the analysis checks.
type AnalysisRound struct {
	Results []scribev1.CheckResult
	// Threshold and InconclusiveLimit, when set, are stricter limits
	// than the Workload's, from its templates' failureLimit and
	// inconclusiveLimit.
	Threshold, InconclusiveLimit int32
	// Rollback are the rollback webhooks asked in the round.
	Rollback *WebhookRound
}

// DecideRollout is the rollout state machine: from the Workload's spec
// and status and what the reconciler observed at now, the status to
// record and the one action to carry out. It reads top to bottom:
//
//  1. Intent: which version rolls out and the traffic it should get (the
//     first rollout, a new version, back to the stable version).
//  2. Commit: the intent's render is committed (or proposed and merged)
//     before anything is read back; new content at the same step resets
//     the step's health and pause.
//  3. Read back the commit: failed, pending or healthy.
//  4. Healthy: analyse, hold for the step's pause, then advance or promote.
//
// Status is the source of truth: a step's intent is saved before its
// commit is pushed and the commit recorded after, so a reconcile started
// anywhere reaches the same step again and never skips or repeats one.
func DecideRollout(spec *scribev1.WorkloadSpec, status scribev1.WorkloadStatus, obs RolloutObservations, now time.Time) (scribev1.WorkloadStatus, RolloutAction) {
	d := &rollout{w: &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Name: obs.Name, Namespace: obs.Namespace}, Spec: *spec, Status: *status.DeepCopy()}, obs: obs, now: now}
	d.retry()
	d.intend()
	a := d.request()
	if a == nil {
		a = d.commit()
	}
	if a == nil {
		a = d.readBack()
	}
	if a == nil {
		a = d.judge()
	}
	a.Events = append(d.events, a.Events...)
	return d.w.Status, *a
}

// rollout is one decision in the making.
type rollout struct {
	w      *scribev1.Workload
	obs    RolloutObservations
	now    time.Time
	events []Event
}

// intend sets the intent: the version rolling out and its traffic.
func (d *rollout) intend() {
	w, st := d.w, &d.w.Status
	newest := w.Spec.Versions[len(w.Spec.Versions)-1].Name
	if st.StableVersion != "" && !hasVersion(w, st.StableVersion) {
		st.StableVersion = "" // the stable version was removed from spec
	}
	switch {
	case st.StableVersion == "":
		// First rollout: the newest version takes all traffic.
		if len(st.Traffic) != 1 || st.Traffic[0].Version != newest || st.CanaryVersion != newest {
			st.CanaryVersion, st.Step = newest, 0
			d.started()
			setTraffic(st, []scribev1.VersionWeight{{Version: newest, Weight: 100}})
		}
	case newest == st.StableVersion || newest == st.RolledBackVersion:
		// Nothing to roll out: the stable version takes all traffic.
		want := []scribev1.VersionWeight{{Version: st.StableVersion, Weight: 100}}
		if st.CanaryVersion != "" || !sameTraffic(st.Traffic, want) {
			if inProgress(st) {
				d.record(scribev1.OutcomeSuperseded, st.CanaryVersion+" is no longer the newest of spec.versions")
			}
			st.CanaryVersion, st.Step = "", -1
			setTraffic(st, want)
		}
	case st.CanaryVersion != newest:
		// A new version: its rollout starts at the first step, after a
		// canary's warm-up at weight 0.
		if inProgress(st) {
			d.record(scribev1.OutcomeSuperseded, newest+" started rolling out")
		}
		st.CanaryVersion, st.Step, st.RolledBackVersion = newest, 0, ""
		d.started()
		if warmsUp(w) {
			setTraffic(st, warmUpTraffic(w))
			d.events = append(d.events, normalEvent("RolloutStarted", "rolling out %s: at weight 0 until available, then step 1 of %d, weight %d", newest, len(steps(w)), steps(w)[0].Weight))
			return
		}
		setTraffic(st, stepTraffic(w, 0))
		d.events = append(d.events, normalEvent("RolloutStarted", "rolling out %s: step 1 of %d, weight %d", newest, len(steps(w)), steps(w)[0].Weight))
	}
}

// commit gets the intent into the repository: DecideDelivery asks for
// actions until status.revision names the commit that carries the render;
// what the rollout says about it is decided here.
func (d *rollout) commit() *RolloutAction {
	st, obs := &d.w.Status, d.obs
	step := DecideDelivery(&st.CommonStatus, obs.delivery(throughPullRequest(d.w)))
	if step.NewContent {
		// New content at the same step (the spec changed): its health and
		// pause start again.
		st.StepHealthyAt, st.LastAnalysisAt = nil, nil
	}
	if step.Opened {
		d.events = append(d.events, normalEvent("PullRequestOpened", "proposed %s in %s", fmtTraffic(st.Traffic), st.PullRequest.URL))
	}
	switch step.Kind {
	case DeliveryRender:
		return &RolloutAction{Kind: RolloutRender}
	case DeliveryConfirmIntent:
		return &RolloutAction{Kind: RolloutConfirmIntent}
	case DeliveryCommit:
		return &RolloutAction{Kind: RolloutCommit, SaveIntent: !obs.FirstIntent, CloseProposal: obs.PullRequests}
	case DeliveryPropose:
		return &RolloutAction{Kind: RolloutPropose, SaveIntent: step.SaveIntent}
	case DeliveryReadPullRequest:
		return &RolloutAction{Kind: RolloutReadPullRequest, SaveIntent: step.SaveIntent}
	case DeliveryClosed:
		// A closed pull request may be reopened: it is read again, less often.
		return &RolloutAction{Kind: RolloutWait, Requeue: closedPRPoll(obs.Poll), Marks: []Mark{
			markNotReady("PullRequestClosed", "pull request #%d was closed without merging: %s stays where it is", st.PullRequest.Number, fmtTraffic(st.Traffic)),
			markStalled("PullRequestClosed", "pull request #%d was closed without merging", st.PullRequest.Number),
		}}
	case DeliveryAwaitingMerge:
		return &RolloutAction{Kind: RolloutWait, Requeue: obs.Poll, Marks: []Mark{
			markReconciling("AwaitingMerge", "waiting for pull request #%d to be merged", st.PullRequest.Number),
			markNotReady("AwaitingMerge", "%s proposed in %s; waiting for the merge", fmtTraffic(st.Traffic), st.PullRequest.URL),
			unmark(scribev1.StalledCondition), // a reopened pull request
		}}
	}
	if step.Recorded == recordedMerged {
		d.events = append(d.events, normalEvent("PullRequestMerged", "pull request #%d merged as %s (recognised by %s)", st.PullRequest.Number, shortRev(st.Revision), obs.PullRequest.MergedBy))
	}
	return nil
}

// delivery is what the delivery actions showed; through says the intent
// goes through a pull request when the Repository takes them.
func (o *RolloutObservations) delivery(through bool) DeliveryObservations {
	return DeliveryObservations{PullRequests: through && o.PullRequests, Rendered: o.Rendered, Current: o.Current, Commit: o.Commit, Proposed: o.Proposed, PullRequest: o.PullRequest}
}

// appliedPoll is how often a commit that waits to be applied is read back.
func (o *RolloutObservations) appliedPoll() time.Duration {
	if o.WatchedPoll > 0 {
		return o.WatchedPoll
	}
	return o.Poll
}

// closedPRPoll is how often a pull request closed without merging is read
// again: ten polls, at most 30 s.
func closedPRPoll(poll time.Duration) time.Duration {
	if poll > 0 && 10*poll < 30*time.Second {
		return 10 * poll
	}
	return 30 * time.Second
}

// readBack asks for the commit's health, and decides on a commit that
// failed or is not healthy yet.
func (d *rollout) readBack() *RolloutAction {
	st, h := &d.w.Status, d.obs.Health
	if h == nil {
		return &RolloutAction{Kind: RolloutReadBack}
	}
	rolling := st.CanaryVersion != "" && st.StableVersion != ""
	if h.Applied && h.Verdict.State == health.Pending && rolling {
		// The applier applied the step but the new version is not healthy
		// (yet): the analysis runs anyway, so a version that never becomes
		// available fails its checks and is rolled back after threshold
		// rounds instead of holding the rollout forever.
		if a := d.analyse(); a != nil {
			return a
		}
	}
	switch h.Verdict.State {
	case health.Failed:
		if rolling {
			return d.rollback(scribev1.OutcomeRolledBack, fmt.Sprintf("step %d of %s failed: %s", st.Step+1, st.CanaryVersion, h.Verdict.Message))
		}
		st.Phase = scribev1.WorkloadFailed
		return &RolloutAction{Kind: RolloutWait, Requeue: d.obs.Poll, Marks: []Mark{
			markNotReady(ReasonApplyFailed, "%s", h.Verdict.Message),
			unmark(scribev1.ReconcilingCondition),
		}}
	case health.Pending:
		if st.Phase != scribev1.WorkloadRolledBack {
			st.Phase = scribev1.WorkloadProgressing
		}
		return &RolloutAction{Kind: RolloutWait, Requeue: d.obs.appliedPoll(), Marks: []Mark{
			markReconciling(ReasonApplyPending, "waiting for %s: %s", shortRev(st.Revision), h.Verdict.Message),
			markNotReady(ReasonApplyPending, "waiting for %s to be applied and healthy: %s", shortRev(st.Revision), h.Verdict.Message),
		}}
	}
	return nil
}

// judge decides on a commit read back applied and healthy; it always
// decides.
func (d *rollout) judge() *RolloutAction {
	w, st := d.w, &d.w.Status
	if st.CanaryVersion == "" {
		if st.Phase != scribev1.WorkloadRolledBack {
			st.Phase = scribev1.WorkloadHealthy
		}
		marks := []Mark{
			markReady("%s applied and healthy at %s", fmtTraffic(st.Traffic), shortRev(st.Revision)),
			unmark(scribev1.ReconcilingCondition),
			unmark(scribev1.StalledCondition),
		}
		if wait, pending := decommissionDue(w, d.now); pending {
			// Drained versions are still deployed: come back when they go.
			return &RolloutAction{Kind: RolloutDecommission, Requeue: wait, Marks: marks}
		}
		return &RolloutAction{Kind: RolloutSettled, Marks: marks}
	}
	if warming(w) {
		if w.Spec.Paused {
			return d.paused()
		}
		if a := d.preRollout(); a != nil {
			return a
		}
		// The canary is available at weight 0: the first step sends it traffic.
		rev := st.Revision
		setTraffic(st, stepTraffic(w, 0))
		return &RolloutAction{Kind: RolloutAdvance, Requeue: time.Millisecond, Events: []Event{
			normalEvent("CanaryAvailable", "%s available at weight 0 (%s); step 1 of %d: %s", st.CanaryVersion, shortRev(rev), len(steps(w)), fmtTraffic(st.Traffic)),
		}}
	}
	hold, indefinite := pause(w, st.Step)
	if st.StableVersion == "" {
		indefinite = false // a first rollout has nothing to be promoted over
	}
	if st.StepHealthyAt == nil {
		at := metav1.NewTime(d.now)
		st.StepHealthyAt = &at
		d.events = append(d.events, normalEvent("StepHealthy", "%s applied and healthy at %s", fmtTraffic(st.Traffic), shortRev(st.Revision)))
		if indefinite {
			d.events = append(d.events, normalEvent("AwaitingPromotion", "step %d of %d of %s (%s) is held until promoted", st.Step+1, len(steps(w)), st.CanaryVersion, fmtTraffic(st.Traffic)))
		}
	}
	if st.StableVersion != "" {
		if a := d.analyse(); a != nil {
			return a
		}
		if a := d.holdOnLastRound(); a != nil {
			return a
		}
		if w.Spec.Paused {
			return d.paused()
		}
	}
	if indefinite {
		return &RolloutAction{Kind: RolloutWait, Requeue: d.heldRequeue(), Marks: []Mark{
			markReconciling(ReasonAwaitingPromotion, "step %d of %d of %s healthy; held until promoted (scribe promote workload %s -n %s)", st.Step+1, len(steps(w)), st.CanaryVersion, w.Name, w.Namespace),
		}}
	}
	if wait := hold - d.now.Sub(st.StepHealthyAt.Time); wait > 0 {
		return &RolloutAction{Kind: RolloutWait, Requeue: minDuration(wait, analysisInterval(w)), Marks: []Mark{
			markReconciling(ReasonProgressing, "step %d of %s healthy; holding for %s", st.Step+1, st.CanaryVersion, wait.Round(time.Second)),
		}}
	}
	if st.StableVersion != "" {
		if a := d.confirm(); a != nil {
			return a
		}
	}
	evidence := stepEvidence(w, d.now)
	if st.StableVersion == "" || int(st.Step) >= len(steps(w))-1 {
		// The last step held: the new version is stable.
		return d.promote(evidence)
	}
	st.Step++
	setTraffic(st, stepTraffic(w, int(st.Step)))
	st.Evidence = evidence
	return &RolloutAction{Kind: RolloutAdvance, Requeue: time.Millisecond, Events: []Event{
		normalEvent("StepAdvanced", "step %d of %d: %s", st.Step+1, len(steps(w)), fmtTraffic(st.Traffic)),
	}}
}

// promote makes the canary the stable version; evidence goes into its
// commit and pull request.
func (d *rollout) promote(evidence string) *RolloutAction {
	st := &d.w.Status
	promoted := st.CanaryVersion
	d.record(scribev1.OutcomePromoted, "")
	drained := metav1.NewTime(d.now)
	st.StableVersion, st.CanaryVersion, st.Step = promoted, "", -1
	st.DrainStartedAt = &drained
	st.Phase = scribev1.WorkloadProgressing // Healthy once the promotion is applied
	setTraffic(st, []scribev1.VersionWeight{{Version: promoted, Weight: 100}})
	st.Evidence = evidence
	return &RolloutAction{Kind: RolloutPromote, Requeue: time.Millisecond, Events: []Event{normalEvent("Promoted", "%s is stable", promoted)}}
}

// paused holds the rollout where it is (spec.paused).
func (d *rollout) paused() *RolloutAction {
	st := &d.w.Status
	return &RolloutAction{Kind: RolloutWait, Requeue: d.heldRequeue(), Marks: []Mark{
		markReconciling(ReasonPaused, "rollout of %s paused at %s (spec.paused); scribe resume workload %s -n %s continues it", st.CanaryVersion, fmtTraffic(st.Traffic), d.w.Name, d.w.Namespace),
	}}
}

// heldRequeue is when to come back to a step held until a person acts
// (whose change starts a reconcile): at the next analysis round, if the
// Workload has analysis.
func (d *rollout) heldRequeue() time.Duration {
	if a := d.w.Spec.Rollout; a != nil && a.Analysis != nil && d.obs.Analysis {
		return analysisInterval(d.w)
	}
	return 0
}

// started records when the rollout of status.canaryVersion started.
func (d *rollout) started() {
	at := metav1.NewTime(d.now)
	d.w.Status.RolloutStartedAt = &at
	d.w.Status.PromotedStep = nil
}

// maxHistory is how many past rollouts status.history keeps.
const maxHistory = 10

// record adds the rollout of status.canaryVersion, ending with outcome,
// to status.history.
func (d *rollout) record(outcome scribev1.RolloutOutcome, message string) {
	st := &d.w.Status
	rec := scribev1.RolloutRecord{Version: st.CanaryVersion, Outcome: outcome, StartedAt: st.RolloutStartedAt,
		FinishedAt: metav1.NewTime(d.now), Step: st.Step, Revision: st.Revision, Message: oneLine(message, 1024)}
	if st.PullRequest != nil {
		rec.PullRequest = st.PullRequest.Number
	}
	st.History = append([]scribev1.RolloutRecord{rec}, st.History...)
	if len(st.History) > maxHistory {
		st.History = st.History[:maxHistory]
	}
	st.RolloutStartedAt, st.PromotedStep = nil, nil
}

// analyse decides on the analysis round when one is due: it asks for the
// checks to run, then counts a failed round and rolls back at the
// threshold. nil means the rollout goes on (no round due, or it passed).
func (d *rollout) analyse() *RolloutAction {
	w, st := d.w, &d.w.Status
	a := w.Spec.Rollout
	rollbackHooks, _ := webhooksOf(w, scribev1.WebhookRollback)
	if a == nil || ((a.Analysis == nil || (len(a.Analysis.Checks) == 0 && len(a.Analysis.Templates) == 0)) && len(rollbackHooks) == 0) || !d.obs.Analysis {
		return nil
	}
	interval := analysisInterval(w)
	if st.LastAnalysisAt != nil && d.now.Sub(st.LastAnalysisAt.Time) < interval {
		return nil
	}
	if d.obs.Checks == nil {
		return &RolloutAction{Kind: RolloutAnalyse}
	}
	at := metav1.NewTime(d.now)
	st.LastAnalysisAt = &at
	st.Checks = d.obs.Checks.Results
	if asked := answered(d.obs.Checks.Rollback); len(asked) > 0 {
		return d.rollback(scribev1.OutcomeRolledBack, fmt.Sprintf("the rollback webhook asked for it at step %d of %s: %s", st.Step+1, st.CanaryVersion, strings.Join(asked, "; ")))
	}
	failed, inconclusive := roundOutcome(st.Checks)
	if len(failed) == 0 && len(inconclusive) == 0 {
		st.InconclusiveChecks = 0
		return nil
	}
	if len(failed) == 0 {
		// No value to judge (a version with no sample yet): the step holds
		// without a failed round, up to the inconclusive limit.
		st.InconclusiveChecks++
		var spec int32
		if a.Analysis != nil {
			spec = a.Analysis.InconclusiveLimit
		}
		limit := roundLimit(spec, 10, d.obs.Checks.InconclusiveLimit)
		if st.InconclusiveChecks >= limit {
			return d.rollback(scribev1.OutcomeRolledBack, fmt.Sprintf("%d inconclusive analysis rounds in a row of %s at step %d: %s", st.InconclusiveChecks, st.CanaryVersion, st.Step+1, strings.Join(inconclusive, "; ")))
		}
		d.events = append(d.events, warningEvent("CheckInconclusive", "round inconclusive (%d of %d in a row): %s", st.InconclusiveChecks, limit, strings.Join(inconclusive, "; ")))
		return &RolloutAction{Kind: RolloutWait, Requeue: interval, Marks: []Mark{
			markReconciling(ReasonProgressing, "step %d of %s: analysis inconclusive: %s", st.Step+1, st.CanaryVersion, strings.Join(inconclusive, "; ")),
		}}
	}
	st.InconclusiveChecks = 0
	st.FailedChecks++
	threshold := roundLimit(threshold(w), 3, d.obs.Checks.Threshold)
	d.events = append(d.events, warningEvent("CheckFailed", "round %d of %d failed: %s", st.FailedChecks, threshold, strings.Join(failed, "; ")))
	if st.FailedChecks >= threshold {
		return d.rollback(scribev1.OutcomeRolledBack, fmt.Sprintf("%d failed analysis rounds of %s at step %d: %s", st.FailedChecks, st.CanaryVersion, st.Step+1, strings.Join(failed, "; ")))
	}
	return &RolloutAction{Kind: RolloutWait, Requeue: interval}
}

// roundLimit is a limit in analysis rounds: the Workload's (def when
// unset), or the round's own when stricter (a template's failureLimit or
// inconclusiveLimit).
func roundLimit(spec, def, round int32) int32 {
	limit := spec
	if limit <= 0 {
		limit = def
	}
	if round > 0 && round < limit {
		limit = round
	}
	return limit
}

// holdOnLastRound holds the step until the next analysis round when the
// last round did not pass (it failed below the threshold, or was
// inconclusive), so a reconcile between rounds never advances on it.
func (d *rollout) holdOnLastRound() *RolloutAction {
	st := &d.w.Status
	if st.LastAnalysisAt == nil {
		return nil
	}
	failed, inconclusive := roundOutcome(st.Checks)
	if len(failed) == 0 && len(inconclusive) == 0 {
		return nil
	}
	wait := analysisInterval(d.w) - d.now.Sub(st.LastAnalysisAt.Time)
	if wait <= 0 {
		wait = time.Millisecond
	}
	return &RolloutAction{Kind: RolloutWait, Requeue: wait, Marks: []Mark{
		markReconciling(ReasonProgressing, "step %d of %s: the last analysis round did not pass; the next runs in %s", st.Step+1, st.CanaryVersion, wait.Round(time.Second)),
	}}
}

// roundOutcome lists an analysis round's failed and inconclusive checks.
func roundOutcome(results []scribev1.CheckResult) (failed, inconclusive []string) {
	for _, c := range results {
		switch {
		case c.Inconclusive:
			inconclusive = append(inconclusive, c.Name+": "+c.Message)
		case !c.Passed:
			failed = append(failed, c.Name+": "+c.Message)
		}
	}
	return failed, inconclusive
}

// rollback sends all traffic back to the stable version, once.
func (d *rollout) rollback(outcome scribev1.RolloutOutcome, why string) *RolloutAction {
	st := &d.w.Status
	failed := st.CanaryVersion
	d.record(outcome, why)
	st.RolledBackVersion, st.CanaryVersion, st.Step = failed, "", -1
	drained := metav1.NewTime(d.now)
	st.DrainStartedAt = &drained
	st.Phase = scribev1.WorkloadRolledBack
	st.Message = "rollback of " + failed + ": " + why
	// The failed version keeps its Deployment (at weight 0) until it is
	// decommissioned, so the traffic names only the stable version.
	setTraffic(st, []scribev1.VersionWeight{{Version: st.StableVersion, Weight: 100}})
	return &RolloutAction{Kind: RolloutRollBack, Requeue: time.Millisecond, Why: why,
		Marks:  []Mark{markNotReady(ReasonRolledBack, "%s", st.Message)},
		Events: []Event{warningEvent("RolledBack", "%s", st.Message)},
	}
}

// setTraffic records a new intent: its commit is still to be made, and
// the step's health, analysis and proposal start again.
func setTraffic(st *scribev1.WorkloadStatus, tr []scribev1.VersionWeight) {
	st.Traffic = tr
	st.Revision = ""
	st.StepHealthyAt, st.LastAnalysisAt = nil, nil
	st.FailedChecks, st.InconclusiveChecks = 0, 0
	st.Checks = nil
	st.Evidence = ""
	st.PullRequest = nil
	if st.Phase != scribev1.WorkloadRolledBack || st.CanaryVersion != "" {
		st.Message = ""
	}
}

func promotesByPullRequest(w *scribev1.Workload) bool {
	return w.Spec.Rollout != nil && w.Spec.Rollout.Promotion == scribev1.PromotionPullRequest
}

// throughPullRequest says the intent in w's status reaches the repository
// through a pull request: a rollback's as spec.rollout.rollback says
// (direct by default), any other commit's as spec.rollout.promotion says.
func throughPullRequest(w *scribev1.Workload) bool {
	if rollingBack(w) {
		return w.Spec.Rollout != nil && w.Spec.Rollout.Rollback == scribev1.RollbackPullRequest
	}
	return promotesByPullRequest(w)
}

// rollingBack says w's intent is a rollback: the failed canary's traffic
// went back to the stable version.
func rollingBack(w *scribev1.Workload) bool {
	return w.Status.Phase == scribev1.WorkloadRolledBack && w.Status.CanaryVersion == ""
}

// needsPullRequests names the field of w's rollout that asks for pull
// requests (promotion first), or "".
func needsPullRequests(w *scribev1.Workload) string {
	switch r := w.Spec.Rollout; {
	case r == nil:
		return ""
	case r.Promotion == scribev1.PromotionPullRequest:
		return "spec.rollout.promotion"
	case r.Rollback == scribev1.RollbackPullRequest:
		return "spec.rollout.rollback"
	}
	return ""
}
