package controller

// Longer than 500 lines on purpose: the rollout's decision table, one row
// per transition.

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
)

func TestRolloutStrategiesGiveTheirTrafficSteps(t *testing.T) {
	hold := scribev1.PauseFor(time.Minute)
	for _, tc := range []struct {
		name    string
		rollout *scribev1.Rollout
		want    []string // traffic per step
		pause0  time.Duration
	}{
		{"no rollout switches at once", nil, []string{"v1=0%,v2=100%"}, 0},
		{"canary walks its steps", &scribev1.Rollout{Strategy: scribev1.StrategyCanary, Steps: []scribev1.RolloutStep{{Weight: 10, Pause: hold}, {Weight: 50}, {Weight: 100}}},
			[]string{"v1=90%,v2=10%", "v1=50%,v2=50%", "v1=0%,v2=100%"}, time.Minute},
		{"canary without steps switches at once", &scribev1.Rollout{Strategy: scribev1.StrategyCanary}, []string{"v1=0%,v2=100%"}, 0},
		{"blue-green runs the new version dark, then switches", &scribev1.Rollout{Strategy: scribev1.StrategyBlueGreen, Steps: []scribev1.RolloutStep{{Weight: 100, Pause: hold}}},
			[]string{"v1=100%,v2=0%", "v1=0%,v2=100%"}, time.Minute},
		{"rolling has no split", &scribev1.Rollout{Strategy: scribev1.StrategyRolling}, []string{"v2=100%"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &scribev1.Workload{Spec: scribev1.WorkloadSpec{Rollout: tc.rollout}, Status: scribev1.WorkloadStatus{StableVersion: "v1", CanaryVersion: "v2"}}
			var got []string
			for i := range steps(w) {
				got = append(got, fmtTraffic(stepTraffic(w, i)))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("steps = %v, want %v", got, tc.want)
			}
			if p, _ := pause(w, 0); p != tc.pause0 {
				t.Errorf("first pause = %s, want %s", p, tc.pause0)
			}
		})
	}
}

// The decision table's clock: every row decides at t0.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const poll = 5 * time.Second

// web is a Workload spec with versions and a canary of 10% (held a
// minute), 50% and 100%; the edits change it.
func web(versions string, edits ...func(*scribev1.WorkloadSpec)) *scribev1.WorkloadSpec {
	s := &scribev1.WorkloadSpec{
		Service: scribev1.ServiceSpec{Ports: []scribev1.ServicePort{{Name: "http", Port: 80}}},
		Rollout: &scribev1.Rollout{Strategy: scribev1.StrategyCanary, Steps: []scribev1.RolloutStep{
			{Weight: 10, Pause: scribev1.PauseFor(time.Minute)}, {Weight: 50}, {Weight: 100},
		}},
	}
	for _, v := range strings.Split(versions, ",") {
		s.Versions = append(s.Versions, scribev1.Version{Name: v, Image: "ghcr.io/example/web:" + v})
	}
	for _, e := range edits {
		e(s)
	}
	return s
}

// analysed adds a restarts check every 30 s that rolls back after threshold failed rounds.
func analysed(threshold int32) func(*scribev1.WorkloadSpec) {
	return func(s *scribev1.WorkloadSpec) {
		s.Rollout.Analysis = &scribev1.Analysis{Threshold: threshold, Checks: []scribev1.Check{{Name: "restarts", Type: scribev1.CheckRestarts, Max: "1"}}}
	}
}

func strategy(st scribev1.RolloutStrategy) func(*scribev1.WorkloadSpec) {
	return func(s *scribev1.WorkloadSpec) { s.Rollout.Strategy = st }
}

func byPullRequest(s *scribev1.WorkloadSpec) { s.Rollout.Promotion = scribev1.PromotionPullRequest }

func graceOf(d time.Duration) func(*scribev1.WorkloadSpec) {
	return func(s *scribev1.WorkloadSpec) {
		s.Decommission = &scribev1.Decommission{GracePeriod: &metav1.Duration{Duration: d}}
	}
}

// at is t0 moved by d, as a status time.
func at(d time.Duration) *metav1.Time {
	t := metav1.NewTime(t0.Add(d))
	return &t
}

// traffic parses "v1=90,v2=10".
func traffic(s string) []scribev1.VersionWeight {
	var out []scribev1.VersionWeight
	for _, p := range strings.Split(s, ",") {
		var w scribev1.VersionWeight
		name, weight, _ := strings.Cut(p, "=")
		w.Version = name
		_, _ = fmt.Sscan(weight, &w.Weight)
		out = append(out, w)
	}
	return out
}

// Statuses the rows start from.

// fresh is a Workload's status before its first decision.
func fresh() scribev1.WorkloadStatus {
	return scribev1.WorkloadStatus{Phase: scribev1.WorkloadPending, Step: -1}
}

// stableAt is v settled: all traffic, committed as c1 (digest d1).
func stableAt(v string, edits ...func(*scribev1.WorkloadStatus)) scribev1.WorkloadStatus {
	st := scribev1.WorkloadStatus{Phase: scribev1.WorkloadHealthy, StableVersion: v, Step: -1, Traffic: traffic(v + "=100")}
	st.Revision, st.Digest = "c1", "d1"
	for _, e := range edits {
		e(&st)
	}
	return st
}

// canaryAt is v2 rolling out over stable v1 at step with traffic tr,
// committed as c2 (digest d2).
func canaryAt(step int32, tr string, edits ...func(*scribev1.WorkloadStatus)) scribev1.WorkloadStatus {
	st := scribev1.WorkloadStatus{Phase: scribev1.WorkloadProgressing, StableVersion: "v1", CanaryVersion: "v2", Step: step, Traffic: traffic(tr)}
	st.Revision, st.Digest = "c2", "d2"
	for _, e := range edits {
		e(&st)
	}
	return st
}

// firstRollout is v1 rolling out with no stable version, committed as c1.
func firstRollout(edits ...func(*scribev1.WorkloadStatus)) scribev1.WorkloadStatus {
	st := scribev1.WorkloadStatus{Phase: scribev1.WorkloadProgressing, CanaryVersion: "v1", Step: 0, Traffic: traffic("v1=100")}
	st.Revision, st.Digest = "c1", "d1"
	for _, e := range edits {
		e(&st)
	}
	return st
}

// rolledBack is v2 abandoned for v1 at drain, committed as c3.
func rolledBack(drain time.Duration) scribev1.WorkloadStatus {
	return stableAt("v1", func(st *scribev1.WorkloadStatus) {
		st.Phase, st.RolledBackVersion, st.DrainStartedAt = scribev1.WorkloadRolledBack, "v2", at(drain)
		st.Message = "rollback of v2: step 1 of v2 failed"
		st.Revision, st.Digest = "c3", "d3"
	})
}

func uncommitted(st *scribev1.WorkloadStatus) { st.Revision = "" }
func healthySince(d time.Duration) func(*scribev1.WorkloadStatus) {
	return func(st *scribev1.WorkloadStatus) { st.StepHealthyAt = at(d) }
}
func analysedAt(d time.Duration, failedRounds int32) func(*scribev1.WorkloadStatus) {
	return func(st *scribev1.WorkloadStatus) { st.LastAnalysisAt, st.FailedChecks = at(d), failedRounds }
}
func proposedAs(n int) func(*scribev1.WorkloadStatus) {
	return func(st *scribev1.WorkloadStatus) {
		st.Revision = ""
		st.PullRequest = &scribev1.PullRequestStatus{Number: n, URL: fmt.Sprintf("https://forge/pr/%d", n), Head: "h1", State: "open"}
	}
}

// Observations.

var generatedAt = &scribev1.GeneratedResources{Path: "clusters/dev/team/workload/web"}

func rendered(digest string) *Rendered { return &Rendered{Digest: digest, Generated: generatedAt} }

var (
	healthy       = &Health{Applied: true, Verdict: health.Verdict{State: health.Healthy, Message: "all 2 healthy"}}
	notApplied    = &Health{Verdict: health.Verdict{State: health.Pending, Reason: "RevisionNotApplied", Message: "applying c2"}}
	applyFailed   = &Health{Verdict: health.Verdict{State: health.Failed, Reason: "ApplyFailed", Message: "Kustomization: invalid HTTPRoute"}}
	canaryPending = &Health{Applied: true, Verdict: health.Verdict{State: health.Pending, Message: "Deployment web-v2: 0 of 1 available"}}
	canaryFailed  = &Health{Applied: true, Verdict: health.Verdict{State: health.Failed, Message: "Deployment web-v2: ProgressDeadlineExceeded"}}
)

func checks(passed bool) *AnalysisRound {
	if passed {
		return &AnalysisRound{Results: []scribev1.CheckResult{{Name: "restarts", Passed: true, Message: "0 restarts"}}}
	}
	return &AnalysisRound{Results: []scribev1.CheckResult{{Name: "restarts", Message: "7 restarts"}}}
}

// inconclusiveRound is a round whose only check had no sample.
func inconclusiveRound() *AnalysisRound {
	return &AnalysisRound{Results: []scribev1.CheckResult{{Name: "errors", Inconclusive: true, Message: "query returned no sample"}}}
}

func inconclusiveLimit(n int32) func(*scribev1.WorkloadSpec) {
	return func(s *scribev1.WorkloadSpec) { s.Rollout.Analysis.InconclusiveLimit = n }
}

func inconclusiveFor(n int32) func(*scribev1.WorkloadStatus) {
	return func(st *scribev1.WorkloadStatus) { st.InconclusiveChecks = n }
}

// view shows the status fields a decision table speaks of; a row names
// only those it checks.
func view(st scribev1.WorkloadStatus) map[string]string {
	when := func(t *metav1.Time) string {
		if t == nil {
			return ""
		}
		switch d := t.Sub(t0); {
		case d > 0:
			return "t0+" + d.String()
		case d < 0:
			return "t0" + d.String()
		}
		return "t0"
	}
	pr := ""
	if st.PullRequest != nil {
		pr = fmt.Sprintf("#%d %s", st.PullRequest.Number, st.PullRequest.State)
	}
	var results []string
	for _, c := range st.Checks {
		results = append(results, fmt.Sprintf("%s=%v", c.Name, c.Passed))
	}
	gen := ""
	if st.GeneratedResources != nil {
		gen = st.GeneratedResources.Path
	}
	var history []string
	for _, h := range st.History {
		history = append(history, fmt.Sprintf("%s %s at step %d (%s, started %s) %s", h.Version, h.Outcome, h.Step+1, h.Revision, when(h.StartedAt), h.Message))
	}
	promoted, requests := "", ""
	if st.PromotedStep != nil {
		promoted = fmt.Sprint(*st.PromotedStep)
	}
	if r := st.Requests; r != nil {
		requests = fmt.Sprintf("promote=%s full=%s abort=%s retry=%s", r.Promote, r.PromoteFull, r.Abort, r.Retry)
	}
	return map[string]string{
		"history": strings.Join(history, " | "), "promotedStep": promoted, "requests": requests, "started": when(st.RolloutStartedAt),
		"phase": string(st.Phase), "stable": st.StableVersion, "canary": st.CanaryVersion, "rolledBack": st.RolledBackVersion,
		"step": fmt.Sprint(st.Step), "traffic": fmtTraffic(st.Traffic), "revision": st.Revision, "digest": st.Digest,
		"healthyAt": when(st.StepHealthyAt), "analysedAt": when(st.LastAnalysisAt), "failedRounds": fmt.Sprint(st.FailedChecks),
		"inconclusiveRounds": fmt.Sprint(st.InconclusiveChecks),
		"checks":             strings.Join(results, ","), "drainAt": when(st.DrainStartedAt), "message": st.Message, "evidence": st.Evidence,
		"pr": pr, "generated": gen,
	}
}

// short writes marks as Type=Status/Reason (or -Type for a removal).
// checkOutcome compares a decision's status view, condition marks and
// events with a table row's.
func checkOutcome(t *testing.T, v, fields map[string]string, marks []Mark, wantMarks []string, events []Event, wantEvents []string) {
	t.Helper()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v[k] != fields[k] {
			t.Errorf("status %s = %q, want %q", k, v[k], fields[k])
		}
	}
	if g, w := strings.Join(short(marks), " "), strings.Join(wantMarks, " "); g != w {
		t.Errorf("marks %q, want %q", g, w)
	}
	if g, w := strings.Join(eventList(events), " | "), strings.Join(wantEvents, " | "); g != w {
		t.Errorf("events %q, want %q", g, w)
	}
}

func short(ms []Mark) []string {
	var out []string
	for _, m := range ms {
		if m.Status == "" {
			out = append(out, "-"+m.Type)
			continue
		}
		out = append(out, fmt.Sprintf("%s=%s/%s", m.Type, m.Status, m.Reason))
	}
	return out
}

func eventList(es []Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.String())
	}
	return out
}

func TestDecideRolloutWalksTheDecisionTable(t *testing.T) {
	type fields = map[string]string
	for _, tc := range []struct {
		name   string
		spec   *scribev1.WorkloadSpec
		status scribev1.WorkloadStatus
		obs    RolloutObservations
		// noChecker leaves the reconciler without a Checker.
		noChecker bool
		// want
		kind    RolloutActionKind
		save    bool
		requeue time.Duration
		// closes: the commit closes the open pull request it supersedes.
		closes bool
		fields fields
		marks  []string
		events []string
	}{
		// 1. Intent: which version rolls out, before anything is rendered.
		{name: "first rollout: the newest version takes all traffic at step 0",
			spec: web("v1"), status: fresh(),
			kind: RolloutRender, fields: fields{"canary": "v1", "stable": "", "step": "0", "traffic": "v1=100%", "revision": ""}},
		{name: "first rollout already intended: rendered as it is",
			spec: web("v1"), status: firstRollout(),
			kind: RolloutRender, fields: fields{"canary": "v1", "step": "0", "traffic": "v1=100%", "revision": "c1"}},
		{name: "new version: its canary warms up at weight 0 before the first step (no request reaches pods not Ready yet)",
			spec: web("v1,v2"), status: stableAt("v1"),
			kind: RolloutRender, fields: fields{"stable": "v1", "canary": "v2", "step": "0", "traffic": "v1=100%,v2=0%", "revision": ""},
			events: []string{"RolloutStarted: rolling out v2: at weight 0 until available, then step 1 of 3, weight 10"}},
		{name: "new version after a rollback: the rolled-back version and the rollback message are cleared",
			spec: web("v1,v2,v3"), status: rolledBack(-time.Minute),
			kind: RolloutRender, fields: fields{"canary": "v3", "step": "0", "traffic": "v1=100%,v3=0%", "rolledBack": "", "message": "", "phase": "RolledBack"},
			events: []string{"RolloutStarted: rolling out v3: at weight 0 until available, then step 1 of 3, weight 10"}},
		{name: "blueGreen new version: it starts dark at weight 0",
			spec: web("v1,v2", strategy(scribev1.StrategyBlueGreen)), status: stableAt("v1"),
			kind: RolloutRender, fields: fields{"canary": "v2", "step": "0", "traffic": "v1=100%,v2=0%"},
			events: []string{"RolloutStarted: rolling out v2: step 1 of 2, weight 0"}},
		{name: "rolling new version: it takes all traffic at once",
			spec: web("v1,v2", strategy(scribev1.StrategyRolling)), status: stableAt("v1"),
			kind: RolloutRender, fields: fields{"canary": "v2", "step": "0", "traffic": "v2=100%"},
			events: []string{"RolloutStarted: rolling out v2: step 1 of 1, weight 100"}},
		{name: "newest is the stable version again (canary removed from spec): all traffic back to it",
			spec: web("v1"), status: canaryAt(1, "v1=50,v2=50"),
			kind: RolloutRender, fields: fields{"stable": "v1", "canary": "", "step": "-1", "traffic": "v1=100%", "revision": ""}},
		{name: "newest is the rolled-back version: not rolled out again, the message stays",
			spec: web("v1,v2"), status: rolledBack(-time.Minute),
			kind: RolloutRender, fields: fields{"canary": "", "traffic": "v1=100%", "revision": "c3", "message": "rollback of v2: step 1 of v2 failed"}},
		{name: "stable version removed from spec: the newest is rolled out as a first rollout",
			spec: web("v2"), status: stableAt("v1"),
			kind: RolloutRender, fields: fields{"stable": "", "canary": "v2", "step": "0", "traffic": "v2=100%", "revision": ""}},

		// 2. Commit: the intent's render reaches the repository before anything is read back.
		{name: "new render: the intent is saved, then committed",
			spec: web("v1,v2"), status: canaryAt(0, "v1=90,v2=10", uncommitted), obs: RolloutObservations{Rendered: rendered("d2"), Current: true},
			kind: RolloutCommit, save: true, fields: fields{"revision": "", "digest": "d2"}},
		{name: "an intent saved by an earlier reconcile, not committed: the status read is confirmed the latest first (a lagging cache shows it too after the commit)",
			spec: web("v1,v2"), status: canaryAt(0, "v1=90,v2=10", uncommitted), obs: RolloutObservations{Rendered: rendered("d2")},
			kind: RolloutConfirmIntent, save: false, fields: fields{"revision": "", "digest": "d2"}},
		{name: "first rollout from a status that never held an intent: committed without saving it first (a restart derives the same intent)",
			spec: web("v1"), status: fresh(), obs: RolloutObservations{Rendered: rendered("d1"), FirstIntent: true},
			kind: RolloutCommit, save: false, fields: fields{"canary": "v1", "traffic": "v1=100%", "revision": "", "digest": "d1"}},
		{name: "first rollout whose intent was stored before: saved again before its commit",
			spec: web("v1"), status: firstRollout(uncommitted), obs: RolloutObservations{Rendered: rendered("d9")},
			kind: RolloutCommit, save: true, fields: fields{"canary": "v1", "revision": "", "digest": "d9"}},
		{name: "spec changed at the same step: new content, its health, pause and analysis start again",
			spec: web("v1,v2"), status: canaryAt(0, "v1=90,v2=10", healthySince(-time.Minute), analysedAt(-10*time.Second, 1)),
			obs:  RolloutObservations{Rendered: rendered("d9")},
			kind: RolloutCommit, save: true, fields: fields{"revision": "", "digest": "d9", "healthyAt": "", "analysedAt": "", "step": "0", "failedRounds": "1"}},
		{name: "committed: the commit and what it holds are recorded, then read back",
			spec: web("v1,v2"), status: canaryAt(0, "v1=90,v2=10", uncommitted), obs: RolloutObservations{Rendered: rendered("d2"), Commit: "c2"},
			kind: RolloutReadBack, fields: fields{"revision": "c2", "generated": generatedAt.Path}},
		{name: "render already committed: read back without a commit",
			spec: web("v1,v2"), status: canaryAt(0, "v1=90,v2=10"), obs: RolloutObservations{Rendered: rendered("d2")},
			kind: RolloutReadBack, fields: fields{"revision": "c2"}},
		{name: "direct rollback in a Repository that takes pull requests: committed, then the open pull request it supersedes is closed",
			spec: web("v1,v2", byPullRequest), status: rolledBack(-time.Second), obs: RolloutObservations{Rendered: rendered("d4"), PullRequests: true, Current: true},
			kind: RolloutCommit, save: true, closes: true, fields: fields{"revision": "", "digest": "d4", "phase": "RolledBack"}},
		{name: "pullRequest rollback: proposed, nothing closed",
			spec: web("v1,v2", byPullRequest, func(s *scribev1.WorkloadSpec) { s.Rollout.Rollback = scribev1.RollbackPullRequest }), status: rolledBack(-time.Second),
			obs:  RolloutObservations{Rendered: rendered("d4"), PullRequests: true, Current: true},
			kind: RolloutPropose, save: true, fields: fields{"revision": "", "digest": "d4"}},
		{name: "pullRequest promotion: the intent is saved, then proposed",
			spec: web("v1,v2", byPullRequest), status: canaryAt(0, "v1=90,v2=10", uncommitted), obs: RolloutObservations{Rendered: rendered("d2"), PullRequests: true, Current: true},
			kind: RolloutPropose, save: true},
		{name: "pullRequest promotion on a Repository without pull requests: committed",
			spec: web("v1,v2", byPullRequest), status: canaryAt(0, "v1=90,v2=10", uncommitted), obs: RolloutObservations{Rendered: rendered("d2"), Current: true},
			kind: RolloutCommit, save: true},
		{name: "proposal already on the base branch: its tip is the commit, read back",
			spec: web("v1,v2", byPullRequest), status: canaryAt(0, "v1=90,v2=10", uncommitted),
			obs:  RolloutObservations{Rendered: rendered("d2"), PullRequests: true, Proposed: &Proposed{UpToDate: true, Base: "b7"}},
			kind: RolloutReadBack, fields: fields{"revision": "b7", "pr": "", "generated": generatedAt.Path}},
		{name: "pull request opened: recorded, then the forge is asked (the intent was saved before the proposal)",
			spec: web("v1,v2", byPullRequest), status: canaryAt(0, "v1=90,v2=10", uncommitted),
			obs:  RolloutObservations{Rendered: rendered("d2"), PullRequests: true, Proposed: &Proposed{PullRequest: scribev1.PullRequestStatus{Number: 7, URL: "https://forge/pr/7", Head: "h1", State: "open"}}},
			kind: RolloutReadPullRequest, fields: fields{"pr": "#7 open", "revision": ""},
			events: []string{"PullRequestOpened: proposed v1=90%,v2=10% in https://forge/pr/7"}},
		{name: "pull request recorded by an earlier reconcile: the intent is saved, then the forge is asked",
			spec: web("v1,v2", byPullRequest), status: canaryAt(0, "v1=90,v2=10", proposedAs(7)), obs: RolloutObservations{Rendered: rendered("d2"), PullRequests: true},
			kind: RolloutReadPullRequest, save: true, fields: fields{"pr": "#7 open"}},
		{name: "pull request awaiting its merge: wait, polling",
			spec: web("v1,v2", byPullRequest), status: canaryAt(0, "v1=90,v2=10", proposedAs(7)),
			obs:  RolloutObservations{Rendered: rendered("d2"), PullRequests: true, PullRequest: &PullRequestState{State: "open"}},
			kind: RolloutWait, requeue: poll, fields: fields{"pr": "#7 open", "revision": ""},
			marks: []string{"Reconciling=True/AwaitingMerge", "Ready=False/AwaitingMerge", "-Stalled"}},
		{name: "pull request closed without merging: stalled, the traffic stays, read again less often (it may be reopened)",
			spec: web("v1,v2", byPullRequest), status: canaryAt(0, "v1=90,v2=10", proposedAs(7)),
			obs:  RolloutObservations{Rendered: rendered("d2"), PullRequests: true, PullRequest: &PullRequestState{State: "closed"}},
			kind: RolloutWait, requeue: 30 * time.Second, fields: fields{"pr": "#7 closed", "revision": "", "traffic": "v1=90%,v2=10%"},
			marks: []string{"Ready=False/PullRequestClosed", "Stalled=True/PullRequestClosed"}},
		{name: "pull request merged: the merge is the commit, read back",
			spec: web("v1,v2", byPullRequest), status: canaryAt(0, "v1=90,v2=10", proposedAs(7)),
			obs:  RolloutObservations{Rendered: rendered("d2"), PullRequests: true, PullRequest: &PullRequestState{State: "closed", Merged: true, Revision: "m1", MergedBy: "forge"}},
			kind: RolloutReadBack, fields: fields{"pr": "#7 merged", "revision": "m1", "generated": generatedAt.Path},
			events: []string{"PullRequestMerged: pull request #7 merged as m1 (recognised by forge)"}},

		// 3. Read back: the commit failed, or is not healthy yet.
		{name: "not applied yet: wait, Progressing",
			spec: web("v1,v2"), status: canaryAt(0, "v1=90,v2=10"), obs: RolloutObservations{Rendered: rendered("d2"), Health: notApplied},
			kind: RolloutWait, requeue: poll, fields: fields{"phase": "Progressing", "step": "0"},
			marks: []string{"Reconciling=True/ApplyPending", "Ready=False/ApplyPending"}},
		{name: "rollback not applied yet: wait, the phase stays RolledBack",
			spec: web("v1,v2"), status: rolledBack(-time.Second), obs: RolloutObservations{Rendered: rendered("d3"), Health: notApplied},
			kind: RolloutWait, requeue: poll, fields: fields{"phase": "RolledBack"},
			marks: []string{"Reconciling=True/ApplyPending", "Ready=False/ApplyPending"}},
		{name: "applied but the canary is unhealthy: the analysis runs anyway",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10"), obs: RolloutObservations{Rendered: rendered("d2"), Health: canaryPending},
			kind: RolloutAnalyse},
		{name: "applied, canary unhealthy, checks pass: wait for its health",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10"), obs: RolloutObservations{Rendered: rendered("d2"), Health: canaryPending, Checks: checks(true)},
			kind: RolloutWait, requeue: poll, fields: fields{"analysedAt": "t0", "checks": "restarts=true", "failedRounds": "0", "healthyAt": ""},
			marks: []string{"Reconciling=True/ApplyPending", "Ready=False/ApplyPending"}},
		{name: "applied, canary unhealthy, analysis not due: wait for its health",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10", analysedAt(-10*time.Second, 1)), obs: RolloutObservations{Rendered: rendered("d2"), Health: canaryPending},
			kind: RolloutWait, requeue: poll, fields: fields{"analysedAt": "t0-10s", "failedRounds": "1"},
			marks: []string{"Reconciling=True/ApplyPending", "Ready=False/ApplyPending"}},
		{name: "applied, canary unhealthy, checks fail below the threshold: the next round after the interval",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10"), obs: RolloutObservations{Rendered: rendered("d2"), Health: canaryPending, Checks: checks(false)},
			kind: RolloutWait, requeue: 30 * time.Second, fields: fields{"failedRounds": "1", "analysedAt": "t0", "canary": "v2"},
			events: []string{"Warning CheckFailed: round 1 of 2 failed: restarts: 7 restarts"}},
		{name: "applied, canary unhealthy, checks fail at the threshold: roll back",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10", analysedAt(-time.Minute, 1)), obs: RolloutObservations{Rendered: rendered("d2"), Health: canaryPending, Checks: checks(false)},
			kind: RolloutRollBack, requeue: time.Millisecond,
			fields: fields{"phase": "RolledBack", "stable": "v1", "canary": "", "rolledBack": "v2", "step": "-1", "traffic": "v1=100%", "revision": "", "drainAt": "t0",
				"failedRounds": "0", "checks": "", "message": "rollback of v2: 2 failed analysis rounds of v2 at step 1: restarts: 7 restarts"},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{"Warning CheckFailed: round 2 of 2 failed: restarts: 7 restarts", "Warning RolledBack: rollback of v2: 2 failed analysis rounds of v2 at step 1: restarts: 7 restarts"}},
		{name: "canary failed: roll back",
			spec: web("v1,v2"), status: canaryAt(1, "v1=50,v2=50"), obs: RolloutObservations{Rendered: rendered("d2"), Health: canaryFailed},
			kind: RolloutRollBack, requeue: time.Millisecond,
			fields: fields{"phase": "RolledBack", "canary": "", "rolledBack": "v2", "traffic": "v1=100%", "revision": "",
				"message": "rollback of v2: step 2 of v2 failed: Deployment web-v2: ProgressDeadlineExceeded"},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{"Warning RolledBack: rollback of v2: step 2 of v2 failed: Deployment web-v2: ProgressDeadlineExceeded"}},
		{name: "apply failed without a stable version: Failed, read again",
			spec: web("v1"), status: firstRollout(), obs: RolloutObservations{Rendered: rendered("d1"), Health: applyFailed},
			kind: RolloutWait, requeue: poll, fields: fields{"phase": "Failed", "canary": "v1", "revision": "c1"},
			marks: []string{"Ready=False/ApplyFailed", "-Reconciling"}},
		{name: "apply failed with a stable version and nothing rolling out: Failed, read again",
			spec: web("v1"), status: stableAt("v1"), obs: RolloutObservations{Rendered: rendered("d1"), Health: applyFailed},
			kind: RolloutWait, requeue: poll, fields: fields{"phase": "Failed", "stable": "v1"},
			marks: []string{"Ready=False/ApplyFailed", "-Reconciling"}},

		// 4. Applied and healthy.
		{name: "healthy with nothing rolling out: Healthy and Ready",
			spec: web("v1"), status: stableAt("v1", func(st *scribev1.WorkloadStatus) { st.Phase = scribev1.WorkloadProgressing }), obs: RolloutObservations{Rendered: rendered("d1"), Health: healthy},
			kind: RolloutSettled, fields: fields{"phase": "Healthy"},
			marks: []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"}},
		{name: "rollback applied: Ready, the phase stays RolledBack, v2 decommissioned after the grace period",
			spec: web("v1,v2"), status: rolledBack(-time.Minute), obs: RolloutObservations{Rendered: rendered("d3"), Health: healthy},
			kind: RolloutDecommission, requeue: 9 * time.Minute, fields: fields{"phase": "RolledBack"},
			marks: []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"}},
		{name: "promotion applied, drained version inside its grace period: come back when it ends",
			spec: web("v1,v2", graceOf(2*time.Minute)), status: stableAt("v2", func(st *scribev1.WorkloadStatus) { st.DrainStartedAt = at(-30 * time.Second) }),
			obs:  RolloutObservations{Rendered: rendered("d1"), Health: healthy},
			kind: RolloutDecommission, requeue: 90 * time.Second, fields: fields{"phase": "Healthy"},
			marks: []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"}},
		{name: "grace period over: the drained version left the render, settled",
			spec: web("v1,v2", graceOf(2*time.Minute)), status: stableAt("v2", func(st *scribev1.WorkloadStatus) { st.DrainStartedAt = at(-3 * time.Minute) }),
			obs:  RolloutObservations{Rendered: rendered("d1"), Health: healthy},
			kind: RolloutSettled, fields: fields{"phase": "Healthy"},
			marks: []string{"Ready=True/Succeeded", "-Reconciling", "-Stalled"}},
		{name: "warm-up applied, the canary not available yet: wait (checks that need traffic would have none)",
			spec: web("v1,v2"), status: canaryAt(0, "v1=100,v2=0"), obs: RolloutObservations{Rendered: rendered("d2"), Health: canaryPending},
			kind: RolloutWait, requeue: poll, fields: fields{"traffic": "v1=100%,v2=0%", "healthyAt": ""},
			marks: []string{"Reconciling=True/ApplyPending", "Ready=False/ApplyPending"}},
		{name: "warm-up applied and the canary available: the first step's weight, without a pause or an analysis round",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=100,v2=0"), obs: RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutAdvance, requeue: time.Millisecond, fields: fields{"step": "0", "traffic": "v1=90%,v2=10%", "revision": "", "healthyAt": "", "analysedAt": ""},
			events: []string{"CanaryAvailable: v2 available at weight 0 (c2); step 1 of 3: v1=90%,v2=10%"}},
		{name: "a first step of weight 0 is not a warm-up: it holds and advances like any step",
			spec: web("v1,v2", func(s *scribev1.WorkloadSpec) { s.Rollout.Steps[0].Weight = 0 }), status: canaryAt(0, "v1=100,v2=0", healthySince(-2*time.Minute)), obs: RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutAdvance, requeue: time.Millisecond, fields: fields{"step": "1", "traffic": "v1=50%,v2=50%"},
			events: []string{"StepAdvanced: step 2 of 3: v1=50%,v2=50%"}},
		{name: "step applied and healthy: its pause starts",
			spec: web("v1,v2"), status: canaryAt(0, "v1=90,v2=10"), obs: RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutWait, requeue: 30 * time.Second, fields: fields{"healthyAt": "t0", "step": "0"},
			marks:  []string{"Reconciling=True/Progressing"},
			events: []string{"StepHealthy: v1=90%,v2=10% applied and healthy at c2"}},
		{name: "step healthy, analysis due: analyse",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10"), obs: RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutAnalyse, fields: fields{"healthyAt": "t0"},
			events: []string{"StepHealthy: v1=90%,v2=10% applied and healthy at c2"}},
		{name: "step healthy, no checker: the analysis is skipped",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10", healthySince(-2*time.Minute)), obs: RolloutObservations{Rendered: rendered("d2"), Health: healthy}, noChecker: true,
			kind: RolloutAdvance, requeue: time.Millisecond, fields: fields{"step": "1", "analysedAt": ""},
			events: []string{"StepAdvanced: step 2 of 3: v1=50%,v2=50%"}},
		{name: "step healthy, checks fail below the threshold: the next round after the interval",
			spec: web("v1,v2", analysed(3)), status: canaryAt(0, "v1=90,v2=10", healthySince(-2*time.Minute), analysedAt(-time.Minute, 1)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Checks: checks(false)},
			kind: RolloutWait, requeue: 30 * time.Second, fields: fields{"failedRounds": "2", "step": "0"},
			events: []string{"Warning CheckFailed: round 2 of 3 failed: restarts: 7 restarts"}},
		{name: "step healthy, checks fail at the threshold: roll back",
			spec: web("v1,v2", analysed(2)), status: canaryAt(2, "v1=0,v2=100", healthySince(-2*time.Minute), analysedAt(-time.Minute, 1)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Checks: checks(false)},
			kind: RolloutRollBack, requeue: time.Millisecond, fields: fields{"phase": "RolledBack", "canary": "", "rolledBack": "v2", "traffic": "v1=100%", "healthyAt": ""},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{"Warning CheckFailed: round 2 of 2 failed: restarts: 7 restarts", "Warning RolledBack: rollback of v2: 2 failed analysis rounds of v2 at step 3: restarts: 7 restarts"}},
		{name: "step healthy, a failed round whose template's failureLimit is 0: roll back at once, below the Workload's threshold",
			spec: web("v1,v2", analysed(3)), status: canaryAt(0, "v1=90,v2=10", healthySince(-2*time.Minute)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Checks: &AnalysisRound{Results: checks(false).Results, Threshold: 1}},
			kind: RolloutRollBack, requeue: time.Millisecond, fields: fields{"phase": "RolledBack", "rolledBack": "v2"},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{"Warning CheckFailed: round 1 of 1 failed: restarts: 7 restarts", "Warning RolledBack: rollback of v2: 1 failed analysis rounds of v2 at step 1: restarts: 7 restarts"}},
		{name: "step healthy, a round with no sample: inconclusive, the step holds without a failed round",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10", healthySince(-2*time.Minute), analysedAt(-time.Minute, 1)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Checks: inconclusiveRound()},
			kind: RolloutWait, requeue: 30 * time.Second, fields: fields{"failedRounds": "1", "inconclusiveRounds": "1", "step": "0", "analysedAt": "t0"},
			marks:  []string{"Reconciling=True/Progressing"},
			events: []string{"Warning CheckInconclusive: round inconclusive (1 of 10 in a row): errors: query returned no sample"}},
		{name: "step healthy, inconclusive rounds reach the limit: roll back",
			spec: web("v1,v2", analysed(2), inconclusiveLimit(3)), status: canaryAt(0, "v1=90,v2=10", healthySince(-2*time.Minute), analysedAt(-time.Minute, 0), inconclusiveFor(2)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Checks: inconclusiveRound()},
			kind: RolloutRollBack, requeue: time.Millisecond, fields: fields{"phase": "RolledBack", "canary": "", "rolledBack": "v2", "traffic": "v1=100%", "inconclusiveRounds": "0"},
			marks:  []string{"Ready=False/RolledBack"},
			events: []string{"Warning RolledBack: rollback of v2: 3 inconclusive analysis rounds in a row of v2 at step 1: errors: query returned no sample"}},
		{name: "step healthy, a passed round after inconclusive ones: the count starts again and the step goes on",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10", healthySince(-2*time.Minute), analysedAt(-time.Minute, 0), inconclusiveFor(4)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Checks: checks(true)},
			kind: RolloutAdvance, requeue: time.Millisecond, fields: fields{"step": "1", "inconclusiveRounds": "0"},
			events: []string{"StepAdvanced: step 2 of 3: v1=50%,v2=50%"}},
		{name: "pause over but the last round failed (below the threshold) and the next is not due: hold until it runs",
			spec: web("v1,v2", analysed(3)), status: canaryAt(0, "v1=90,v2=10", healthySince(-2*time.Minute), analysedAt(-10*time.Second, 1), func(st *scribev1.WorkloadStatus) {
				st.Checks = checks(false).Results
			}),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutWait, requeue: 20 * time.Second, fields: fields{"step": "0", "failedRounds": "1"},
			marks: []string{"Reconciling=True/Progressing"}},
		{name: "step healthy, checks pass, the pause is not over: hold, back at the next round",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10", healthySince(-20*time.Second), analysedAt(-time.Minute, 0)),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Checks: checks(true)},
			kind: RolloutWait, requeue: 30 * time.Second, fields: fields{"analysedAt": "t0", "checks": "restarts=true"},
			marks: []string{"Reconciling=True/Progressing"}},
		{name: "step healthy, the pause ends before the next round: back when it ends",
			spec: web("v1,v2"), status: canaryAt(0, "v1=90,v2=10", healthySince(-50*time.Second)), obs: RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutWait, requeue: 10 * time.Second,
			marks: []string{"Reconciling=True/Progressing"}},
		{name: "pause over: the next step, with the evidence of the one that held",
			spec: web("v1,v2", analysed(2)), status: canaryAt(0, "v1=90,v2=10", healthySince(-2*time.Minute), analysedAt(-time.Minute, 0), func(st *scribev1.WorkloadStatus) {
				st.Checks = checks(true).Results
			}),
			obs:  RolloutObservations{Rendered: rendered("d2"), Health: healthy, Checks: checks(true)},
			kind: RolloutAdvance, requeue: time.Millisecond,
			fields: fields{"step": "1", "traffic": "v1=50%,v2=50%", "revision": "", "healthyAt": "", "analysedAt": "", "checks": "",
				"evidence": "Step 1 (v1=90%,v2=10%) was applied at c2 and healthy from 2025-06-01T11:58:00Z to 2025-06-01T12:00:00Z.\n- check restarts passed: 0 restarts"},
			events: []string{"StepAdvanced: step 2 of 3: v1=50%,v2=50%"}},
		{name: "last step held: the canary is promoted, the old version drains",
			spec: web("v1,v2"), status: canaryAt(2, "v1=0,v2=100", healthySince(-time.Minute)), obs: RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutPromote, requeue: time.Millisecond,
			fields: fields{"phase": "Progressing", "stable": "v2", "canary": "", "step": "-1", "traffic": "v2=100%", "revision": "", "drainAt": "t0",
				"evidence": "Step 3 (v1=0%,v2=100%) was applied at c2 and healthy from 2025-06-01T11:59:00Z to 2025-06-01T12:00:00Z."},
			events: []string{"Promoted: v2 is stable"}},
		{name: "first rollout healthy after its pause: promoted (nothing to compare with)",
			spec: web("v1", analysed(2)), status: firstRollout(healthySince(-2 * time.Minute)), obs: RolloutObservations{Rendered: rendered("d1"), Health: healthy},
			kind: RolloutPromote, requeue: time.Millisecond, fields: fields{"stable": "v1", "canary": "", "traffic": "v1=100%", "analysedAt": ""},
			events: []string{"Promoted: v1 is stable"}},
		{name: "blueGreen dark step held: all traffic switches to the new version",
			spec: web("v1,v2", strategy(scribev1.StrategyBlueGreen)), status: canaryAt(0, "v1=100,v2=0", healthySince(-2*time.Minute)), obs: RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutAdvance, requeue: time.Millisecond, fields: fields{"step": "1", "traffic": "v1=0%,v2=100%"},
			events: []string{"StepAdvanced: step 2 of 2: v1=0%,v2=100%"}},
		{name: "blueGreen switch held: promoted",
			spec: web("v1,v2", strategy(scribev1.StrategyBlueGreen)), status: canaryAt(1, "v1=0,v2=100", healthySince(0)), obs: RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutPromote, requeue: time.Millisecond, fields: fields{"stable": "v2", "traffic": "v2=100%"},
			events: []string{"Promoted: v2 is stable"}},
		{name: "rolling replacement healthy: promoted",
			spec: web("v1,v2", strategy(scribev1.StrategyRolling)), status: canaryAt(0, "v2=100"), obs: RolloutObservations{Rendered: rendered("d2"), Health: healthy},
			kind: RolloutPromote, requeue: time.Millisecond, fields: fields{"stable": "v2", "canary": "", "traffic": "v2=100%"},
			events: []string{"StepHealthy: v2=100% applied and healthy at c2", "Promoted: v2 is stable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := tc.obs
			obs.Poll = poll
			obs.Analysis = !tc.noChecker
			before := tc.status.DeepCopy()
			got, act := DecideRollout(tc.spec, tc.status, obs, t0)
			if act.Kind != tc.kind || act.SaveIntent != tc.save || act.Requeue != tc.requeue {
				t.Errorf("action %s (save intent %v) requeue %s, want %s (save intent %v) requeue %s", act.Kind, act.SaveIntent, act.Requeue, tc.kind, tc.save, tc.requeue)
			}
			if act.CloseProposal != tc.closes {
				t.Errorf("closes the open pull request: %v, want %v", act.CloseProposal, tc.closes)
			}
			v := view(got)
			checkOutcome(t, v, tc.fields, act.Marks, tc.marks, act.Events, tc.events)
			if fmt.Sprint(view(tc.status)) != fmt.Sprint(view(*before)) {
				t.Errorf("the decision changed the status it was given")
			}
		})
	}
}

func TestDecideRolloutAsksForNothingItWasAlreadyShown(t *testing.T) {
	// A reconcile walks the decisions, carrying out each action once: the
	// next decision never asks for the same observation again.
	spec := web("v1,v2", analysed(2), byPullRequest)
	for _, tc := range []struct {
		name   string
		status scribev1.WorkloadStatus
		health *Health
		want   []RolloutActionKind
	}{
		{"a new version proposed, merged and not applied yet", stableAt("v1"), notApplied,
			[]RolloutActionKind{RolloutRender, RolloutPropose, RolloutReadPullRequest, RolloutReadBack, RolloutWait}},
		{"a healthy canary analysed and held", canaryAt(0, "v1=90,v2=10"), healthy,
			[]RolloutActionKind{RolloutRender, RolloutReadBack, RolloutAnalyse, RolloutWait}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := RolloutObservations{Poll: poll, Analysis: true, PullRequests: true}
			st := tc.status
			var got []RolloutActionKind
			for range maxDecisions {
				var act RolloutAction
				st, act = DecideRollout(spec, st, obs, t0)
				got = append(got, act.Kind)
				switch act.Kind {
				case RolloutRender:
					obs.Rendered = rendered("d2")
				case RolloutPropose:
					obs.Proposed = &Proposed{PullRequest: scribev1.PullRequestStatus{Number: 1, Head: "h1", State: "open"}}
				case RolloutReadPullRequest:
					obs.PullRequest = &PullRequestState{State: "closed", Merged: true, Revision: "m1"}
				case RolloutReadBack:
					obs.Health = tc.health
				case RolloutAnalyse:
					obs.Checks = checks(true)
				default:
					if fmt.Sprint(got) != fmt.Sprint(tc.want) {
						t.Fatalf("actions %v, want %v", got, tc.want)
					}
					return
				}
			}
			t.Fatalf("no final action after %d decisions: %v", maxDecisions, got)
		})
	}
}
