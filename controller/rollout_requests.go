package controller

// Manual control of a rollout: the request annotations (promote, promote
// in full, abort, retry) a person writes on a Workload with `scribe
// promote|abort|retry`, decided as part of DecideRollout. Each request is
// carried out once, when its annotation's value changes (status.requests
// records the values handled), as Flux's reconcile.fluxcd.io/requestedAt
// is. A pure decision: the reconciler only reads the annotations.
//
// A person's pause wins over a promotion: while spec.paused holds
// (`scribe pause`), promote and promote-full are refused and not carried
// out on resume; an abort still rolls back. A pause step (pause: {} or a
// timed pause) is the plan's, not a person's: promote lifts it, and
// promote-full skips it with the remaining steps and analysis, as
// `kubectl argo rollouts promote --full` does.
//
// Who asked is the name the API server authenticated (the requester
// policy's scribe.dev/requested-by-verified) where the reconciler found
// that policy in force, and otherwise the client's scribe.dev/requested-by,
// shown as a claim.

import (
	"fmt"
	"strings"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// ManualRequests are the manual request annotations of a Workload.
type ManualRequests struct {
	Promote, PromoteFull, Abort, Retry string
	// By and Reason say who asked and why, as the client wrote them: By
	// is only a claim.
	By, Reason string
	// VerifiedBy is who the API server authenticated as the requests'
	// writer (scribe.dev/requested-by-verified), set only where the
	// requester policy was found in force for the Workload; empty
	// otherwise.
	VerifiedBy string
}

// RequestsOf reads the manual request annotations. verified says the
// requester policy is in force for the Workload, so its
// scribe.dev/requested-by-verified names who wrote them.
func RequestsOf(annotations map[string]string, verified bool) ManualRequests {
	m := ManualRequests{
		Promote:     annotations[scribev1.PromoteAnnotation],
		PromoteFull: annotations[scribev1.PromoteFullAnnotation],
		Abort:       annotations[scribev1.AbortAnnotation],
		Retry:       annotations[scribev1.RetryAnnotation],
		By:          annotations[scribev1.RequestedByAnnotation],
		Reason:      annotations[scribev1.RequestReasonAnnotation],
	}
	if verified {
		m.VerifiedBy = annotations[scribev1.RequestedByVerifiedAnnotation]
	}
	return m
}

// PendingIn says a request is set that h (status.requests) does not
// record as handled: one the next decision carries out.
func (m ManualRequests) PendingIn(h *scribev1.HandledRequests) bool {
	if h == nil {
		h = &scribev1.HandledRequests{}
	}
	return (m.Promote != "" && m.Promote != h.Promote) || (m.PromoteFull != "" && m.PromoteFull != h.PromoteFull) ||
		(m.Abort != "" && m.Abort != h.Abort) || (m.Retry != "" && m.Retry != h.Retry)
}

// maxRequestText bounds who and why as they enter status, events and
// commit messages.
const maxRequestText = 256

// requester says who asked and why, for events, commit messages and
// history: the name the API server authenticated when the requester
// policy vouches for it, else the client's name marked as a claim.
func (m ManualRequests) requester() string {
	by := oneLine(m.VerifiedBy, maxRequestText)
	if by == "" {
		by = "an unnamed user"
		if claim := oneLine(m.By, maxRequestText); claim != "" {
			by = fmt.Sprintf("%q (claimed, unverified)", claim)
		}
	}
	if why := oneLine(m.Reason, maxRequestText); why != "" {
		return by + ": " + why
	}
	return by
}

// oneLine is s on one line, at most n bytes (cut at a rune boundary).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// pending says the request value was not handled yet, and records it as
// handled in the status field that field picks.
func (d *rollout) pending(value string, field func(*scribev1.HandledRequests) *string) bool {
	if value == "" {
		return false
	}
	h := d.w.Status.Requests
	if h == nil {
		h = &scribev1.HandledRequests{}
		d.w.Status.Requests = h
	}
	if p := field(h); *p != value {
		*p = value
		return true
	}
	return false
}

// inProgress says a canary is rolling out against a stable version.
func inProgress(st *scribev1.WorkloadStatus) bool {
	return st.CanaryVersion != "" && st.StableVersion != ""
}

// retry handles a retry request, before the intent: a rolled-back
// version's rollout starts again from its first step.
func (d *rollout) retry() {
	st, req := &d.w.Status, d.obs.Requests
	if !d.pending(req.Retry, func(h *scribev1.HandledRequests) *string { return &h.Retry }) {
		return
	}
	if st.RolledBackVersion == "" {
		d.events = append(d.events, warningEvent("RetryIgnored", "retry requested by %s: no rolled-back rollout to retry", req.requester()))
		return
	}
	d.events = append(d.events, normalEvent("RetryRequested", "retrying the rollout of %s, requested by %s", st.RolledBackVersion, req.requester()))
	st.RolledBackVersion, st.Message = "", ""
	st.Phase = scribev1.WorkloadProgressing
}

// request handles the other requests, after the intent: an abort rolls
// back now, a full promotion promotes now (both end the decision), a
// promote lifts the current step's pause.
func (d *rollout) request() *RolloutAction {
	st, req := &d.w.Status, d.obs.Requests
	if d.pending(req.Abort, func(h *scribev1.HandledRequests) *string { return &h.Abort }) {
		if !inProgress(st) {
			d.events = append(d.events, warningEvent("AbortIgnored", "abort requested by %s: no rollout in progress", req.requester()))
		} else {
			d.events = append(d.events, warningEvent("Aborted", "rollout of %s aborted at step %d by %s", st.CanaryVersion, st.Step+1, req.requester()))
			return d.rollback(scribev1.OutcomeAborted, "aborted by "+req.requester())
		}
	}
	if d.pending(req.PromoteFull, func(h *scribev1.HandledRequests) *string { return &h.PromoteFull }) {
		switch {
		case !inProgress(st):
			d.events = append(d.events, warningEvent("PromoteIgnored", "full promotion requested by %s: no rollout in progress", req.requester()))
		case d.w.Spec.Paused:
			d.events = append(d.events, d.refusedWhilePaused("full promotion", req))
		default:
			how := fmt.Sprintf("Promoted in full at step %d of %d by %s, past the remaining steps, pauses and analysis.", st.Step+1, len(steps(d.w)), req.requester())
			return d.promote(how + "\n\n" + stepEvidence(d.w, d.now))
		}
	}
	if d.pending(req.Promote, func(h *scribev1.HandledRequests) *string { return &h.Promote }) {
		if !inProgress(st) {
			d.events = append(d.events, warningEvent("PromoteIgnored", "promotion requested by %s: no rollout in progress", req.requester()))
			return nil
		}
		if d.w.Spec.Paused {
			d.events = append(d.events, d.refusedWhilePaused("promotion", req))
			return nil
		}
		step := st.Step
		st.PromotedStep = &step
		d.events = append(d.events, normalEvent("PromoteRequested", "the pause of step %d of %s lifted by %s", step+1, st.CanaryVersion, req.requester()))
	}
	return nil
}

// refusedWhilePaused is the event of a promotion refused because a
// person paused the rollout (spec.paused): the pause wins, and the
// request is handled (not carried out when the rollout resumes), so a
// promotion asked for before the pause never lands after it unasked.
func (d *rollout) refusedWhilePaused(what string, req ManualRequests) Event {
	return warningEvent("PromoteIgnored", "%s requested by %s: the rollout of %s is paused (spec.paused); resume it, then ask again",
		what, req.requester(), d.w.Status.CanaryVersion)
}
