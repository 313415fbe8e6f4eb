package controller

import (
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// The rollout (rollout.go) and Experiment stage (stages.go) decisions are
// pure: they read a spec, a status and what the reconciler observed, and
// say what to record and do. What they say to show and tell is data: a
// Mark per condition change and an Event per Kubernetes event, which the
// reconciler carries out in order.

// Mark is one change of a condition. Status True, False or Unknown sets
// the condition; an empty Status removes it. Reconciling=True removes
// Stalled and Stalled=True removes Reconciling, as kstatus wants.
type Mark struct {
	Type    string
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// String is the mark as a decision table writes it:
// "Ready=False/ApplyPending: message", or "-Stalled" for a removal.
func (m Mark) String() string {
	if m.Status == "" {
		return "-" + m.Type
	}
	return fmt.Sprintf("%s=%s/%s: %s", m.Type, m.Status, m.Reason, m.Message)
}

func markTrue(typ, reason, format string, args ...any) Mark {
	return Mark{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func markFalse(typ, reason, format string, args ...any) Mark {
	return Mark{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func markUnknown(typ, reason, format string, args ...any) Mark {
	return Mark{Type: typ, Status: metav1.ConditionUnknown, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// markReconciling says the object is on its way: Reconciling=True (and Stalled removed).
func markReconciling(reason, format string, args ...any) Mark {
	return markTrue(scribev1.ReconcilingCondition, reason, format, args...)
}

// markStalled says only a change of the object can move it: Stalled=True (and
// Reconciling removed).
func markStalled(reason, format string, args ...any) Mark {
	return markTrue(scribev1.StalledCondition, reason, format, args...)
}

// markNotReady is Ready=False.
func markNotReady(reason, format string, args ...any) Mark {
	return markFalse(scribev1.ReadyCondition, reason, format, args...)
}

// markReady is Ready=True, reason Succeeded.
func markReady(format string, args ...any) Mark {
	return markTrue(scribev1.ReadyCondition, ReasonSucceeded, format, args...)
}

// unmark removes a condition.
func unmark(typ string) Mark { return Mark{Type: typ} }

// applyMarks sets the marks on obj, in order.
func applyMarks(obj conditions.Setter, marks []Mark) {
	for _, m := range marks {
		switch {
		case m.Status == "":
			conditions.Delete(obj, m.Type)
		case m.Type == scribev1.ReconcilingCondition && m.Status == metav1.ConditionTrue:
			conditions.MarkReconciling(obj, m.Reason, "%s", m.Message)
		case m.Type == scribev1.StalledCondition && m.Status == metav1.ConditionTrue:
			conditions.MarkStalled(obj, m.Reason, "%s", m.Message)
		case m.Status == metav1.ConditionTrue:
			conditions.MarkTrue(obj, m.Type, m.Reason, "%s", m.Message)
		case m.Status == metav1.ConditionFalse:
			conditions.MarkFalse(obj, m.Type, m.Reason, "%s", m.Message)
		default:
			conditions.MarkUnknown(obj, m.Type, m.Reason, "%s", m.Message)
		}
	}
}

// Event is one Kubernetes event to record on the object.
type Event struct {
	Type    string // Normal or Warning
	Reason  string
	Message string
}

// String is the event as a decision table writes it: "Reason: message",
// with "Warning " in front of warnings.
func (e Event) String() string {
	if e.Type == corev1.EventTypeWarning {
		return "Warning " + e.Reason + ": " + e.Message
	}
	return e.Reason + ": " + e.Message
}

func normalEvent(reason, format string, args ...any) Event {
	return Event{Type: corev1.EventTypeNormal, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func warningEvent(reason, format string, args ...any) Event {
	return Event{Type: corev1.EventTypeWarning, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// maxDecisions bounds the decisions of one reconcile. Each decision but
// the last asks for one observation the reconciler has not made yet
// (render, commit, pull request, read-back, analysis), so a reconcile
// needs at most six; more is a bug, reported as an error rather than a
// loop.
const maxDecisions = 8
