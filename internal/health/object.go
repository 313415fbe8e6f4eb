package health

import (
	"fmt"
	"math"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// API groups and kinds with explicit rules in Object.
const (
	groupArgo       = "argoproj.io"
	groupTestkube   = "testworkflows.testkube.io"
	groupCAPI       = "cluster.x-k8s.io"
	kindWorkflow    = "Workflow"
	kindTWE         = "TestWorkflowExecution"
	kindCAPICluster = "Cluster"
)

// Object decides whether a rendered object is healthy from its own status.
//
// Explicit rules, checked first:
//   - any object with metadata.deletionTimestamp: Pending (Terminating);
//   - argoproj.io Workflow: status.phase Succeeded is Healthy; Failed or Error
//     is Failed with status.message; anything else is Pending;
//   - testworkflows.testkube.io TestWorkflowExecution: Pending until
//     status.generation == metadata.generation; then
//     status.latestExecution.result.status passed is Healthy, failed or
//     aborted is Failed (message from status.error, the initialization or the
//     first failed step), queued, running, paused or missing is Pending;
//   - cluster.x-k8s.io Cluster: Pending until status.observedGeneration ==
//     metadata.generation; phase Failed or a failureMessage is Failed; the
//     Available condition (v1beta2), else Ready (v1beta1), True is Healthy;
//     without either condition, phase Provisioned is Healthy;
//   - Crossplane-style managed and composite resources (any object with a
//     Synced condition): Synced=False is Failed with its message; Ready=True
//     and Synced=True is Healthy; otherwise Pending.
//
// Everything else goes to kstatus (github.com/fluxcd/cli-utils, the Flux fork
// of sigs.k8s.io/cli-utils): Current is Healthy, Failed is Failed, InProgress
// and Terminating are Pending. kstatus covers Deployments (available at the
// observed generation, replicas updated), StatefulSets, DaemonSets,
// ReplicaSets, Jobs, Pods, PVCs, Services, PodDisruptionBudgets, CRDs, and any
// object with Ready/Reconciling/Stalled conditions and observedGeneration.
// Objects it knows nothing about (ConfigMaps, unknown kinds without
// conditions) are Healthy.
func Object(u *unstructured.Unstructured) Verdict {
	o := content(u)
	group, kind, subj := identity(u)
	v := Verdict{Subject: subj}
	if gone, ok := absent(o, v); ok {
		return gone
	}
	switch {
	case group == groupArgo && kind == kindWorkflow:
		return workflow(v, o)
	case group == groupTestkube && kind == kindTWE:
		return testWorkflowExecution(v, o)
	case group == groupCAPI && kind == kindCAPICluster:
		return capiCluster(v, o)
	case findCond(conditions(o, "status", "conditions"), "Synced") != nil:
		return crossplane(v, o)
	}
	return computeKstatus(v, u)
}

// absent is the Pending verdict of an object that does not exist (yet) or is
// being deleted; ok is false for any other object.
func absent(o map[string]any, v Verdict) (Verdict, bool) {
	switch {
	case o == nil:
		return pending(v, ReasonNotFound, "not created yet"), true
	case str(o, "metadata", "deletionTimestamp") != "":
		return pending(v, ReasonTerminating, "object is being deleted"), true
	}
	return v, false
}

// Deployment is Object for a typed Deployment.
func Deployment(d *appsv1.Deployment) Verdict {
	if d == nil {
		return Verdict{State: Pending, Reason: ReasonNotFound, Message: "Deployment not found"}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return Verdict{State: Pending, Reason: ReasonUnknown, Message: err.Error(),
			Subject: subject("Deployment", d.Namespace, d.Name)}
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" {
		u.SetAPIVersion(appsv1.SchemeGroupVersion.String())
		u.SetKind("Deployment")
	}
	return Object(u)
}

// Restarts sums the restartCount of the pods' containers and init containers
// (restartable init containers are sidecars), saturating at MaxInt32. Canary
// analysis compares it before and after a rollout.
func Restarts(pods []corev1.Pod) int32 {
	var n int64
	for i := range pods {
		for _, s := range pods[i].Status.ContainerStatuses {
			n += int64(max(s.RestartCount, 0))
		}
		for _, s := range pods[i].Status.InitContainerStatuses {
			n += int64(max(s.RestartCount, 0))
		}
		if n >= math.MaxInt32 {
			return math.MaxInt32
		}
	}
	return int32(n)
}

func computeKstatus(v Verdict, u *unstructured.Unstructured) (out Verdict) {
	// kstatus reads arbitrary content; never let a malformed object panic
	// the caller.
	defer func() {
		if r := recover(); r != nil {
			out = pending(v, ReasonUnknown, fmt.Sprintf("cannot compute status: %v", r))
		}
	}()
	res, err := kstatus.Compute(u)
	if err != nil {
		return pending(v, ReasonUnknown, fmt.Sprintf("cannot compute status: %v", err))
	}
	// kstatus puts the object's own reason and message in the Reconciling or
	// Stalled condition it derives; its Message is a summary.
	reason, condMsg := "", ""
	for _, c := range res.Conditions {
		if c.Reason != "" || c.Message != "" {
			reason, condMsg = c.Reason, c.Message
			break
		}
	}
	switch res.Status {
	case kstatus.CurrentStatus:
		v.State, v.Reason, v.Message = Healthy, ReasonHealthy, res.Message
		return v
	case kstatus.FailedStatus:
		if reason == "" {
			reason = ReasonFailed
		}
		msg := res.Message
		if condMsg != "" {
			msg = condMsg
		}
		return failed(v, reason, msg)
	case kstatus.InProgressStatus:
		if reason == "" {
			reason = ReasonProgressing
		}
		return pending(v, reason, res.Message)
	case kstatus.TerminatingStatus:
		return pending(v, ReasonTerminating, res.Message)
	default:
		return pending(v, ReasonUnknown, res.Message)
	}
}

// workflow: Argo Workflows Workflow.
func workflow(v Verdict, o map[string]any) Verdict {
	phase := str(o, "status", "phase")
	msg := str(o, "status", "message")
	switch phase {
	case "Succeeded":
		v.State, v.Reason, v.Message = Healthy, ReasonHealthy, msg
		return v
	case "Failed", "Error":
		if msg == "" {
			msg = "workflow " + phase
		}
		return failed(v, ReasonFailed, msg)
	case "":
		return pending(v, ReasonNotObserved, "workflow has no phase yet")
	default:
		if msg == "" {
			msg = "workflow phase " + phase
		}
		return pending(v, ReasonProgressing, msg)
	}
}

// testWorkflowExecution: Testkube TestWorkflowExecution. The Testkube
// controller starts an execution when metadata.generation changes and records
// it in status.generation; status.latestExecution.result.status is one of
// queued, running, paused, passed, failed, aborted.
func testWorkflowExecution(v Verdict, o map[string]any) Verdict {
	gen, _ := integer(o, "metadata", "generation")
	sgen, _ := integer(o, "status", "generation")
	if gen != 0 && sgen != gen {
		return pending(v, ReasonNotObserved, fmt.Sprintf(
			"execution for generation %d not started yet (status generation %d)", gen, sgen))
	}
	result := obj(o, "status", "latestExecution", "result")
	status := str(result, "status")
	switch status {
	case "passed":
		v.State, v.Reason, v.Message = Healthy, ReasonHealthy, "test workflow passed"
		return v
	case "failed", "aborted":
		return failed(v, ReasonFailed, twMessage(o, result, status))
	case "":
		if e := str(o, "status", "error"); e != "" {
			return failed(v, ReasonFailed, e)
		}
		return pending(v, ReasonNotObserved, "no execution result yet")
	default:
		return pending(v, ReasonProgressing, "test workflow "+status)
	}
}

func twMessage(o, result map[string]any, status string) string {
	if e := str(o, "status", "error"); e != "" {
		return e
	}
	if e := str(result, "initialization", "errorMessage"); e != "" {
		return e
	}
	// Steps are a map keyed by step ref; report a failed step
	// deterministically (the smallest ref with an error message).
	best, bestMsg := "", ""
	for ref, s := range obj(result, "steps") {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		if e := str(m, "errorMessage"); e != "" && (bestMsg == "" || ref < best) {
			best, bestMsg = ref, e
		}
	}
	if bestMsg != "" {
		return fmt.Sprintf("step %s: %s", best, bestMsg)
	}
	name := str(o, "status", "latestExecution", "name")
	if name == "" {
		return "test workflow " + status
	}
	return fmt.Sprintf("test workflow execution %s %s", name, status)
}

// capiCluster: Cluster API Cluster, v1beta2 (storage) or v1beta1.
func capiCluster(v Verdict, o map[string]any) Verdict {
	gen, _ := integer(o, "metadata", "generation")
	if og, ok := integer(o, "status", "observedGeneration"); ok && gen != 0 && og != gen {
		return pending(v, ReasonNotObserved, fmt.Sprintf(
			"generation %d not yet observed (observed %d)", gen, og))
	}
	phase := str(o, "status", "phase")
	failMsg := str(o, "status", "failureMessage")
	if failMsg == "" {
		failMsg = str(o, "status", "deprecated", "v1beta1", "failureMessage")
	}
	if phase == "Failed" || failMsg != "" {
		if failMsg == "" {
			failMsg = "cluster phase Failed"
		}
		return failed(v, ReasonFailed, failMsg)
	}
	cs := conditions(o, "status", "conditions")
	c := findCond(cs, "Available")
	if c == nil {
		c = findCond(conditions(o, "status", "v1beta2", "conditions"), "Available")
	}
	if c == nil {
		c = findCond(cs, "Ready")
	}
	if c != nil {
		if c.Status == "True" {
			v.State, v.Reason, v.Message = Healthy, ReasonHealthy, c.Message
			return v
		}
		reason := c.Reason
		if reason == "" {
			reason = ReasonProgressing
		}
		msg := c.Message
		if msg == "" {
			msg = fmt.Sprintf("%s=%s", c.Type, c.Status)
		}
		return pending(v, reason, msg)
	}
	if phase == "Provisioned" {
		v.State, v.Reason, v.Message = Healthy, ReasonHealthy, "cluster phase Provisioned"
		return v
	}
	if phase == "" {
		return pending(v, ReasonNotObserved, "cluster has no phase yet")
	}
	return pending(v, ReasonProgressing, "cluster phase "+phase)
}

// crossplane: resources with Crossplane's Ready and Synced conditions.
func crossplane(v Verdict, o map[string]any) Verdict {
	gen, _ := integer(o, "metadata", "generation")
	cs := conditions(o, "status", "conditions")
	synced := findCond(cs, "Synced")
	ready := findCond(cs, "Ready")
	if synced.ObservedGeneration != 0 && gen != 0 && synced.ObservedGeneration != gen {
		return pending(v, ReasonNotObserved, fmt.Sprintf(
			"Synced condition is for generation %d, object is at generation %d", synced.ObservedGeneration, gen))
	}
	if synced.Status == "False" {
		msg := synced.Message
		if msg == "" {
			msg = "Synced=False (" + synced.Reason + ")"
		}
		return failed(v, ReasonNotSynced, msg)
	}
	if ready != nil && ready.ObservedGeneration != 0 && gen != 0 && ready.ObservedGeneration != gen {
		return pending(v, ReasonNotObserved, fmt.Sprintf(
			"Ready condition is for generation %d, object is at generation %d", ready.ObservedGeneration, gen))
	}
	switch {
	case synced.Status == "True" && ready != nil && ready.Status == "True":
		v.State, v.Reason, v.Message = Healthy, ReasonHealthy, ready.Message
		return v
	case ready == nil:
		return pending(v, ReasonProgressing, "no Ready condition yet")
	case ready.Status != "True":
		reason := ready.Reason
		if reason == "" {
			reason = ReasonProgressing
		}
		return pending(v, reason, ready.Message)
	default:
		return pending(v, ReasonProgressing, "Synced="+synced.Status)
	}
}
