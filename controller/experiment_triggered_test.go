package controller_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// testkubeAPI plays Testkube's agent API, which cannot run here, for the
// one route Scribe reads: GET /v1/test-workflows/<name>/executions,
// answering a TestWorkflowExecutionsResult as Testkube 2.12 writes it
// (pkg/api/v1/testkube of github.com/kubeshop/testkube): totals, filtered
// and the execution summaries newest first, pageSize (default 100) a page.
type testkubeAPI struct {
	srv *httptest.Server
	mu  sync.Mutex
	// runs are the summaries by TestWorkflow name and number.
	runs map[string]map[int64]map[string]any
	// down answers 503, as a Service without a ready pod.
	down bool
}

func newTestkubeAPI(t *testing.T) *testkubeAPI {
	t.Helper()
	a := &testkubeAPI{runs: map[string]map[int64]map[string]any{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *testkubeAPI) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		http.Error(w, "no endpoints available for service \"testkube-api-server\"", http.StatusServiceUnavailable)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/test-workflows/")
	name, ok2 := strings.CutSuffix(rest, "/executions")
	if r.Method != http.MethodGet || !ok || !ok2 || strings.Contains(name, "/") {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"type":"about:blank","title":"Not Found","status":404}`))
		return
	}
	pageSize := 100
	if n, err := strconv.Atoi(r.URL.Query().Get("pageSize")); err == nil && n > 0 {
		pageSize = n
	}
	numbers := make([]int64, 0, len(a.runs[name]))
	totals := map[string]int32{"results": 0, "passed": 0, "failed": 0, "queued": 0, "running": 0}
	for n, x := range a.runs[name] {
		numbers = append(numbers, n)
		totals["results"]++
		if st, _ := x["result"].(map[string]any)["status"].(string); st == "passed" || st == "failed" || st == "queued" || st == "running" {
			totals[st]++
		}
	}
	slices.SortFunc(numbers, func(x, y int64) int { return int(y - x) })
	results := []any{}
	for _, n := range numbers[:min(pageSize, len(numbers))] {
		results = append(results, a.runs[name][n])
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"totals": totals, "filtered": totals, "results": results})
}

func (a *testkubeAPI) setDown(down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = down
}

// play records (or updates) run number of the TestWorkflow as Testkube
// lists it: id, name (<workflow>-<number>), number, scheduledAt,
// statusAt, the result's status and times (a time not reached yet is
// Go's zero time, which Testkube writes), the TestWorkflow it ran and the
// running context of whoever started it (a TestTrigger: actor type
// testtrigger named after the trigger, interface internal).
func (a *testkubeAPI) play(tw scribev1.ObjectIdentity, created time.Time, number int64, status, actorType, actorName, iface string) {
	scheduled := created.Add(time.Duration(number) * time.Minute)
	at := func(d time.Duration) string { return scheduled.Add(d).UTC().Format(time.RFC3339Nano) }
	const zero = "0001-01-01T00:00:00Z"
	result := map[string]any{"status": status, "predictedStatus": status, "queuedAt": at(time.Second), "startedAt": zero, "finishedAt": zero}
	if status != "queued" {
		result["startedAt"] = at(2 * time.Second)
	}
	statusAt := at(time.Second)
	switch status {
	case "passed", "failed", "aborted", "canceled":
		result["finishedAt"], result["duration"], result["durationMs"] = at(30*time.Second), "28s", int32(28000)
		result["totalDuration"], result["totalDurationMs"] = "28s", int32(28000)
		statusAt = at(30 * time.Second)
	case "running":
		statusAt = at(2 * time.Second)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs[tw.Name] == nil {
		a.runs[tw.Name] = map[int64]map[string]any{}
	}
	a.runs[tw.Name][number] = map[string]any{
		"id": fmt.Sprintf("6650a1b2c3d4e5f6a7b8%04d", number), "name": fmt.Sprintf("%s-%d", tw.Name, number), "number": number,
		"scheduledAt": at(0), "statusAt": statusAt, "result": result,
		"workflow":       map[string]any{"name": tw.Name, "namespace": tw.Namespace},
		"runningContext": map[string]any{"interface": map[string]any{"type": iface}, "actor": map[string]any{"name": actorName, "type": actorType}},
	}
}

// experimentEventMessages are the messages of the Experiment's Events of
// reason.
func (f *fixture) experimentEventMessages(t *testing.T, name, reason string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := f.e.c.List(f.ctx(), list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == scribev1.ExperimentKind && ev.Regarding.Name == name && ev.Reason == reason {
			msgs = append(msgs, ev.Note)
		}
	}
	return msgs
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
// evaluation with its TestTrigger completes on its own execution, even
// while Testkube's API cannot be read (a Warning names its address); then
// Testkube's API lists runs the trigger started: each is recorded in
// status.lastTriggeredRun, its end is an Event (Normal when it passed,
// Warning when it failed), and the Complete Experiment stays Complete with
// its four commits. The evaluation's own execution, listed too, is not a
// triggered run, nor a run of another trigger. A triggered run passed over
// by the next before its end is a Warning; one that leaves the list before
// its end is read is a Warning and is not left recorded as running.
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
	api := newTestkubeAPI(t)
	api.setDown(true)
	// Nothing in the cluster changes when the trigger starts a run: the
	// API is read every WatchedPoll.
	startManager(t, f.e.cfg, controller.CacheOptions(map[string]cache.Config{f.ns: {}, "flux-system": {}, scribev1.DefaultTestkubeNamespace: {}}), nil,
		controller.Options{Poll: 150 * time.Millisecond, WatchedPoll: 200 * time.Millisecond, Concurrency: 2, CommitInterval: -1,
			TestkubeAPI: api.srv.URL})

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
	created := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

	// Testkube's API does not answer: a Warning names its address; the
	// evaluation's own execution passes: Complete all the same. Testkube
	// lists it, started by the TestWorkflowExecution: not a triggered run.
	waitFor(t, "a Warning naming Testkube's API", func() (bool, string) {
		msgs := f.experimentEventMessages(t, name, controller.ReasonTriggeredRunsUnread)
		want := api.srv.URL + "/v1/test-workflows/" + tw.Name + "/executions"
		return len(msgs) > 0 && strings.Contains(msgs[0], want) && strings.Contains(msgs[0], "503"), fmt.Sprintf("messages %q, want %q", msgs, want)
	})
	f.waitPhase(t, name, scribev1.ExperimentReady)
	f.playTestkube(t, run, testkubeRun{status: "passed", steps: []string{"passed", "passed", "passed", "passed"}})
	f.waitPhase(t, name, scribev1.ExperimentComplete)
	api.setDown(false)
	api.play(tw, created, 1, "passed", "testworkflowexecution", run.Name, "internal")
	// Another TestTrigger's run of the same TestWorkflow is not this one's.
	api.play(tw, created, 2, "failed", "testtrigger", "someone-elses-trigger", "internal")
	f.holdsPhase(t, name, scribev1.ExperimentComplete, time.Second)
	if e = f.experiment(t, name); e.Status.LastTriggeredRun != nil {
		t.Fatalf("the evaluation's own execution, or another trigger's, recorded as a triggered run: %+v", e.Status.LastTriggeredRun)
	}

	// An agent Deployment changes; the trigger starts run 3; it runs.
	api.play(tw, created, 3, "running", "testtrigger", trigger.Name, "internal")
	waitFor(t, "the triggered run recorded, running", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		return r != nil && r.Name == tw.Name+"-3" && r.Number == 3 && r.Status == "running" && r.ScheduledAt != nil && r.FinishedAt == nil, fmt.Sprintf("%s; lastTriggeredRun %+v", expState(e), r)
	})
	// It passes: recorded, with a Normal Event.
	api.play(tw, created, 3, "passed", "testtrigger", trigger.Name, "internal")
	waitFor(t, "the triggered run recorded passed, with its Event", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		seen := f.experimentEvents(t, name)
		return r != nil && r.Name == tw.Name+"-3" && r.Status == "passed" && r.FinishedAt != nil && seen["Normal "+controller.ReasonTriggeredRunPassed] == 1,
			fmt.Sprintf("lastTriggeredRun %+v; events %v", r, seen)
	})
	// The next one fails: recorded, with a Warning.
	api.play(tw, created, 4, "failed", "testtrigger", trigger.Name, "internal")
	waitFor(t, "the next triggered run recorded failed, with a Warning", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		seen := f.experimentEvents(t, name)
		return r != nil && r.Name == tw.Name+"-4" && r.Number == 4 && r.Status == "failed" && seen["Warning "+controller.ReasonTriggeredRunFailed] == 1,
			fmt.Sprintf("lastTriggeredRun %+v; events %v", r, seen)
	})
	if r := e.Status.LastTriggeredRun; r.Message == "" || r.FinishedAt == nil {
		t.Fatalf("lastTriggeredRun %+v: no message or end", r)
	}

	// Run 5 starts; run 6 is listed while run 5 still runs: a Warning
	// says run 5's outcome is not followed, and run 6 is recorded.
	api.play(tw, created, 5, "running", "testtrigger", trigger.Name, "internal")
	waitFor(t, "run 5 recorded, running", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		return r != nil && r.Number == 5 && r.Status == "running", fmt.Sprintf("lastTriggeredRun %+v", r)
	})
	api.play(tw, created, 6, "queued", "testtrigger", trigger.Name, "internal")
	waitFor(t, "run 6 recorded, run 5 reported unobserved", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		seen := f.experimentEvents(t, name)
		return r != nil && r.Number == 6 && r.Status == "queued" && seen["Warning "+controller.ReasonTriggeredRunUnobserved] == 1,
			fmt.Sprintf("lastTriggeredRun %+v; events %v", r, seen)
	})
	// A user's 100 runs push run 6 off the page before its end is read:
	// run 6 is recorded unknown, not left queued.
	for n := int64(7); n <= 106; n++ {
		api.play(tw, created, n, "passed", "user", "someone", "cli")
	}
	waitFor(t, "run 6 recorded unknown, with a Warning", func() (bool, string) {
		e = f.experiment(t, name)
		r := e.Status.LastTriggeredRun
		seen := f.experimentEvents(t, name)
		return r != nil && r.Number == 6 && r.Status == controller.TriggeredRunUnknown && seen["Warning "+controller.ReasonTriggeredRunUnobserved] == 2,
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
