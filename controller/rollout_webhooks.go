package controller

// The webhook gates of a rollout, as DecideRollout decides them (the
// executor is webhooks.go): pre-rollout before the canary gets traffic,
// confirm-promotion before a step moves on; the rollback webhooks are
// asked with each analysis round (analyse). A pure decision.

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// threshold is spec.rollout.analysis.threshold, or 0 when unset.
func threshold(w *scribev1.Workload) int32 {
	if a := w.Spec.Rollout; a != nil && a.Analysis != nil {
		return a.Analysis.Threshold
	}
	return 0
}

// answered lists the webhooks of round that answered 2xx.
func answered(round *WebhookRound) []string {
	if round == nil {
		return nil
	}
	var out []string
	for _, r := range round.Results {
		if r.OK {
			out = append(out, r.Name+": "+r.Message)
		}
	}
	return out
}

// refused lists the webhooks of round that did not answer 2xx.
func refused(round *WebhookRound) []string {
	var out []string
	for _, r := range round.Results {
		if !r.OK {
			out = append(out, r.Name+": "+r.Message)
		}
	}
	return out
}

// asked is the answer of the webhooks of typ, or the action that asks
// them; nil, nil when w has none of typ.
func (d *rollout) asked(typ scribev1.WebhookType) (*WebhookRound, *RolloutAction) {
	if hooks, _ := webhooksOf(d.w, typ); len(hooks) == 0 {
		return nil, nil
	}
	if r := d.obs.Webhooks; r != nil && r.Type == typ {
		return r, nil
	}
	return nil, &RolloutAction{Kind: RolloutCallWebhooks, Webhook: typ}
}

// preRollout asks the pre-rollout webhooks once the canary is available
// at weight 0: a refusal counts as a failed analysis round, asked again at
// the next interval, and rolls back at the threshold.
func (d *rollout) preRollout() *RolloutAction {
	w, st := d.w, &d.w.Status
	interval := analysisInterval(w)
	if st.FailedChecks > 0 && st.LastAnalysisAt != nil {
		if wait := interval - d.now.Sub(st.LastAnalysisAt.Time); wait > 0 {
			return &RolloutAction{Kind: RolloutWait, Requeue: wait}
		}
	}
	round, ask := d.asked(scribev1.WebhookPreRollout)
	if round == nil {
		return ask
	}
	no := refused(round)
	if len(no) == 0 {
		return nil
	}
	at := metav1.NewTime(d.now)
	st.LastAnalysisAt = &at
	st.FailedChecks++
	limit := roundLimit(threshold(w), 3, 0)
	if st.FailedChecks >= limit {
		return d.rollback(scribev1.OutcomeRolledBack, fmt.Sprintf("the pre-rollout webhooks refused %s %d times: %s", st.CanaryVersion, st.FailedChecks, strings.Join(no, "; ")))
	}
	d.events = append(d.events, warningEvent("CheckFailed", "pre-rollout webhooks, round %d of %d failed: %s", st.FailedChecks, limit, strings.Join(no, "; ")))
	return &RolloutAction{Kind: RolloutWait, Requeue: interval, Marks: []Mark{
		markReconciling(ReasonProgressing, "%s waits at weight 0: the pre-rollout webhooks refused it: %s", st.CanaryVersion, strings.Join(no, "; ")),
	}}
}

// confirm asks the confirm-promotion webhooks before a step moves on:
// until all answer 2xx the step holds, and they are asked again at the
// next analysis interval.
func (d *rollout) confirm() *RolloutAction {
	w, st := d.w, &d.w.Status
	round, ask := d.asked(scribev1.WebhookConfirmPromotion)
	if round == nil {
		return ask
	}
	no := refused(round)
	if len(no) == 0 {
		return nil
	}
	return &RolloutAction{Kind: RolloutWait, Requeue: max(analysisInterval(w), time.Second), Marks: []Mark{
		markReconciling(ReasonAwaitingConfirmation, "step %d of %d of %s waits for its confirm-promotion webhooks: %s", st.Step+1, len(steps(w)), st.CanaryVersion, strings.Join(no, "; ")),
	}}
}
