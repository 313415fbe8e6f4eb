package controller

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// TestDecideTriggeredRunRecordsTheTriggersRunsAndEmitsTheirOutcome: only
// the executions a TestTrigger started are recorded, the newest one, again
// when its status changes; each one's end is one Event, Normal when it
// passed, Warning when it failed or was aborted, oldest first, however
// many are read at once; a recorded run whose end can no longer be read
// is a Warning and recorded "unknown", never left running; nothing else
// is recorded or emitted, and reading the same again changes nothing.
func TestDecideTriggeredRunRecordsTheTriggersRunsAndEmitsTheirOutcome(t *testing.T) {
	scheduled := metav1.NewTime(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	finished := metav1.NewTime(time.Date(2026, 11, 28, 10, 2, 0, 0, time.UTC))
	exec := func(n int32, status, actor string) TestkubeExecution {
		x := TestkubeExecution{
			Workflow: "testkube/team-eval-evaluation", ID: "id", Name: fmt.Sprintf("team-eval-evaluation-%d", n), Number: n,
			Status: status, ActorType: actor, ActorName: "team-eval-evaluation", ScheduledAt: &scheduled,
		}
		if ended(status) {
			x.FinishedAt = &finished
		}
		return x
	}
	execs := func(xs ...TestkubeExecution) []TestkubeExecution { return xs }
	rec := func(n int32, status string) *scribev1.TriggeredRun {
		return &scribev1.TriggeredRun{Name: fmt.Sprintf("team-eval-evaluation-%d", n), Number: n, Status: status}
	}
	msg := func(n int32, status string) string {
		return fmt.Sprintf("run %d (team-eval-evaluation-%d) of TestWorkflow testkube/team-eval-evaluation, started by TestTrigger team-eval-evaluation: %s", n, n, status)
	}
	unobserved := func(n int32, last string, next int32) string {
		return fmt.Sprintf("run %d (team-eval-evaluation-%d) of TestWorkflow testkube/team-eval-evaluation, last read %s: run %d followed before its end was read, which is only in Testkube", n, n, last, next)
	}
	const tt = ActorTestTrigger
	for _, tc := range []struct {
		name     string
		recorded *scribev1.TriggeredRun
		read     []TestkubeExecution
		// want is the record's name and status ("" for none); wantEvents
		// the Events as a decision table writes them.
		wantName, wantStatus string
		wantEvents           []string
		// wantMessage is the new record's message (default: msg of the
		// newest triggered run read).
		wantMessage string
	}{
		{name: "no TestWorkflow or no execution yet: nothing recorded"},
		{name: "the evaluation's own execution (its TestWorkflowExecution) is not the trigger's", read: execs(exec(1, "passed", "testworkflowexecution"))},
		{name: "a user's run is not the trigger's", read: execs(exec(2, "failed", "user"))},
		{name: "a scheduled run is not the trigger's", read: execs(exec(2, "failed", "cron"))},
		{name: "a later run of another actor keeps the trigger's last run", recorded: rec(2, "passed"), read: execs(exec(3, "failed", "user")),
			wantName: "team-eval-evaluation-2", wantStatus: "passed"},
		{name: "a triggered run queued is recorded, without an Event", read: execs(exec(2, "queued", tt)),
			wantName: "team-eval-evaluation-2", wantStatus: "queued"},
		{name: "a triggered run running is recorded again, without an Event", recorded: rec(2, "queued"), read: execs(exec(2, "running", tt)),
			wantName: "team-eval-evaluation-2", wantStatus: "running"},
		{name: "a triggered run paused is recorded, without an Event", recorded: rec(2, "running"), read: execs(exec(2, "paused", tt)),
			wantName: "team-eval-evaluation-2", wantStatus: "paused"},
		{name: "a triggered run that passed is recorded with a Normal Event", recorded: rec(2, "running"), read: execs(exec(2, "passed", tt)),
			wantName: "team-eval-evaluation-2", wantStatus: "passed", wantEvents: []string{"TriggeredRunPassed: " + msg(2, "passed")}},
		{name: "a triggered run that passed, seen first when it ended, is one Normal Event", read: execs(exec(2, "passed", tt)),
			wantName: "team-eval-evaluation-2", wantStatus: "passed", wantEvents: []string{"TriggeredRunPassed: " + msg(2, "passed")}},
		{name: "a triggered run that failed is a Warning", recorded: rec(2, "running"), read: execs(exec(2, "failed", tt)),
			wantName: "team-eval-evaluation-2", wantStatus: "failed", wantEvents: []string{"Warning TriggeredRunFailed: " + msg(2, "failed")}},
		{name: "a triggered run aborted is a Warning", recorded: rec(2, "running"), read: execs(exec(2, "aborted", tt)),
			wantName: "team-eval-evaluation-2", wantStatus: "aborted", wantEvents: []string{"Warning TriggeredRunFailed: " + msg(2, "aborted")}},
		{name: "a triggered run canceled is a Warning", recorded: rec(2, "queued"), read: execs(exec(2, "canceled", tt)),
			wantName: "team-eval-evaluation-2", wantStatus: "canceled", wantEvents: []string{"Warning TriggeredRunFailed: " + msg(2, "canceled")}},
		{name: "the run recorded, unchanged: no Event again", recorded: rec(2, "passed"), read: execs(exec(2, "passed", tt)),
			wantName: "team-eval-evaluation-2", wantStatus: "passed"},
		{name: "the next triggered run replaces the last", recorded: rec(2, "passed"), read: execs(exec(3, "failed", tt)),
			wantName: "team-eval-evaluation-3", wantStatus: "failed", wantEvents: []string{"Warning TriggeredRunFailed: " + msg(3, "failed")}},
		{name: "an older triggered run than the one recorded is not recorded", recorded: rec(3, "failed"), read: execs(exec(2, "passed", tt)),
			wantName: "team-eval-evaluation-3", wantStatus: "failed"},

		// Several runs read at once (a source listing every run).
		{name: "a failed run then a passing one, read together: both Events, oldest first; the passing one recorded",
			recorded: rec(2, "passed"), read: execs(exec(4, "passed", tt), exec(3, "failed", tt)),
			wantName: "team-eval-evaluation-4", wantStatus: "passed",
			wantEvents: []string{"Warning TriggeredRunFailed: " + msg(3, "failed"), "TriggeredRunPassed: " + msg(4, "passed")}},
		{name: "the recorded run's end and the next run read together: its end is emitted, the next recorded",
			recorded: rec(3, "running"), read: execs(exec(3, "failed", tt), exec(4, "queued", tt)),
			wantName: "team-eval-evaluation-4", wantStatus: "queued", wantEvents: []string{"Warning TriggeredRunFailed: " + msg(3, "failed")}},
		{name: "the same runs read again: no Event again",
			recorded: rec(4, "passed"), read: execs(exec(3, "failed", tt), exec(4, "passed", tt)),
			wantName: "team-eval-evaluation-4", wantStatus: "passed"},
		{name: "a failed run among other actors' runs is not missed",
			recorded: rec(2, "passed"), read: execs(exec(3, "passed", "user"), exec(4, "failed", tt), exec(5, "passed", "cron")),
			wantName: "team-eval-evaluation-4", wantStatus: "failed", wantEvents: []string{"Warning TriggeredRunFailed: " + msg(4, "failed")}},

		// The latest execution only: the recorded run followed before its end was read.
		{name: "the next triggered run read before the recorded one's end: a Warning for it, the next recorded",
			recorded: rec(3, "running"), read: execs(exec(4, "queued", tt)),
			wantName: "team-eval-evaluation-4", wantStatus: "queued", wantEvents: []string{"Warning TriggeredRunUnobserved: " + unobserved(3, "running", 4)}},
		{name: "another actor's run read before the recorded one's end: recorded unknown, not running, with a Warning",
			recorded: rec(3, "running"), read: execs(exec(4, "passed", "user")),
			wantName: "team-eval-evaluation-3", wantStatus: TriggeredRunUnknown, wantEvents: []string{"Warning TriggeredRunUnobserved: " + unobserved(3, "running", 4)},
			wantMessage: unobserved(3, "running", 4)},
		{name: "the unknown run, read again the same: no Event again",
			recorded: rec(3, TriggeredRunUnknown), read: execs(exec(4, "passed", "user")),
			wantName: "team-eval-evaluation-3", wantStatus: TriggeredRunUnknown},
		{name: "the unknown run's end read after all: recorded, with its Event",
			recorded: rec(3, TriggeredRunUnknown), read: execs(exec(3, "failed", tt)),
			wantName: "team-eval-evaluation-3", wantStatus: "failed", wantEvents: []string{"Warning TriggeredRunFailed: " + msg(3, "failed")}},
		// Only the newest triggered run is followed.
		{name: "the recorded run still running when the next is listed: a Warning for it, the next recorded",
			recorded: rec(3, "running"), read: execs(exec(3, "running", tt), exec(4, "queued", tt)),
			wantName: "team-eval-evaluation-4", wantStatus: "queued", wantEvents: []string{"Warning TriggeredRunUnobserved: " + unobserved(3, "running", 4)}},
		{name: "two new triggered runs listed, the older running: a Warning for it, the newer recorded",
			recorded: rec(2, "passed"), read: execs(exec(4, "queued", tt), exec(3, "running", tt)),
			wantName: "team-eval-evaluation-4", wantStatus: "queued", wantEvents: []string{"Warning TriggeredRunUnobserved: " + unobserved(3, "running", 4)}},
		{name: "the passed-over run's end listed later: no Event again",
			recorded: rec(4, "queued"), read: execs(exec(4, "queued", tt), exec(3, "failed", tt)),
			wantName: "team-eval-evaluation-4", wantStatus: "queued"},
		{name: "an ended recorded run followed by others needs no Warning",
			recorded: rec(3, "passed"), read: execs(exec(5, "passed", "user")),
			wantName: "team-eval-evaluation-3", wantStatus: "passed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, evs := DecideTriggeredRun(tc.recorded, tc.read)
			var name, status string
			if got != nil {
				name, status = got.Name, got.Status
			}
			if name != tc.wantName || status != tc.wantStatus {
				t.Fatalf("recorded %q %q, want %q %q", name, status, tc.wantName, tc.wantStatus)
			}
			if got := eventList(evs); !reflect.DeepEqual(got, tc.wantEvents) {
				t.Fatalf("events %q, want %q", got, tc.wantEvents)
			}
			if got == nil || got == tc.recorded {
				return
			}
			// A new record carries the execution as Testkube wrote it.
			var newest *TestkubeExecution
			for i, x := range tc.read {
				if x.ActorType == tt && x.Name == got.Name {
					newest = &tc.read[i]
				}
			}
			want := tc.wantMessage
			if want == "" && newest != nil {
				want = msg(newest.Number, newest.Status)
			}
			if got.Message != want {
				t.Fatalf("message %q, want %q", got.Message, want)
			}
			if newest != nil && tc.wantMessage == "" && (got.Number != newest.Number || got.ScheduledAt != newest.ScheduledAt || got.FinishedAt != newest.FinishedAt) {
				t.Fatalf("recorded %+v of %+v", got, newest)
			}
		})
	}
}

// TestTriggeredWorkflowIsTheRenderedTestWorkflowOnlyWithATrigger: the
// TestWorkflow is followed only when the last render has a TestTrigger.
func TestTriggeredWorkflowIsTheRenderedTestWorkflowOnlyWithATrigger(t *testing.T) {
	tw := scribev1.ObjectIdentity{APIVersion: "testworkflows.testkube.io/v1", Kind: "TestWorkflow", Namespace: "testkube", Name: "team-eval-evaluation"}
	tt := scribev1.ObjectIdentity{APIVersion: "tests.testkube.io/v1", Kind: "TestTrigger", Namespace: "testkube", Name: "team-eval-evaluation"}
	cm := scribev1.ObjectIdentity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "testkube", Name: "team-eval-experiment"}
	for _, tc := range []struct {
		name                  string
		g                     *scribev1.GeneratedResources
		wantWorkflow, wantTTr *scribev1.ObjectIdentity
	}{
		{name: "nothing rendered"},
		{name: "stage 3: the TestWorkflow without its trigger", g: &scribev1.GeneratedResources{Objects: []scribev1.ObjectIdentity{cm, tw}}},
		{name: "stage 4 with the trigger", g: &scribev1.GeneratedResources{Objects: []scribev1.ObjectIdentity{cm, tt, tw}}, wantWorkflow: &tw, wantTTr: &tt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, tr := triggeredWorkflow(tc.g)
			if !reflect.DeepEqual(w, tc.wantWorkflow) || !reflect.DeepEqual(tr, tc.wantTTr) {
				t.Fatalf("triggeredWorkflow %+v, %+v, want %+v, %+v", w, tr, tc.wantWorkflow, tc.wantTTr)
			}
		})
	}
}
