package controller

import (
	"testing"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func hook(name string, typ scribev1.WebhookType) func(*scribev1.WorkloadSpec) {
	return func(s *scribev1.WorkloadSpec) {
		s.Rollout.Webhooks = append(s.Rollout.Webhooks, scribev1.RolloutWebhook{Name: name, Type: typ, URL: "https://hooks.example.com/" + name})
	}
}

func hooksAnswer(typ scribev1.WebhookType, ok bool) *WebhookRound {
	msg := "503 Service Unavailable"
	if ok {
		msg = "answered 2xx"
	}
	return &WebhookRound{Type: typ, Results: []WebhookResult{{Name: "gate", OK: ok, Message: msg}}}
}

// The webhook gates as DecideRollout decides them: pre-rollout before the
// canary gets traffic, confirm-promotion before a step moves on, and the
// rollback webhook with the analysis rounds.
func TestDecideRolloutAsksTheWebhooksAtTheirGates(t *testing.T) {
	type fields = map[string]string
	walkDecisions(t, []decisionRow{
		{name: "the canary available at weight 0: the pre-rollout webhooks are asked before it gets traffic",
			spec: web("v1,v2", hook("gate", scribev1.WebhookPreRollout)), status: canaryAt(0, "v1=100,v2=0"),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutCallWebhooks, webhook: scribev1.WebhookPreRollout, fields: fields{"traffic": "v1=100%,v2=0%"}},
		{name: "pre-rollout answered 2xx: the first step sends the canary traffic",
			spec: web("v1,v2", hook("gate", scribev1.WebhookPreRollout)), status: canaryAt(0, "v1=100,v2=0"),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Webhooks: hooksAnswer(scribev1.WebhookPreRollout, true)},
			kind: RolloutAdvance, requeue: time.Millisecond, fields: fields{"traffic": "v1=90%,v2=10%"},
			events: []string{"CanaryAvailable: v2 available at weight 0 (c2); step 1 of 3: v1=90%,v2=10%"}},
		{name: "pre-rollout refused: a failed round at weight 0, asked again at the next interval",
			spec: web("v1,v2", hook("gate", scribev1.WebhookPreRollout)), status: canaryAt(0, "v1=100,v2=0"),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Webhooks: hooksAnswer(scribev1.WebhookPreRollout, false)},
			kind: RolloutWait, requeue: 30 * time.Second, fields: fields{"traffic": "v1=100%,v2=0%", "failedRounds": "1", "analysedAt": "t0"},
			marks:  []string{"Reconciling=True/Progressing"},
			events: []string{"Warning CheckFailed: pre-rollout webhooks, round 1 of 3 failed: gate: 503 Service Unavailable"}},
		{name: "pre-rollout refused again within the interval: not asked before the interval ends",
			spec: web("v1,v2", hook("gate", scribev1.WebhookPreRollout)), status: canaryAt(0, "v1=100,v2=0", analysedAt(-10*time.Second, 1)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutWait, requeue: 20 * time.Second},
		{name: "pre-rollout refused at the threshold: rolled back without ever being served",
			spec: web("v1,v2", hook("gate", scribev1.WebhookPreRollout)), status: canaryAt(0, "v1=100,v2=0", analysedAt(-time.Minute, 2)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Webhooks: hooksAnswer(scribev1.WebhookPreRollout, false)},
			kind: RolloutRollBack, requeue: time.Millisecond, fields: fields{"rolledBack": "v2", "traffic": "v1=100%"},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{"Warning RolledBack: rollback of v2: the pre-rollout webhooks refused v2 3 times: gate: 503 Service Unavailable"}},
		{name: "the pause held: the confirm-promotion webhooks are asked before the next step",
			spec: web("v1,v2", hook("gate", scribev1.WebhookConfirmPromotion)), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutCallWebhooks, webhook: scribev1.WebhookConfirmPromotion},
		{name: "confirm-promotion refused: the step holds and asks again",
			spec: web("v1,v2", hook("gate", scribev1.WebhookConfirmPromotion)), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Webhooks: hooksAnswer(scribev1.WebhookConfirmPromotion, false)},
			kind: RolloutWait, requeue: 30 * time.Second, fields: fields{"step": "0", "traffic": "v1=90%,v2=10%"},
			marks: []string{"Reconciling=True/AwaitingConfirmation"}},
		{name: "confirm-promotion answered 2xx: the next step",
			spec: web("v1,v2", hook("gate", scribev1.WebhookConfirmPromotion)), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Webhooks: hooksAnswer(scribev1.WebhookConfirmPromotion, true)},
			kind: RolloutAdvance, requeue: time.Millisecond, fields: fields{"step": "1", "traffic": "v1=50%,v2=50%"},
			events: []string{"StepAdvanced: step 2 of 3: v1=50%,v2=50%"}},
		{name: "a first rollout has nothing to confirm: promoted without asking",
			spec: web("v1", hook("gate", scribev1.WebhookConfirmPromotion)), status: firstRollout(healthySince(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d1"), Health: healthy},
			kind: RolloutPromote, requeue: time.Millisecond, fields: fields{"stable": "v1"},
			events: []string{"Promoted: v1 is stable"}},
		{name: "a round is due: the rollback webhooks are asked with it (no analysis checks needed)",
			spec: web("v1,v2", hook("gate", scribev1.WebhookRollback)), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Second)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Analysis: true},
			kind: RolloutAnalyse},
		{name: "the rollback webhook answered 2xx: rolled back now",
			spec: web("v1,v2", hook("gate", scribev1.WebhookRollback)), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Second)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Analysis: true, Checks: &AnalysisRound{Rollback: hooksAnswer(scribev1.WebhookRollback, true)}},
			kind: RolloutRollBack, requeue: time.Millisecond, fields: fields{"rolledBack": "v2", "history": "v2 RolledBack at step 1 (c2, started ) the rollback webhook asked for it at step 1 of v2: gate: answered 2xx"},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{"Warning RolledBack: rollback of v2: the rollback webhook asked for it at step 1 of v2: gate: answered 2xx"}},
		{name: "the rollback webhook refused: the step goes on holding its pause",
			spec: web("v1,v2", hook("gate", scribev1.WebhookRollback)), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Second)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Analysis: true, Checks: &AnalysisRound{Rollback: hooksAnswer(scribev1.WebhookRollback, false)}},
			kind: RolloutWait, requeue: 30 * time.Second, fields: fields{"analysedAt": "t0", "rolledBack": ""},
			marks: []string{"Reconciling=True/Progressing"}},
	})
}
