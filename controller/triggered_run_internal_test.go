package controller

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// TestDecideTriggeredRunRecordsTheTriggersRunsAndEmitsTheirOutcome: only
// an execution a TestTrigger started is recorded; it is recorded again
// when it or its status changes; its end is one Event, Normal when it
// passed, Warning when it failed or was aborted; nothing else is.
func TestDecideTriggeredRunRecordsTheTriggersRunsAndEmitsTheirOutcome(t *testing.T) {
	scheduled := metav1.NewTime(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	finished := metav1.NewTime(time.Date(2026, 11, 28, 10, 2, 0, 0, time.UTC))
	exec := func(n int32, status, actor string) *TestkubeExecution {
		x := &TestkubeExecution{
			Workflow: "testkube/team-eval-evaluation", ID: "id", Name: fmt.Sprintf("team-eval-evaluation-%d", n), Number: n,
			Status: status, ActorType: actor, ActorName: "team-eval-evaluation", ScheduledAt: &scheduled,
		}
		switch status {
		case "passed", "failed", "aborted":
			x.FinishedAt = &finished
		}
		return x
	}
	rec := func(n int32, status string) *scribev1.TriggeredRun {
		return &scribev1.TriggeredRun{Name: fmt.Sprintf("team-eval-evaluation-%d", n), Number: n, Status: status}
	}
	msg := func(n int32, status string) string {
		return fmt.Sprintf("run %d (team-eval-evaluation-%d) of TestWorkflow testkube/team-eval-evaluation, started by TestTrigger team-eval-evaluation: %s", n, n, status)
	}
	for _, tc := range []struct {
		name     string
		recorded *scribev1.TriggeredRun
		latest   *TestkubeExecution
		// want is the record's name and status ("" for none); wantEvent
		// the Event as a decision table writes it ("" for none).
		wantName, wantStatus string
		wantEvent            string
	}{
		{name: "no TestWorkflow or no execution yet: nothing recorded", latest: nil},
		{name: "the evaluation's own execution (its TestWorkflowExecution) is not the trigger's", latest: exec(1, "passed", "testworkflowexecution")},
		{name: "a user's run is not the trigger's", latest: exec(2, "failed", "user")},
		{name: "a scheduled run is not the trigger's", latest: exec(2, "failed", "cron")},
		{name: "a later run of another actor keeps the trigger's last run", recorded: rec(2, "passed"), latest: exec(3, "failed", "user"),
			wantName: "team-eval-evaluation-2", wantStatus: "passed"},
		{name: "a triggered run queued is recorded, without an Event", latest: exec(2, "queued", ActorTestTrigger),
			wantName: "team-eval-evaluation-2", wantStatus: "queued"},
		{name: "a triggered run running is recorded again, without an Event", recorded: rec(2, "queued"), latest: exec(2, "running", ActorTestTrigger),
			wantName: "team-eval-evaluation-2", wantStatus: "running"},
		{name: "a triggered run paused is recorded, without an Event", recorded: rec(2, "running"), latest: exec(2, "paused", ActorTestTrigger),
			wantName: "team-eval-evaluation-2", wantStatus: "paused"},
		{name: "a triggered run that passed is recorded with a Normal Event", recorded: rec(2, "running"), latest: exec(2, "passed", ActorTestTrigger),
			wantName: "team-eval-evaluation-2", wantStatus: "passed", wantEvent: "TriggeredRunPassed: " + msg(2, "passed")},
		{name: "a triggered run that passed, seen first when it ended, is one Normal Event", latest: exec(2, "passed", ActorTestTrigger),
			wantName: "team-eval-evaluation-2", wantStatus: "passed", wantEvent: "TriggeredRunPassed: " + msg(2, "passed")},
		{name: "a triggered run that failed is a Warning", recorded: rec(2, "running"), latest: exec(2, "failed", ActorTestTrigger),
			wantName: "team-eval-evaluation-2", wantStatus: "failed", wantEvent: "Warning TriggeredRunFailed: " + msg(2, "failed")},
		{name: "a triggered run aborted is a Warning", recorded: rec(2, "running"), latest: exec(2, "aborted", ActorTestTrigger),
			wantName: "team-eval-evaluation-2", wantStatus: "aborted", wantEvent: "Warning TriggeredRunFailed: " + msg(2, "aborted")},
		{name: "the run recorded, unchanged: no Event again", recorded: rec(2, "passed"), latest: exec(2, "passed", ActorTestTrigger),
			wantName: "team-eval-evaluation-2", wantStatus: "passed"},
		{name: "the next triggered run replaces the last", recorded: rec(2, "passed"), latest: exec(3, "failed", ActorTestTrigger),
			wantName: "team-eval-evaluation-3", wantStatus: "failed", wantEvent: "Warning TriggeredRunFailed: " + msg(3, "failed")},
		{name: "an older triggered run than the one recorded is not recorded", recorded: rec(3, "failed"), latest: exec(2, "passed", ActorTestTrigger),
			wantName: "team-eval-evaluation-3", wantStatus: "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ev := DecideTriggeredRun(tc.recorded, tc.latest)
			var name, status string
			if got != nil {
				name, status = got.Name, got.Status
			}
			if name != tc.wantName || status != tc.wantStatus {
				t.Fatalf("recorded %q %q, want %q %q", name, status, tc.wantName, tc.wantStatus)
			}
			var evs []string
			if ev != nil {
				evs = eventList([]Event{*ev})
			}
			var want []string
			if tc.wantEvent != "" {
				want = []string{tc.wantEvent}
			}
			if !reflect.DeepEqual(evs, want) {
				t.Fatalf("events %q, want %q", evs, want)
			}
			if got != nil && got != tc.recorded {
				// A new record carries the execution as Testkube wrote it.
				if got.Number != tc.latest.Number || got.ScheduledAt != tc.latest.ScheduledAt || got.FinishedAt != tc.latest.FinishedAt || got.Message != msg(tc.latest.Number, tc.latest.Status) {
					t.Fatalf("recorded %+v of %+v", got, tc.latest)
				}
			}
		})
	}
}

// TestLatestExecutionReadsTheTestWorkflowStatusAsTestkubeWritesIt: the
// fields of status.latestExecution, by the CRD's names and types.
func TestLatestExecutionReadsTheTestWorkflowStatusAsTestkubeWritesIt(t *testing.T) {
	tw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "testworkflows.testkube.io/v1", "kind": "TestWorkflow",
		"metadata": map[string]any{"name": "team-eval-evaluation", "namespace": "testkube"},
		"status": map[string]any{"latestExecution": map[string]any{
			"id": "6650a1b2c3d4e5f6a7b8c9d1", "name": "team-eval-evaluation-2", "number": int64(2),
			"scheduledAt": "2026-11-28T10:00:00Z", "statusAt": "2026-11-28T10:02:00Z",
			"result":         map[string]any{"status": "failed", "finishedAt": "2026-11-28T10:02:00.5Z"},
			"runningContext": map[string]any{"interface": map[string]any{"type": "internal"}, "actor": map[string]any{"name": "team-eval-evaluation", "type": "testtrigger"}},
			"workflow":       map[string]any{"name": "team-eval-evaluation"},
		}},
	}}
	got := latestExecution(tw)
	want := &TestkubeExecution{
		Workflow: "testkube/team-eval-evaluation", ID: "6650a1b2c3d4e5f6a7b8c9d1", Name: "team-eval-evaluation-2", Number: 2,
		Status: "failed", ActorType: "testtrigger", ActorName: "team-eval-evaluation",
		ScheduledAt: timeOf("2026-11-28T10:00:00Z"), FinishedAt: timeOf("2026-11-28T10:02:00.5Z"),
	}
	if got == nil || got.FinishedAt == nil || !got.FinishedAt.Equal(&metav1.Time{Time: time.Date(2026, 11, 28, 10, 2, 0, 5e8, time.UTC)}) {
		t.Fatalf("finishedAt of %+v", got)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("latestExecution %+v, want %+v", got, want)
	}
	delete(tw.Object, "status")
	if got := latestExecution(tw); got != nil {
		t.Fatalf("a TestWorkflow never run: %+v, want none", got)
	}
	if got := latestExecution(nil); got != nil {
		t.Fatalf("no TestWorkflow: %+v, want none", got)
	}
}

// TestTriggeredWorkflowIsTheRenderedTestWorkflowOnlyWithATrigger: the
// TestWorkflow is followed only when the last render has a TestTrigger.
func TestTriggeredWorkflowIsTheRenderedTestWorkflowOnlyWithATrigger(t *testing.T) {
	tw := scribev1.ObjectIdentity{APIVersion: "testworkflows.testkube.io/v1", Kind: "TestWorkflow", Namespace: "testkube", Name: "team-eval-evaluation"}
	tt := scribev1.ObjectIdentity{APIVersion: "tests.testkube.io/v1", Kind: "TestTrigger", Namespace: "testkube", Name: "team-eval-evaluation"}
	cm := scribev1.ObjectIdentity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "testkube", Name: "team-eval-experiment"}
	for _, tc := range []struct {
		name string
		g    *scribev1.GeneratedResources
		want *scribev1.ObjectIdentity
	}{
		{name: "nothing rendered"},
		{name: "stage 3: the TestWorkflow without its trigger", g: &scribev1.GeneratedResources{Objects: []scribev1.ObjectIdentity{cm, tw}}},
		{name: "stage 4 with the trigger", g: &scribev1.GeneratedResources{Objects: []scribev1.ObjectIdentity{cm, tt, tw}}, want: &tw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := triggeredWorkflow(tc.g); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("triggeredWorkflow %+v, want %+v", got, tc.want)
			}
		})
	}
}
