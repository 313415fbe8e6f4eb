package controller

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// A run of an agent evaluation's TestWorkflow that its TestTrigger
// started (spec.workflow.testkube.trigger) is a later re-evaluation of
// the agent: the newest one is recorded in status.lastTriggeredRun, each
// one's end is an Event, and none changes the Experiment's phase.
//
// The runs are read from Testkube's API (testkube_api.go), which lists
// the TestWorkflow's executions newest first, a page at a time: a run
// that leaves the page before its end is read is reported, not lost
// silently. DecideTriggeredRun takes the executions read as a list, in
// any order.

// Reasons of the Events of a triggered run.
const (
	// ReasonTriggeredRunPassed: a run the TestTrigger started passed.
	ReasonTriggeredRunPassed = "TriggeredRunPassed"
	// ReasonTriggeredRunFailed: a run the TestTrigger started failed or
	// was aborted or canceled.
	ReasonTriggeredRunFailed = "TriggeredRunFailed"
	// ReasonTriggeredRunUnobserved: the run recorded was followed by a
	// later execution before its end was read back: its outcome is only
	// in Testkube.
	ReasonTriggeredRunUnobserved = "TriggeredRunUnobserved"
)

// TriggeredRunUnknown is the status recorded for a triggered run whose
// end was not read back (ReasonTriggeredRunUnobserved).
const TriggeredRunUnknown = "unknown"

// ActorTestTrigger is the runningContext.actor.type Testkube gives an
// execution a TestTrigger started.
const ActorTestTrigger = "testtrigger"

// TestkubeExecution is an execution of a TestWorkflow as Testkube's API
// lists it (triggeredExecutions).
type TestkubeExecution struct {
	// Workflow is the TestWorkflow, as namespace/name.
	Workflow string
	ID, Name string
	Number   int32
	// Status is result.status: queued, running, paused, ..., passed,
	// failed, aborted or canceled.
	Status string
	// ActorType and ActorName are runningContext.actor's: a TestTrigger's
	// run is "testtrigger", named after the trigger.
	ActorType, ActorName string
	ScheduledAt          *metav1.Time
	FinishedAt           *metav1.Time
}

// ended reports whether Testkube's result status is final.
func ended(status string) bool {
	return status == "passed" || status == "failed" || status == "aborted" || status == "canceled"
}

// DecideTriggeredRun decides what to record of the TestWorkflow's
// executions read (any order; none when the TestWorkflow is not there or
// never ran) given the run recorded, and the Events to emit. Only the
// executions a TestTrigger started count, and only those newer than the
// recorded run, or the recorded run itself while its end is not recorded:
// one the Experiment's own TestWorkflowExecution, a user or a schedule
// started, or an older triggered run, leaves the record as it is.
//
// The record is the newest triggered run, recorded again when its status
// changes. Every triggered run read that ended is one Event, oldest
// first: Normal when it passed, Warning when it failed or was aborted or canceled, so
// a failed run followed by a passing one between two reads is not missed.
// When the recorded run has not ended and a later execution (anyone's) is
// read but not the run itself (it left the page read), its end can no
// longer be read back: a Warning says so, and unless a newer triggered run
// replaces it, it is recorded with the status "unknown" rather than left
// as if still running (read later after all, its end is recorded and
// emitted as any). Only the newest triggered run is followed: one that
// has not ended when a newer one is recorded is a Warning too.
func DecideTriggeredRun(recorded *scribev1.TriggeredRun, execs []TestkubeExecution) (*scribev1.TriggeredRun, []Event) {
	// after: the newest run number whose record is final.
	var after int32
	if recorded != nil {
		after = recorded.Number
		if !ended(recorded.Status) {
			after--
		}
	}
	var fresh []TestkubeExecution // triggered runs to record, by number
	var newest int32              // the newest execution read, anyone's
	var workflow string
	sawRecorded := false
	var recordedRead string // the recorded run's status as read
	for _, x := range execs {
		if x.Name == "" {
			continue
		}
		newest, workflow = max(newest, x.Number), x.Workflow
		if recorded != nil && x.Name == recorded.Name {
			sawRecorded, recordedRead = true, x.Status
		}
		if x.ActorType != ActorTestTrigger || x.Number <= after {
			continue
		}
		if recorded != nil && x.Name == recorded.Name && x.Status == recorded.Status {
			continue // read again, unchanged
		}
		fresh = append(fresh, x)
	}
	slices.SortStableFunc(fresh, func(a, b TestkubeExecution) int { return int(a.Number) - int(b.Number) })

	unobserved := func(number int32, name, last string, next int32) string {
		if last == "" {
			last = "not reported yet"
		}
		return fmt.Sprintf("run %d (%s) of TestWorkflow %s, last read %s: run %d followed before its end was read, which is only in Testkube",
			number, name, workflow, last, next)
	}
	var next int32 // the triggered run that replaces the record, if any
	if len(fresh) > 0 {
		next = fresh[len(fresh)-1].Number
	}
	var events []Event
	run := recorded
	if recorded != nil && !ended(recorded.Status) && recorded.Status != TriggeredRunUnknown {
		switch {
		case !sawRecorded && newest > recorded.Number:
			// No longer listed, or never listed again: the record says so.
			msg := unobserved(recorded.Number, recorded.Name, recorded.Status, newest)
			events = append(events, warningEvent(ReasonTriggeredRunUnobserved, "%s", msg))
			unknown := *recorded
			unknown.Status, unknown.Message = TriggeredRunUnknown, msg
			run = &unknown
		case sawRecorded && recordedRead == recorded.Status && next > recorded.Number:
			// Replaced by a newer triggered run before it ended: only
			// the newest run is followed.
			events = append(events, warningEvent(ReasonTriggeredRunUnobserved, "%s", unobserved(recorded.Number, recorded.Name, recorded.Status, next)))
		}
	}
	for i, x := range fresh {
		r := triggeredRun(x)
		if !ended(x.Status) && i < len(fresh)-1 {
			events = append(events, warningEvent(ReasonTriggeredRunUnobserved, "%s", unobserved(x.Number, x.Name, x.Status, next)))
		}
		switch x.Status {
		case "passed":
			events = append(events, normalEvent(ReasonTriggeredRunPassed, "%s", r.Message))
		case "failed", "aborted", "canceled":
			events = append(events, warningEvent(ReasonTriggeredRunFailed, "%s", r.Message))
		}
		run = r
	}
	return run, events
}

// triggeredRun is the record of a triggered execution.
func triggeredRun(x TestkubeExecution) *scribev1.TriggeredRun {
	by := "a TestTrigger"
	if x.ActorName != "" {
		by = "TestTrigger " + x.ActorName
	}
	status := x.Status
	if status == "" {
		status = "not reported yet"
	}
	return &scribev1.TriggeredRun{
		Name: x.Name, Number: x.Number, Status: x.Status,
		ScheduledAt: x.ScheduledAt, FinishedAt: x.FinishedAt,
		Message: fmt.Sprintf("run %d (%s) of TestWorkflow %s, started by %s: %s", x.Number, x.Name, x.Workflow, by, status),
	}
}

// triggeredWorkflow is the TestWorkflow the TestTrigger of the last render
// re-runs, and the trigger, as generated resources name them (the render
// has one of each, the trigger selecting the workflow by name); nil when
// the render has no TestTrigger.
func triggeredWorkflow(g *scribev1.GeneratedResources) (workflow, trigger *scribev1.ObjectIdentity) {
	if g == nil {
		return nil, nil
	}
	for i, o := range g.Objects {
		switch o.Kind {
		case "TestWorkflow":
			workflow = &g.Objects[i]
		case "TestTrigger":
			trigger = &g.Objects[i]
		}
	}
	if workflow == nil || trigger == nil {
		return nil, nil
	}
	w, t := *workflow, *trigger
	return &w, &t
}
