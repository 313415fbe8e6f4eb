package controller

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// A run of an agent evaluation's TestWorkflow that its TestTrigger
// started (spec.workflow.testkube.trigger) is a later re-evaluation of
// the agent: it is recorded in status.lastTriggeredRun, with an Event
// when it ends, and never changes the Experiment's phase.

// Reasons of the Events of a triggered run.
const (
	// ReasonTriggeredRunPassed: a run the TestTrigger started passed.
	ReasonTriggeredRunPassed = "TriggeredRunPassed"
	// ReasonTriggeredRunFailed: a run the TestTrigger started failed or
	// was aborted.
	ReasonTriggeredRunFailed = "TriggeredRunFailed"
)

// ActorTestTrigger is the runningContext.actor.type Testkube gives an
// execution a TestTrigger started.
const ActorTestTrigger = "testtrigger"

// TestkubeExecution is a TestWorkflow's status.latestExecution as Testkube
// writes it.
type TestkubeExecution struct {
	// Workflow is the TestWorkflow, as namespace/name.
	Workflow string
	ID, Name string
	Number   int32
	// Status is result.status: queued, running, paused, passed, failed
	// or aborted.
	Status string
	// ActorType and ActorName are runningContext.actor's: a TestTrigger's
	// run is "testtrigger", named after the trigger.
	ActorType, ActorName string
	ScheduledAt          *metav1.Time
	FinishedAt           *metav1.Time
}

// DecideTriggeredRun decides what to record of the TestWorkflow's latest
// execution (nil: none, or the TestWorkflow is not there) given the run
// recorded, and the Event to emit. Only an execution a TestTrigger
// started counts; one the Experiment's own TestWorkflowExecution, a user
// or a schedule started leaves the record as it is, as does an execution
// older than the one recorded. The record changes when the execution or
// its status does; the Event is emitted once, when it ends: Normal when it
// passed, Warning when it failed or was aborted.
func DecideTriggeredRun(recorded *scribev1.TriggeredRun, latest *TestkubeExecution) (*scribev1.TriggeredRun, *Event) {
	if latest == nil || latest.ActorType != ActorTestTrigger || latest.Name == "" {
		return recorded, nil
	}
	if recorded != nil && latest.Number > 0 && latest.Number < recorded.Number {
		return recorded, nil
	}
	if recorded != nil && recorded.Name == latest.Name && recorded.Status == latest.Status {
		return recorded, nil
	}
	run := &scribev1.TriggeredRun{
		Name: latest.Name, Number: latest.Number, Status: latest.Status,
		ScheduledAt: latest.ScheduledAt, FinishedAt: latest.FinishedAt,
	}
	by := "a TestTrigger"
	if latest.ActorName != "" {
		by = "TestTrigger " + latest.ActorName
	}
	status := latest.Status
	if status == "" {
		status = "not reported yet"
	}
	run.Message = fmt.Sprintf("run %d (%s) of TestWorkflow %s, started by %s: %s", latest.Number, latest.Name, latest.Workflow, by, status)
	switch latest.Status {
	case "passed":
		ev := normalEvent(ReasonTriggeredRunPassed, "%s", run.Message)
		return run, &ev
	case "failed", "aborted":
		ev := warningEvent(ReasonTriggeredRunFailed, "%s", run.Message)
		return run, &ev
	}
	return run, nil
}

// triggeredWorkflow is the TestWorkflow the TestTrigger of the last render
// re-runs, as generated resources name it (the render has one of each,
// the trigger selecting the workflow by name); nil when the render has no
// TestTrigger.
func triggeredWorkflow(g *scribev1.GeneratedResources) *scribev1.ObjectIdentity {
	if g == nil {
		return nil
	}
	var workflow, trigger *scribev1.ObjectIdentity
	for i, o := range g.Objects {
		switch o.Kind {
		case "TestWorkflow":
			workflow = &g.Objects[i]
		case "TestTrigger":
			trigger = &g.Objects[i]
		}
	}
	if workflow == nil || trigger == nil {
		return nil
	}
	id := *workflow
	return &id
}

// latestExecution reads a TestWorkflow's status.latestExecution; nil
// without one (or without the TestWorkflow).
func latestExecution(tw *unstructured.Unstructured) *TestkubeExecution {
	if tw == nil {
		return nil
	}
	le, ok, _ := unstructured.NestedMap(tw.Object, "status", "latestExecution")
	if !ok {
		return nil
	}
	str := func(path ...string) string {
		s, _, _ := unstructured.NestedString(le, path...)
		return s
	}
	x := &TestkubeExecution{
		Workflow: tw.GetNamespace() + "/" + tw.GetName(),
		ID:       str("id"), Name: str("name"), Status: str("result", "status"),
		ActorType: str("runningContext", "actor", "type"), ActorName: str("runningContext", "actor", "name"),
		ScheduledAt: timeOf(str("scheduledAt")), FinishedAt: timeOf(str("result", "finishedAt")),
	}
	if n, ok, _ := unstructured.NestedFieldNoCopy(le, "number"); ok {
		switch v := n.(type) {
		case int64:
			x.Number = int32(v)
		case float64:
			x.Number = int32(v)
		}
	}
	return x
}

// timeOf parses an RFC 3339 time; nil when empty or malformed.
func timeOf(s string) *metav1.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if s == "" || err != nil {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}
