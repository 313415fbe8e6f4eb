package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// testkubeExecutionsJSON is a page of GET /v1/test-workflows/<name>/executions
// as Testkube's API writes it (TestWorkflowExecutionsResult of
// pkg/api/v1/testkube, github.com/kubeshop/testkube 2.12.2): newest first;
// zero times written as 0001-01-01T00:00:00Z; run 5 was started by a user,
// run 4 by this TestTrigger, run 3 by another trigger, run 2 by an older
// Testkube without a running context, run 1 by the Experiment's
// TestWorkflowExecution.
const testkubeExecutionsJSON = `{
 "totals": {"results": 5, "passed": 2, "failed": 1, "queued": 0, "running": 2},
 "filtered": {"results": 5, "passed": 2, "failed": 1, "queued": 0, "running": 2},
 "results": [
  {"id": "6650a1b2c3d4e5f6a7b8c905", "name": "team-eval-evaluation-5", "number": 5,
   "scheduledAt": "2026-11-28T10:05:00Z", "statusAt": "2026-11-28T10:05:01Z",
   "result": {"status": "running", "predictedStatus": "passed", "queuedAt": "2026-11-28T10:05:00Z", "startedAt": "2026-11-28T10:05:01Z", "finishedAt": "0001-01-01T00:00:00Z"},
   "workflow": {"name": "team-eval-evaluation", "namespace": "testkube", "labels": {"scribe.dev/experiment": "eval"}},
   "runningContext": {"interface": {"type": "cli"}, "actor": {"name": "someone", "email": "someone@example.com", "type": "user"}}},
  {"id": "6650a1b2c3d4e5f6a7b8c904", "name": "team-eval-evaluation-4", "number": 4,
   "scheduledAt": "2026-11-28T10:04:00Z", "statusAt": "2026-11-28T10:04:30.5Z",
   "result": {"status": "failed", "predictedStatus": "failed", "queuedAt": "2026-11-28T10:04:00Z", "startedAt": "2026-11-28T10:04:01Z", "finishedAt": "2026-11-28T10:04:30.5Z", "duration": "29.5s", "durationMs": 29500},
   "workflow": {"name": "team-eval-evaluation", "namespace": "testkube"},
   "runningContext": {"interface": {"type": "internal"}, "actor": {"name": "team-eval-evaluation", "type": "testtrigger"}}},
  {"id": "6650a1b2c3d4e5f6a7b8c903", "name": "team-eval-evaluation-3", "number": 3,
   "scheduledAt": "2026-11-28T10:03:00Z", "statusAt": "2026-11-28T10:03:30Z",
   "result": {"status": "passed", "predictedStatus": "passed", "finishedAt": "2026-11-28T10:03:30Z"},
   "workflow": {"name": "team-eval-evaluation", "namespace": "testkube"},
   "runningContext": {"interface": {"type": "internal"}, "actor": {"name": "someone-elses-trigger", "type": "testtrigger"}}},
  {"id": "6650a1b2c3d4e5f6a7b8c902", "name": "team-eval-evaluation-2", "number": 2,
   "scheduledAt": "2026-11-28T10:02:00Z", "statusAt": "2026-11-28T10:02:00Z",
   "result": {"status": "queued", "predictedStatus": "passed", "finishedAt": "0001-01-01T00:00:00Z"},
   "workflow": {"name": "team-eval-evaluation", "namespace": "testkube"}},
  {"id": "6650a1b2c3d4e5f6a7b8c901", "name": "team-eval-evaluation-1", "number": 1,
   "scheduledAt": "2026-11-28T10:01:00Z", "statusAt": "2026-11-28T10:01:30Z",
   "result": {"status": "passed", "predictedStatus": "passed", "finishedAt": "2026-11-28T10:01:30Z"},
   "workflow": {"name": "team-eval-evaluation", "namespace": "testkube"},
   "runningContext": {"interface": {"type": "internal"}, "actor": {"name": "team-eval-evaluation-1a2b", "type": "testworkflowexecution"}}}
 ]
}`

// TestTriggeredExecutionsReadTestkubesListAsItsAPIWritesIt: the executions
// of Testkube's list, by its JSON names and types; only this trigger's are
// the trigger's, one without a running context only after the
// Experiment's own execution; a zero time is none.
func TestTriggeredExecutionsReadTestkubesListAsItsAPIWritesIt(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/test-workflows/team-eval-evaluation/executions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(testkubeExecutionsJSON))
	}))
	defer srv.Close()
	res, err := fetchTestkubeExecutions(context.Background(), NewTestkubeHTTPClient(), srv.URL+"/", "team-eval-evaluation")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) *metav1.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		mt := metav1.NewTime(tm)
		return &mt
	}
	wf := scribev1.ObjectIdentity{APIVersion: "testworkflows.testkube.io/v1", Kind: "TestWorkflow", Namespace: "testkube", Name: "team-eval-evaluation"}
	x := func(n int32, status, actorType, actorName, scheduled, finished string) TestkubeExecution {
		e := TestkubeExecution{Workflow: "testkube/team-eval-evaluation", ID: fmt.Sprintf("6650a1b2c3d4e5f6a7b8c90%d", n),
			Name: fmt.Sprintf("team-eval-evaluation-%d", n), Number: n, Status: status, ActorType: actorType, ActorName: actorName, ScheduledAt: at(scheduled)}
		if finished != "" {
			e.FinishedAt = at(finished)
		}
		return e
	}
	for _, tc := range []struct {
		name string
		own  int32
		want []TestkubeExecution
	}{
		{name: "own execution known: one without a running context after it is the trigger's", own: 1, want: []TestkubeExecution{
			x(5, "running", "user", "someone", "2026-11-28T10:05:00Z", ""),
			x(4, "failed", ActorTestTrigger, "team-eval-evaluation", "2026-11-28T10:04:00Z", "2026-11-28T10:04:30.5Z"),
			x(3, "passed", "another testtrigger", "someone-elses-trigger", "2026-11-28T10:03:00Z", "2026-11-28T10:03:30Z"),
			x(2, "queued", ActorTestTrigger, "", "2026-11-28T10:02:00Z", ""),
			x(1, "passed", "testworkflowexecution", "team-eval-evaluation-1a2b", "2026-11-28T10:01:00Z", "2026-11-28T10:01:30Z"),
		}},
		{name: "own execution unknown: one without a running context is nobody's", own: 0, want: []TestkubeExecution{
			x(5, "running", "user", "someone", "2026-11-28T10:05:00Z", ""),
			x(4, "failed", ActorTestTrigger, "team-eval-evaluation", "2026-11-28T10:04:00Z", "2026-11-28T10:04:30.5Z"),
			x(3, "passed", "another testtrigger", "someone-elses-trigger", "2026-11-28T10:03:00Z", "2026-11-28T10:03:30Z"),
			x(2, "queued", "", "", "2026-11-28T10:02:00Z", ""),
			x(1, "passed", "testworkflowexecution", "team-eval-evaluation-1a2b", "2026-11-28T10:01:00Z", "2026-11-28T10:01:30Z"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := triggeredExecutions(res, wf, "team-eval-evaluation", tc.own)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("executions\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
	other := testkubeExecutionsResult{Results: []testkubeExecutionSummary{res.Results[1]}}
	other.Results[0].Workflow.Name = "another-workflow"
	if got := triggeredExecutions(other, wf, "team-eval-evaluation", 1); len(got) != 0 {
		t.Fatalf("another TestWorkflow's execution kept: %+v", got)
	}
}

// TestFetchTestkubeExecutionsFailsNamingTheAddressWithoutCredentials: a
// read that fails (an error status, a body too large or not JSON, no
// server, not a URL) is an error naming the address, never its password.
func TestFetchTestkubeExecutionsFailsNamingTheAddressWithoutCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/test-workflows/missing/executions":
			http.Error(w, `{"title":"not found"}`, http.StatusNotFound)
		case "/v1/test-workflows/huge/executions":
			_, _ = w.Write([]byte(`{"results":[` + strings.Repeat(" ", testkubeAPIMaxBytes) + `]}`))
		case "/v1/test-workflows/html/executions":
			_, _ = w.Write([]byte(`<html>login</html>`))
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	withCreds := strings.Replace(srv.URL, "http://", "http://user:s3cret@", 1)
	for _, tc := range []struct {
		name, api, workflow, want string
	}{
		{name: "an error status", api: withCreds, workflow: "missing", want: "404"},
		{name: "a body over the bound", api: withCreds, workflow: "huge", want: "larger than"},
		{name: "not Testkube's JSON", api: withCreds, workflow: "html", want: "not a list of TestWorkflow executions"},
		{name: "no server", api: strings.Replace(closedURL, "http://", "http://user:s3cret@", 1), workflow: "any", want: "GET http://user:xxxxx@"},
		{name: "not a URL", api: "testkube-api-server:8088", workflow: "any", want: "not an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fetchTestkubeExecutions(context.Background(), NewTestkubeHTTPClient(), tc.api, tc.workflow)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error %q: want %q, and no password", err, tc.want)
			}
			if tc.name != "not a URL" && !strings.Contains(err.Error(), "/v1/test-workflows/"+tc.workflow+"/executions?pageSize=100") {
				t.Fatalf("error %q does not name the address", err)
			}
		})
	}
}
