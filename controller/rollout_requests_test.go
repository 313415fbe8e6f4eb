package controller

import (
	"strings"
	"testing"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func indefinitePause(step int) func(*scribev1.WorkloadSpec) {
	return func(s *scribev1.WorkloadSpec) { s.Rollout.Steps[step].Pause = &scribev1.RolloutPause{} }
}

func paused(s *scribev1.WorkloadSpec) { s.Paused = true }

func handled(promote, full, abort, retry string) func(*scribev1.WorkloadStatus) {
	return func(st *scribev1.WorkloadStatus) {
		st.Requests = &scribev1.HandledRequests{Promote: promote, PromoteFull: full, Abort: abort, Retry: retry}
	}
}

func startedAt(d time.Duration) func(*scribev1.WorkloadStatus) {
	return func(st *scribev1.WorkloadStatus) { st.RolloutStartedAt = at(d) }
}

const alice = "alice@example.com"

// The manual requests (annotations written by scribe promote, abort and
// retry) and the gates (pause: {}, spec.paused) as DecideRollout decides
// them: each request is carried out once, and is recorded as handled
// whether or not there was anything to act on.
func TestDecideRolloutCarriesOutManualRequestsOnce(t *testing.T) {
	type fields = map[string]string
	walkDecisions(t, []decisionRow{
		{name: "a step with pause: {} is held until promoted, and says so once",
			spec: web("v1,v2", indefinitePause(1)), status: canaryAt(1, "v1=50,v2=50"),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutWait, fields: fields{"step": "1", "healthyAt": "t0"},
			marks: []string{"Reconciling=True/AwaitingPromotion"},
			events: []string{"StepHealthy: v1=50%,v2=50% applied and healthy at c2",
				"AwaitingPromotion: step 2 of 3 of v2 (v1=50%,v2=50%) is held until promoted"}},
		{name: "held until promoted: an hour later it is still held, without a new event",
			spec: web("v1,v2", indefinitePause(1)), status: canaryAt(1, "v1=50,v2=50", healthySince(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutWait, fields: fields{"step": "1"},
			marks: []string{"Reconciling=True/AwaitingPromotion"}},
		{name: "promote lifts the held step's pause: the next step is committed",
			spec: web("v1,v2", indefinitePause(1)), status: canaryAt(1, "v1=50,v2=50", healthySince(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Requests: ManualRequests{Promote: "r1", VerifiedBy: alice}},
			kind: RolloutAdvance, requeue: time.Millisecond,
			fields: fields{"step": "2", "traffic": "v1=0%,v2=100%", "requests": "promote=r1 full= abort= retry=", "promotedStep": "1"},
			events: []string{"PromoteRequested: the pause of step 2 of v2 lifted by alice@example.com", "StepAdvanced: step 3 of 3: v1=0%,v2=100%"}},
		{name: "promote before the step is healthy: the pause is lifted, the step still waits for health",
			spec: web("v1,v2", indefinitePause(1)), status: canaryAt(1, "v1=50,v2=50"),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: notApplied, Requests: ManualRequests{Promote: "r1"}},
			kind: RolloutWait, requeue: poll, fields: fields{"step": "1", "promotedStep": "1"},
			marks:  []string{"Reconciling=True/ApplyPending", "Ready=False/ApplyPending"},
			events: []string{"PromoteRequested: the pause of step 2 of v2 lifted by an unnamed user"}},
		{name: "a promote already handled is not carried out again",
			spec: web("v1,v2", indefinitePause(1)), status: canaryAt(1, "v1=50,v2=50", healthySince(-time.Hour), handled("r1", "", "", "")),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Requests: ManualRequests{Promote: "r1"}},
			kind: RolloutWait, fields: fields{"step": "1", "promotedStep": ""},
			marks: []string{"Reconciling=True/AwaitingPromotion"}},
		{name: "a timed pause is cut short by promote",
			spec: web("v1,v2"), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Second)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Requests: ManualRequests{Promote: "r2", VerifiedBy: alice}},
			kind: RolloutAdvance, requeue: time.Millisecond, fields: fields{"step": "1", "traffic": "v1=50%,v2=50%"},
			events: []string{"PromoteRequested: the pause of step 1 of v2 lifted by alice@example.com", "StepAdvanced: step 2 of 3: v1=50%,v2=50%"}},
		{name: "promote with no rollout in progress is recorded and ignored",
			spec: web("v1"), status: stableAt("v1"),
			obs:  RolloutObservations{Rendered: rendered("d1"), Health: healthy, Requests: ManualRequests{Promote: "r3"}},
			kind: RolloutSettled, fields: fields{"requests": "promote=r3 full= abort= retry=", "promotedStep": ""},
			marks:  []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"},
			events: []string{"Warning PromoteIgnored: promotion requested by an unnamed user: no rollout in progress"}},
		{name: "promote --full promotes now, past the remaining steps and the analysis; who is in the commit's evidence",
			spec: web("v1,v2", analysed(3)), status: canaryAt(0, "v1=90,v2=10", startedAt(-time.Hour)),
			obs:  RolloutObservations{Requests: ManualRequests{PromoteFull: "f1", VerifiedBy: alice, Reason: "hotfix"}},
			kind: RolloutPromote, requeue: time.Millisecond,
			fields: fields{"stable": "v2", "canary": "", "traffic": "v2=100%", "revision": "", "phase": "Progressing",
				"history":  "v2 Promoted at step 1 (c2, started t0-1h0m0s) ",
				"evidence": "Promoted in full at step 1 of 3 by alice@example.com: hotfix, past the remaining steps, pauses and analysis.\n\nStep 1 (v1=90%,v2=10%) was applied at c2."},
			events: []string{"Promoted: v2 is stable"}},
		{name: "abort rolls back now; who and why are in the message the commit carries, and in history",
			spec: web("v1,v2"), status: canaryAt(1, "v1=50,v2=50", startedAt(-time.Hour)),
			obs:  RolloutObservations{Requests: ManualRequests{Abort: "a1", VerifiedBy: alice, Reason: "latency\nregression"}},
			kind: RolloutRollBack, requeue: time.Millisecond,
			fields: fields{"phase": "RolledBack", "canary": "", "rolledBack": "v2", "traffic": "v1=100%", "revision": "",
				"message":  "rollback of v2: aborted by alice@example.com: latency regression",
				"history":  "v2 Aborted at step 2 (c2, started t0-1h0m0s) aborted by alice@example.com: latency regression",
				"requests": "promote= full= abort=a1 retry="},
			marks: []string{"Ready=False/RolledBack"},
			events: []string{"Warning Aborted: rollout of v2 aborted at step 2 by alice@example.com: latency regression",
				"Warning RolledBack: rollback of v2: aborted by alice@example.com: latency regression"}},
		{name: "abort with no rollout in progress is recorded and ignored",
			spec: web("v1"), status: stableAt("v1"),
			obs:  RolloutObservations{Rendered: rendered("d1"), Health: healthy, Requests: ManualRequests{Abort: "a2"}},
			kind: RolloutSettled, fields: fields{"requests": "promote= full= abort=a2 retry=", "history": ""},
			marks:  []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"},
			events: []string{"Warning AbortIgnored: abort requested by an unnamed user: no rollout in progress"}},
		{name: "retry starts the rolled-back version again from its warm-up",
			spec: web("v1,v2"), status: rolledBack(-time.Minute),
			obs:  RolloutObservations{Requests: ManualRequests{Retry: "t1", VerifiedBy: alice}},
			kind: RolloutRender, fields: fields{"phase": "Progressing", "canary": "v2", "rolledBack": "", "step": "0", "traffic": "v1=100%,v2=0%", "message": "", "started": "t0"},
			events: []string{"RetryRequested: retrying the rollout of v2, requested by alice@example.com",
				"RolloutStarted: rolling out v2: at weight 0 until available, then step 1 of 3, weight 10"}},
		{name: "retry with nothing rolled back is recorded and ignored",
			spec: web("v1"), status: stableAt("v1"),
			obs:  RolloutObservations{Rendered: rendered("d1"), Health: healthy, Requests: ManualRequests{Retry: "t2"}},
			kind: RolloutSettled, fields: fields{"requests": "promote= full= abort= retry=t2"},
			marks:  []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"},
			events: []string{"Warning RetryIgnored: retry requested by an unnamed user: no rolled-back rollout to retry"}},
		{name: "spec.paused holds a healthy step past its pause",
			spec: web("v1,v2", paused), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutWait, fields: fields{"step": "0"},
			marks: []string{"Reconciling=True/Paused"}},
		{name: "spec.paused holds the warm-up at weight 0",
			spec: web("v1,v2", paused), status: canaryAt(0, "v1=100,v2=0"),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutWait, fields: fields{"traffic": "v1=100%,v2=0%"},
			marks: []string{"Reconciling=True/Paused"}},
		{name: "spec.paused does not stop the analysis: a failed round still rolls back",
			spec: web("v1,v2", paused, analysed(1)), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Analysis: true, Health: healthy, Checks: checks(false)},
			kind: RolloutRollBack, requeue: time.Millisecond, fields: fields{"rolledBack": "v2", "history": "v2 RolledBack at step 1 (c2, started ) 1 failed analysis rounds of v2 at step 1: restarts: 7 restarts"},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{"Warning CheckFailed: round 1 of 1 failed: restarts: 7 restarts", "Warning RolledBack: rollback of v2: 1 failed analysis rounds of v2 at step 1: restarts: 7 restarts"}},
		{name: "who asked, where the requester policy is not in force: the written name is a claim in the commit's message and in history",
			spec: web("v1,v2"), status: canaryAt(1, "v1=50,v2=50", startedAt(-time.Hour)),
			obs:  RolloutObservations{Requests: ManualRequests{Abort: "a3", By: "security-team", Reason: "ordered"}},
			kind: RolloutRollBack, requeue: time.Millisecond,
			fields: fields{"message": `rollback of v2: aborted by "security-team" (claimed, unverified): ordered`,
				"history": `v2 Aborted at step 2 (c2, started t0-1h0m0s) aborted by "security-team" (claimed, unverified): ordered`},
			marks: []string{"Ready=False/RolledBack"},
			events: []string{`Warning Aborted: rollout of v2 aborted at step 2 by "security-team" (claimed, unverified): ordered`,
				`Warning RolledBack: rollback of v2: aborted by "security-team" (claimed, unverified): ordered`}},
		{name: "who asked, where the requester policy is in force: the API server's name, not the one written",
			spec: web("v1,v2"), status: canaryAt(1, "v1=50,v2=50", startedAt(-time.Hour)),
			obs:  RolloutObservations{Requests: ManualRequests{Abort: "a4", By: "security-team", VerifiedBy: "mallory"}},
			kind: RolloutRollBack, requeue: time.Millisecond,
			fields: fields{"history": "v2 Aborted at step 2 (c2, started t0-1h0m0s) aborted by mallory"},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{"Warning Aborted: rollout of v2 aborted at step 2 by mallory", "Warning RolledBack: rollback of v2: aborted by mallory"}},
		{name: "a claimed name cannot break out of its quotes or its line",
			spec: web("v1,v2"), status: canaryAt(1, "v1=50,v2=50", startedAt(-time.Hour)),
			obs:  RolloutObservations{Requests: ManualRequests{Abort: "a5", By: "eve\"\nApproved-by: cto"}},
			kind: RolloutRollBack, requeue: time.Millisecond,
			fields: fields{"history": `v2 Aborted at step 2 (c2, started t0-1h0m0s) aborted by "eve\" Approved-by: cto" (claimed, unverified)`},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{`Warning Aborted: rollout of v2 aborted at step 2 by "eve\" Approved-by: cto" (claimed, unverified)`,
				`Warning RolledBack: rollback of v2: aborted by "eve\" Approved-by: cto" (claimed, unverified)`}},
		{name: "a person's pause wins over promote --full: refused, recorded as handled, the rollout stays paused",
			spec: web("v1,v2", paused), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Requests: ManualRequests{PromoteFull: "f2", VerifiedBy: alice}},
			kind: RolloutWait, fields: fields{"step": "0", "stable": "v1", "canary": "v2", "requests": "promote= full=f2 abort= retry="},
			marks:  []string{"Reconciling=True/Paused"},
			events: []string{"Warning PromoteIgnored: full promotion requested by alice@example.com: the rollout of v2 is paused (spec.paused); resume it, then ask again"}},
		{name: "a person's pause wins over promote: the step's pause is not lifted, now or on resume",
			spec: web("v1,v2", paused, indefinitePause(1)), status: canaryAt(1, "v1=50,v2=50", healthySince(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Requests: ManualRequests{Promote: "r4", VerifiedBy: alice}},
			kind: RolloutWait, fields: fields{"step": "1", "promotedStep": "", "requests": "promote=r4 full= abort= retry="},
			marks:  []string{"Reconciling=True/Paused"},
			events: []string{"Warning PromoteIgnored: promotion requested by alice@example.com: the rollout of v2 is paused (spec.paused); resume it, then ask again"}},
		{name: "resumed after a refused promote --full: the refused request is not carried out",
			spec: web("v1,v2", indefinitePause(1)), status: canaryAt(1, "v1=50,v2=50", healthySince(-time.Hour), handled("", "f2", "", "")),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Requests: ManualRequests{PromoteFull: "f2"}},
			kind: RolloutWait, fields: fields{"step": "1", "canary": "v2"},
			marks: []string{"Reconciling=True/AwaitingPromotion"}},
		{name: "a pause step does not hold promote --full: it and the remaining steps are skipped",
			spec: web("v1,v2", indefinitePause(0)), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Hour), startedAt(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Requests: ManualRequests{PromoteFull: "f3", VerifiedBy: alice}},
			kind: RolloutPromote, requeue: time.Millisecond, fields: fields{"stable": "v2", "canary": ""},
			events: []string{"Promoted: v2 is stable"}},
		{name: "spec.paused does not hold an abort: a person may always roll back",
			spec: web("v1,v2", paused), status: canaryAt(1, "v1=50,v2=50", startedAt(-time.Hour)),
			obs:  RolloutObservations{Requests: ManualRequests{Abort: "a6", VerifiedBy: alice}},
			kind: RolloutRollBack, requeue: time.Millisecond, fields: fields{"rolledBack": "v2", "traffic": "v1=100%"},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{"Warning Aborted: rollout of v2 aborted at step 2 by alice@example.com", "Warning RolledBack: rollback of v2: aborted by alice@example.com"}},
		{name: "a new version supersedes the one rolling out: history says so",
			spec: web("v1,v2,v3"), status: canaryAt(1, "v1=50,v2=50", startedAt(-time.Hour)),
			kind: RolloutRender, fields: fields{"canary": "v3", "started": "t0", "history": "v2 Superseded at step 2 (c2, started t0-1h0m0s) v3 started rolling out"},
			events: []string{"RolloutStarted: rolling out v3: at weight 0 until available, then step 1 of 3, weight 10"}},
		{name: "the last step held: the promotion is recorded in history",
			spec: web("v1,v2"), status: canaryAt(2, "v1=0,v2=100", healthySince(-time.Minute), startedAt(-time.Hour)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutPromote, requeue: time.Millisecond, fields: fields{"stable": "v2", "history": "v2 Promoted at step 3 (c2, started t0-1h0m0s) "},
			events: []string{"Promoted: v2 is stable"}},
	})
}

// decisionRow is a row of a DecideRollout table: what it starts from and
// observed, and the action, requeue, status fields, marks and events it
// must decide.
type decisionRow struct {
	name    string
	spec    *scribev1.WorkloadSpec
	status  scribev1.WorkloadStatus
	obs     RolloutObservations
	kind    RolloutActionKind
	webhook scribev1.WebhookType
	requeue time.Duration
	fields  map[string]string
	marks   []string
	events  []string
}

// walkDecisions decides every row at t0 and checks its outcome.
func walkDecisions(t *testing.T, rows []decisionRow) {
	t.Helper()
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			if tc.obs.Poll == 0 {
				tc.obs.Poll = poll
			}
			st, act := DecideRollout(tc.spec, tc.status, tc.obs, t0)
			if act.Kind != tc.kind || act.Webhook != tc.webhook {
				t.Fatalf("action %s %s, want %s %s (marks %v, events %v)", act.Kind, act.Webhook, tc.kind, tc.webhook, short(act.Marks), eventList(act.Events))
			}
			if act.Requeue != tc.requeue {
				t.Errorf("requeue %s, want %s", act.Requeue, tc.requeue)
			}
			checkOutcome(t, view(st), tc.fields, act.Marks, tc.marks, act.Events, tc.events)
		})
	}
}

// The history keeps the last ten rollouts, newest first.
func TestRolloutHistoryKeepsTheLastTen(t *testing.T) {
	st := canaryAt(1, "v1=50,v2=50")
	for i := range 12 {
		st.History = append(st.History, scribev1.RolloutRecord{Version: "old", Outcome: scribev1.OutcomePromoted, Step: int32(i)})
	}
	got, _ := DecideRollout(web("v1,v2"), st, RolloutObservations{Poll: poll, Requests: ManualRequests{Abort: "a"}}, t0)
	if len(got.History) != maxHistory || got.History[0].Outcome != scribev1.OutcomeAborted || got.History[1].Step != 0 {
		t.Fatalf("history: %d entries, first %+v", len(got.History), got.History[0])
	}
}

// RequestsOf takes the verified name only when the reconciler found the
// requester policy in force; PendingIn says a request awaits handling,
// which is when the reconciler asks.
func TestRequestsOfTrustsTheVerifiedNameOnlyWhenThePolicyIsInForce(t *testing.T) {
	ann := map[string]string{scribev1.AbortAnnotation: "a1", scribev1.RequestedByAnnotation: "alice",
		scribev1.RequestedByVerifiedAnnotation: "mallory"}
	if m := RequestsOf(ann, false); m.VerifiedBy != "" || m.requester() != `"alice" (claimed, unverified)` {
		t.Errorf("without the policy: verified %q, requester %s", m.VerifiedBy, m.requester())
	}
	if m := RequestsOf(ann, true); m.requester() != "mallory" {
		t.Errorf("with the policy: requester %s", m.requester())
	}
	for _, tc := range []struct {
		name    string
		handled *scribev1.HandledRequests
		want    bool
	}{
		{"nothing handled yet", nil, true},
		{"the abort handled", &scribev1.HandledRequests{Abort: "a1"}, false},
		{"an earlier abort handled", &scribev1.HandledRequests{Abort: "a0"}, true},
	} {
		if got := RequestsOf(ann, false).PendingIn(tc.handled); got != tc.want {
			t.Errorf("%s: pending %v, want %v", tc.name, got, tc.want)
		}
	}
	if (ManualRequests{By: "alice"}).PendingIn(nil) {
		t.Error("a name without a request is pending")
	}
}

// TestHeldRolloutsNameTheCommandThatMovesThem: the message of a rollout
// held by spec.paused, or by a step's pause: {}, gives the command that
// moves it with the Workload's own name and namespace.
func TestHeldRolloutsNameTheCommandThatMovesThem(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *scribev1.WorkloadSpec
		want string
	}{
		{"spec.paused", web("v1,v2", paused), "scribe resume workload web -n shop"},
		{"a step's pause: {}", web("v1,v2", indefinitePause(1)), "scribe promote workload web -n shop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step := int32(0)
			if !tc.spec.Paused {
				step = 1
			}
			traffic := map[int32]string{0: "v1=90,v2=10", 1: "v1=50,v2=50"}[step]
			_, act := DecideRollout(tc.spec, canaryAt(step, traffic, healthySince(-time.Hour)),
				RolloutObservations{Name: "web", Namespace: "shop", Poll: poll, Rendered: rendered("d2"), Health: healthy}, t0)
			for _, m := range act.Marks {
				if strings.Contains(m.Message, tc.want) {
					return
				}
			}
			t.Errorf("no condition says %q: %+v", tc.want, act.Marks)
		})
	}
}
