package controller_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// playTestWorkflowRun writes an execution's summary into the
// TestWorkflow's status.latestExecution through the status subresource,
// in the shape the CRD gives it: id, name (<workflow>-<number>), number,
// scheduledAt, statusAt, the result's status and times, the TestWorkflow
// it ran and the running context of whoever started it (a TestTrigger:
// actor type testtrigger named after the trigger, interface internal).
// Testkube 2.12, the CRDs' version, declares that field deprecated and
// does not write it (its TestWorkflow status sync writes only health):
// what is played here is the field, not a release's behaviour.
func (f *fixture) playTestWorkflowRun(t *testing.T, id scribev1.ObjectIdentity, number int64, status, actorType, actorName, iface string) {
	t.Helper()
	ctx := f.ctx()
	tw := &unstructured.Unstructured{}
	tw.SetAPIVersion(id.APIVersion)
	tw.SetKind(id.Kind)
	if err := f.e.c.Get(ctx, types.NamespacedName{Namespace: id.Namespace, Name: id.Name}, tw); err != nil {
		t.Fatal(err)
	}
	scheduled := tw.GetCreationTimestamp().Add(time.Duration(number) * time.Hour)
	at := func(d time.Duration) string { return scheduled.Add(d).UTC().Format(time.RFC3339) }
	// The summary's durations are always written (0 until it ends).
	result := map[string]any{"status": status, "predictedStatus": status, "queuedAt": at(time.Second), "durationMs": int64(0), "pausedMs": int64(0), "totalDurationMs": int64(0)}
	if status != "queued" {
		result["startedAt"] = at(2 * time.Second)
	}
	statusAt := at(time.Second)
	switch status {
	case "passed", "failed", "aborted":
		result["finishedAt"], result["duration"], result["durationMs"] = at(30*time.Second), "28s", int64(28000)
		result["totalDuration"], result["totalDurationMs"] = "29s", int64(29000)
		statusAt = at(30 * time.Second)
	case "running":
		statusAt = at(2 * time.Second)
	}
	labels, _, _ := unstructured.NestedMap(tw.Object, "metadata", "labels")
	tw.Object["status"] = map[string]any{
		"latestExecution": map[string]any{
			"id": fmt.Sprintf("6650a1b2c3d4e5f6a7b8c9%02d", number), "name": fmt.Sprintf("%s-%d", id.Name, number), "number": number,
			"scheduledAt": at(0), "statusAt": statusAt, "result": result,
			"workflow": map[string]any{"name": id.Name, "namespace": id.Namespace, "labels": labels},
			"runningContext": map[string]any{
				"interface": map[string]any{"type": iface},
				"actor":     map[string]any{"name": actorName, "type": actorType},
			},
		},
	}
	if err := f.e.c.Status().Update(ctx, tw); err != nil {
		t.Fatalf("write the TestWorkflow's latest execution as Testkube does: %v", err)
	}
}

// experimentEvents counts the Events of the Experiment by "Type Reason".
func (f *fixture) experimentEvents(t *testing.T, name string) map[string]int {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := f.e.c.List(f.ctx(), list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, ev := range list.Items {
		if ev.Regarding.Kind == scribev1.ExperimentKind && ev.Regarding.Name == name {
			seen[ev.Type+" "+ev.Reason] += max(int(ev.DeprecatedCount), 1)
		}
	}
	return seen
}

// TestExperimentTestkubeTriggeredRunIsReadBackAfterComplete: an agent
// evaluation with its TestTrigger completes on its own execution; then
// Testkube records, in the TestWorkflow's status, runs the trigger
// started: each is recorded in status.lastTriggeredRun, its end is an
// Event (Normal when it passed, Warning when it failed), and the Complete
// Experiment stays Complete with its four commits. The evaluation's own
// execution, recorded there too, is not a triggered run. A triggered run
// followed by another execution before its end is read is a Warning, and
// is not left recorded as running.
func TestExperimentTestkubeTriggeredRunIsReadBackAfterComplete(t *testing.T) {
	f := newFixture(t)
	expInstallCRDs(t, f, testkubeCRDs...)
	if err := f.e.c.Create(f.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scribev1.DefaultTestkubeNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	f.publishCatalog(t)
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	// Testkube's namespace is watched (as --watch-namespaces must list
	// it): a status Testkube writes there wakes the Experiment, which
	// nothing else brings back once Complete (the safety-net poll is
	// longer than the test).
	startManager(t, f.e.cfg, controller.CacheOptions(map[string]cache.Config{f.ns: {}, "flux-system": {}, scribev1.DefaultTestkubeNamespace: {}}), nil,
		controller.Options{Poll: 150 * time.Millisecond, WatchedPoll: time.Hour, Concurrency: 2, CommitInterval: -1})

	const name = "eval-triggered"
	if err := f.e.c.Create(f.ctx(), testkubeExperiment(f.ns, name)); err != nil {
		t.Fatal(err)
	}
	dir := "clusters/dev/" + f.ns + "/experiment/" + name + "/"
	ks := kustomizationName("Experiment", f.ns, name)
	rev1 := f.applyStage(t, name, scribev1.StageClusters)
	rev2 := f.applyStage(t, name, scribev1.StageComponents)
	rev3 := f.waitStage(t, name, scribev1.StageWorkflowTemplates).Status.Revision
	f.applyAdded(t, rev2, rev3, dir)
	f.playFlux(t, ks, rev3, true, "", "")
	f.playTemplate(t, name, "", "agent-eval", true, "", "")
	e := f.waitStage(t, name, scribev1.StageWorkflow)
	rev4 := e.Status.Revision
	f.applyAdded(t, rev3, rev4, dir)
	f.playFlux(t, ks, rev4, true, "", "")
	var run, tw, trigger scribev1.ObjectIdentity
	for _, o := range e.Status.GeneratedResources.Objects {
		switch o.Kind {
		case "TestWorkflowExecution":
			run = o
		case "TestWorkflow":
			tw = o
		case "TestTrigger":
			trigger = o
		}
	}
	if run.Name == "" || tw.Name == "" || trigger.Name == "" {
		t.Fatalf("stage 4 generates no execution, TestWorkflow or TestTrigger: %+v", e.Status.GeneratedResources.Objects)
	}

	// The evaluation's own execution passes: Complete. Testkube records
	// it in the TestWorkflow too, started by the TestWorkflowExecution:
	// not a triggered run.
	f.waitPhase(t, name, scribev1.ExperimentReady)
	f.playTestkube(t, run, testkubeRun{status: "passed", steps: []string{"passed", "passed", "passed", "passed"}})
	f.playTestWorkflowRun(t, tw, 1, "passed", "testworkflowexecution", run.Name, "internal")
	f.waitPhase(t, name, scribev1.ExperimentComplete)
	f.holdsPhase(t, name, scribev1.ExperimentComplete, time.Second)
	if e = f.experiment(t, name); e.Status.LastTriggeredRun != nil {
		t.Fatalf("the evaluation's own execution recorded as a triggered run: %+v", e.Status.LastTriggeredRun)
	}

	// An agent Deployment changes; the trigger starts run 2; it runs.
	f.playTestWorkflowRun(t, tw, 2, "running", "testtrigger", trigger.Name, "internal")
	waitFor(t, "the triggered run recorded, running", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		return r != nil && r.Name == tw.Name+"-2" && r.Number == 2 && r.Status == "running" && r.ScheduledAt != nil && r.FinishedAt == nil, fmt.Sprintf("%s; lastTriggeredRun %+v", expState(e), r)
	})
	// It passes: recorded, with a Normal Event.
	f.playTestWorkflowRun(t, tw, 2, "passed", "testtrigger", trigger.Name, "internal")
	waitFor(t, "the triggered run recorded passed, with its Event", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		seen := f.experimentEvents(t, name)
		return r != nil && r.Name == tw.Name+"-2" && r.Status == "passed" && r.FinishedAt != nil && seen["Normal "+controller.ReasonTriggeredRunPassed] == 1,
			fmt.Sprintf("lastTriggeredRun %+v; events %v", r, seen)
	})
	// The next one fails: recorded, with a Warning.
	f.playTestWorkflowRun(t, tw, 3, "failed", "testtrigger", trigger.Name, "internal")
	waitFor(t, "the next triggered run recorded failed, with a Warning", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		seen := f.experimentEvents(t, name)
		return r != nil && r.Name == tw.Name+"-3" && r.Number == 3 && r.Status == "failed" && seen["Warning "+controller.ReasonTriggeredRunFailed] == 1,
			fmt.Sprintf("lastTriggeredRun %+v; events %v", r, seen)
	})
	if r := e.Status.LastTriggeredRun; r.Message == "" || r.FinishedAt == nil {
		t.Fatalf("lastTriggeredRun %+v: no message or end", r)
	}

	// Run 4 starts; run 5 is the latest execution before run 4's end is
	// read: a Warning says run 4's outcome was not read back, and run 5
	// is recorded.
	f.playTestWorkflowRun(t, tw, 4, "running", "testtrigger", trigger.Name, "internal")
	waitFor(t, "run 4 recorded, running", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		return r != nil && r.Number == 4 && r.Status == "running", fmt.Sprintf("lastTriggeredRun %+v", r)
	})
	f.playTestWorkflowRun(t, tw, 5, "queued", "testtrigger", trigger.Name, "internal")
	waitFor(t, "run 5 recorded, run 4 reported unobserved", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		seen := f.experimentEvents(t, name)
		return r != nil && r.Number == 5 && r.Status == "queued" && seen["Warning "+controller.ReasonTriggeredRunUnobserved] == 1,
			fmt.Sprintf("lastTriggeredRun %+v; events %v", r, seen)
	})
	// A user's run 6 is the latest before run 5's end is read: run 5 is
	// recorded unknown, not left queued.
	f.playTestWorkflowRun(t, tw, 6, "running", "user", "someone", "cli")
	waitFor(t, "run 5 recorded unknown, with a Warning", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		seen := f.experimentEvents(t, name)
		return r != nil && r.Number == 5 && r.Status == controller.TriggeredRunUnknown && seen["Warning "+controller.ReasonTriggeredRunUnobserved] == 2,
			fmt.Sprintf("lastTriggeredRun %+v; events %v", r, seen)
	})

	// A later re-evaluation: the Experiment's outcome is its own
	// execution's, and nothing is committed for it.
	f.holdsPhase(t, name, scribev1.ExperimentComplete, time.Second)
	e = f.experiment(t, name)
	if c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready after a triggered run failed: %s", expState(e))
	}
	if e.Status.Workflow == nil || e.Status.Workflow.Name != run.Name || e.Status.Workflow.Phase != "passed" {
		t.Fatalf("status.workflow after the triggered runs: %+v", e.Status.Workflow)
	}
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != 4 || commits[0] != rev1 || commits[3] != rev4 {
		t.Fatalf("commits %v after the triggered runs, want the four stages'", commits)
	}
	if seen := f.experimentEvents(t, name); seen["Normal "+controller.ReasonTriggeredRunPassed] != 1 || seen["Warning "+controller.ReasonTriggeredRunFailed] != 1 || seen["Warning "+controller.ReasonTriggeredRunUnobserved] != 2 {
		t.Fatalf("events %v: each triggered run's end, or its loss, is one Event", seen)
	}
}
