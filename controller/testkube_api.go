package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// The runs a TestTrigger starts are only in Testkube's API (its
// database): the TestWorkflow's status.latestExecution is deprecated and
// Testkube 2.x does not write it. They are read from the agent's API,
// GET <api>/v1/test-workflows/<name>/executions, Testkube's route
// testWorkflows.Get("/:id/executions") (internal/app/api/v1/server.go of
// github.com/kubeshop/testkube), newest first, 100 a page by default.

// DefaultTestkubeAPIURL is the address of Testkube's agent API as its Helm
// chart installs it: the Service testkube-api-server in the namespace
// testkube, port 8088.
const DefaultTestkubeAPIURL = "http://testkube-api-server.testkube.svc.cluster.local:8088"

// ReasonTriggeredRunsUnread: the runs of the TestTrigger could not be read
// from Testkube's API; the message names its address.
const ReasonTriggeredRunsUnread = "TriggeredRunsUnread"

// Bounds of a read of Testkube's API: one request's time, the response's
// size (a page of 100 summaries is some 100 KiB) and the page.
const (
	testkubeAPITimeout  = 5 * time.Second
	testkubeAPIMaxBytes = 1 << 20
	testkubeAPIPageSize = 100
)

// NewTestkubeHTTPClient is the client of Testkube's API: bounded in time,
// following no redirect.
func NewTestkubeHTTPClient() *http.Client {
	return &http.Client{
		Timeout: testkubeAPITimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// testkubeExecutionsResult is the JSON of Testkube's
// TestWorkflowExecutionsResult (pkg/api/v1/testkube/
// model_test_workflow_executions_result.go, with
// model_test_workflow_execution_summary.go,
// model_test_workflow_result_summary.go, model_test_workflow_summary.go,
// model_test_workflow_running_context.go and
// model_test_workflow_running_context_actor.go of
// github.com/kubeshop/testkube, tag 2.12.2): only the fields read.
// Testkube's time.Time fields are written even when zero
// (0001-01-01T00:00:00Z).
type testkubeExecutionsResult struct {
	Results []testkubeExecutionSummary `json:"results"`
}

type testkubeExecutionSummary struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Number      int32     `json:"number,omitempty"`
	ScheduledAt time.Time `json:"scheduledAt,omitempty"`
	StatusAt    time.Time `json:"statusAt,omitempty"`
	Result      *struct {
		Status     string    `json:"status"`
		FinishedAt time.Time `json:"finishedAt,omitempty"`
	} `json:"result,omitempty"`
	Workflow *struct {
		Name      string `json:"name,omitempty"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"workflow"`
	RunningContext *struct {
		Actor *struct {
			Name string `json:"name,omitempty"`
			Type string `json:"type"`
		} `json:"actor"`
	} `json:"runningContext,omitempty"`
}

// fetchTestkubeExecutions is the one read of Testkube's API: the newest
// executions of the TestWorkflow named. Its errors name the address
// (without credentials).
func fetchTestkubeExecutions(ctx context.Context, c *http.Client, api, workflow string) (testkubeExecutionsResult, error) {
	var res testkubeExecutionsResult
	base, err := url.Parse(strings.TrimSuffix(api, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return res, fmt.Errorf("testkube API address %q is not an http(s) URL", redactURL(api))
	}
	u := base.JoinPath("v1", "test-workflows", workflow, "executions")
	u.RawQuery = url.Values{"pageSize": {fmt.Sprint(testkubeAPIPageSize)}}.Encode()
	where := u.Redacted()
	status, reason, body, err := boundedGet(ctx, c, u.String(), testkubeAPITimeout, testkubeAPIMaxBytes)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL, with its credentials, is named once below
		}
		if status != 0 {
			return res, fmt.Errorf("GET %s: read the response: %w", where, err)
		}
		return res, fmt.Errorf("GET %s: %w", where, err)
	}
	if status != http.StatusOK {
		return res, fmt.Errorf("GET %s: %s", where, reason)
	}
	if len(body) > testkubeAPIMaxBytes {
		return res, fmt.Errorf("GET %s: response larger than %d bytes", where, testkubeAPIMaxBytes)
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return res, fmt.Errorf("GET %s: not a list of TestWorkflow executions: %w", where, err)
	}
	return res, nil
}

// redactURL hides the password of an address that does not parse as a URL
// either.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "…" + s[i:]
	}
	return s
}

// triggeredExecutions are the executions listed of the TestWorkflow, as
// DecideTriggeredRun takes them: those of another TestWorkflow are left
// out; those the TestTrigger named started (runningContext.actor, type
// testtrigger named after the trigger) have ActorType ActorTestTrigger,
// other actors' are kept (a later one tells that the recorded run's end
// will not be read) with any other actor type. An execution without a
// running context (a Testkube that does not tell) counts as the
// trigger's when it follows the Experiment's own execution (number own,
// 0 when unknown: then none does).
func triggeredExecutions(res testkubeExecutionsResult, workflow scribev1.ObjectIdentity, trigger string, own int32) []TestkubeExecution {
	var out []TestkubeExecution
	for _, s := range res.Results {
		if s.Workflow != nil && s.Workflow.Name != "" && s.Workflow.Name != workflow.Name {
			continue
		}
		x := TestkubeExecution{
			Workflow: workflow.Namespace + "/" + workflow.Name,
			ID:       s.ID, Name: s.Name, Number: s.Number,
			ScheduledAt: metaTime(s.ScheduledAt),
		}
		if s.Result != nil {
			x.Status = s.Result.Status
			if ended(x.Status) {
				x.FinishedAt = metaTime(s.Result.FinishedAt)
			}
		}
		switch {
		case s.RunningContext != nil && s.RunningContext.Actor != nil:
			a := s.RunningContext.Actor
			x.ActorType, x.ActorName = a.Type, a.Name
			if a.Type == ActorTestTrigger && a.Name != "" && a.Name != trigger {
				x.ActorType = "another " + ActorTestTrigger
			}
		case own > 0 && s.Number > own:
			x.ActorType = ActorTestTrigger
		}
		out = append(out, x)
	}
	return out
}

// metaTime is t, nil when zero.
func metaTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}
