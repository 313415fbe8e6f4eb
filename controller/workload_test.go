package controller_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

func version(name string) scribev1.Version {
	return scribev1.Version{Name: name, Image: "ghcr.io/example/web:" + name}
}

func workload(ns string, versions ...string) *scribev1.Workload {
	w := &scribev1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: scribev1.WorkloadSpec{
			Service: scribev1.ServiceSpec{Ports: []scribev1.ServicePort{{Name: "http", Port: 80, TargetPort: 8080}}},
			Traffic: &scribev1.Traffic{ParentRefs: []scribev1.ParentReference{{Name: "public", Namespace: "gateway-system"}}, Hostnames: []string{"web.example.com"}},
			Rollout: &scribev1.Rollout{Strategy: "canary", Steps: []scribev1.RolloutStep{{Weight: 10}, {Weight: 50}, {Weight: 100}}},
		},
	}
	for _, v := range versions {
		w.Spec.Versions = append(w.Spec.Versions, version(v))
	}
	return w
}

func (f *fixture) workload(t *testing.T) *scribev1.Workload {
	t.Helper()
	w := &scribev1.Workload{}
	if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, w); err != nil {
		t.Fatal(err)
	}
	return w
}

func describe(w *scribev1.Workload) string {
	ready := ""
	for _, c := range w.Status.Conditions {
		if c.Type == scribev1.ReadyCondition {
			ready = fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("phase=%s stable=%s canary=%s step=%d traffic=%v revision=%.12s ready=%s", w.Status.Phase, w.Status.StableVersion, w.Status.CanaryVersion, w.Status.Step, w.Status.Traffic, w.Status.Revision, ready)
}

// waitWorkload waits until cond holds for the Workload.
func (f *fixture) waitWorkload(t *testing.T, what string, cond func(w *scribev1.Workload) bool) *scribev1.Workload {
	t.Helper()
	var last *scribev1.Workload
	waitFor(t, what, func() (bool, string) {
		w := &scribev1.Workload{}
		if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, w); err != nil {
			return false, err.Error()
		}
		last = w
		return cond(w), describe(w)
	})
	return last
}

// routeWeights reads the HTTPRoute at a commit: "web-v1=90,web-v2=10".
func (f *fixture) routeWeights(t *testing.T, commit string) string {
	t.Helper()
	route := f.fileAt(t, commit, "clusters/dev/"+f.ns+"/workload/web/httproute-web.yaml")
	names := regexp.MustCompile(`name: (web-v\d+)\n\s+port: \d+\n\s+weight: (\d+)`).FindAllStringSubmatch(route, -1)
	var parts []string
	for _, m := range names {
		parts = append(parts, m[1]+"="+m[2])
	}
	return strings.Join(parts, ",")
}

func (f *fixture) startWithRepository(t testing.TB, concurrency ...int) func() {
	t.Helper()
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	stop := startController(t, f.e, f.ns, concurrency...)
	waitFor(t, "the Repository to be Ready", func() (bool, string) {
		r := &scribev1.Repository{}
		if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "default"}, r); err != nil {
			return false, err.Error()
		}
		for _, c := range r.Status.Conditions {
			if c.Type == scribev1.ReadyCondition {
				return c.Status == metav1.ConditionTrue, c.Message
			}
		}
		return false, "no Ready condition"
	})
	return stop
}

// deployStable brings a Workload with v1 to Healthy, playing Flux.
func (f *fixture) deployStable(t *testing.T, w *scribev1.Workload) string {
	t.Helper()
	if err := f.e.c.Create(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
	got := f.waitWorkload(t, "the first commit", func(w *scribev1.Workload) bool { return w.Status.Revision != "" })
	ks := kustomizationName("Workload", f.ns, "web")
	f.deploymentReady(t, "web-v1", true)
	f.playFlux(t, ks, got.Status.Revision, true, "", "")
	f.waitWorkload(t, "v1 stable and healthy", func(w *scribev1.Workload) bool {
		return w.Status.Phase == scribev1.WorkloadHealthy && w.Status.StableVersion == "v1"
	})
	return got.Status.Revision
}

// canaryWeight is the canary's weight in status, -1 without a canary.
func canaryWeight(w *scribev1.Workload) int32 {
	for _, tr := range w.Status.Traffic {
		if tr.Version == w.Status.CanaryVersion && w.Status.CanaryVersion != "" {
			return tr.Weight
		}
	}
	return -1
}

// warmUp plays a new canary's warm-up: its commit at weight 0 is applied
// and its Deployment available, so the first step is committed next.
func (f *fixture) warmUp(t *testing.T, canary string) string {
	t.Helper()
	w := f.waitWorkload(t, canary+" committed at weight 0", func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == canary && w.Status.Revision != "" && canaryWeight(w) == 0
	})
	if got := f.routeWeights(t, w.Status.Revision); !strings.HasSuffix(got, ",web-"+canary+"=0") {
		t.Fatalf("the warm-up commit routes %q, want %s at 0", got, canary)
	}
	f.deploymentReady(t, "web-"+canary, true)
	f.playFlux(t, kustomizationName("Workload", f.ns, "web"), w.Status.Revision, true, "", "")
	return w.Status.Revision
}

func (f *fixture) addVersion(t *testing.T, v string, mutate func(w *scribev1.Workload)) {
	t.Helper()
	w := f.workload(t)
	w.Spec.Versions = append(w.Spec.Versions, version(v))
	if mutate != nil {
		mutate(w)
	}
	if err := f.e.c.Update(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
}

func TestWorkloadCanaryCommitsEachStepOnlyAfterThePreviousIsAppliedAndHealthy(t *testing.T) {
	f := newFixture(t)
	f.startWithRepository(t)
	first := f.deployStable(t, workload(f.ns, "v1"))
	if got := f.routeWeights(t, first); got != "web-v1=100" {
		t.Fatalf("first commit routes %q", got)
	}
	ks := kustomizationName("Workload", f.ns, "web")
	f.addVersion(t, "v2", nil)
	warm := f.warmUp(t, "v2")

	steps := []string{warm}
	for i, want := range []string{"web-v1=90,web-v2=10", "web-v1=50,web-v2=50", "web-v1=0,web-v2=100"} {
		w := f.waitWorkload(t, fmt.Sprintf("step %d committed", i+1), func(w *scribev1.Workload) bool {
			return w.Status.CanaryVersion == "v2" && int(w.Status.Step) == i && w.Status.Revision != "" && canaryWeight(w) > 0
		})
		rev := w.Status.Revision
		if got := f.routeWeights(t, rev); got != want {
			t.Fatalf("step %d commit %s routes %q, want %q", i+1, rev, got, want)
		}
		steps = append(steps, rev)
		// Not applied yet: the next step must not be committed. Give the
		// controller many polls to misbehave before playing Flux.
		time.Sleep(time.Second)
		if w := f.workload(t); int(w.Status.Step) != i || w.Status.Revision != rev {
			t.Fatalf("moved on before step %d was applied: %s", i+1, describe(w))
		}
		if c := f.scribeCommits(t, "Workload/"+f.ns+"/web"); c[len(c)-1] != rev {
			t.Fatalf("a commit after step %d appeared before it was applied: %v", i+1, c)
		}
		f.deploymentReady(t, "web-v2", true)
		f.playFlux(t, ks, rev, true, "", "")
	}
	w := f.waitWorkload(t, "v2 promoted", func(w *scribev1.Workload) bool {
		return w.Status.StableVersion == "v2" && w.Status.CanaryVersion == "" && w.Status.Revision != ""
	})
	// The promotion makes v2 the stable version (the stable Service follows
	// it); v1 stays deployed at weight 0 until it leaves spec.versions.
	f.playFlux(t, ks, w.Status.Revision, true, "", "")
	w = f.waitWorkload(t, "v2 healthy at the observed generation", func(w *scribev1.Workload) bool {
		return w.Status.Phase == scribev1.WorkloadHealthy && w.Status.ObservedGeneration == w.Generation
	})
	commits := f.scribeCommits(t, "Workload/"+f.ns+"/web")
	want := append(append([]string{first}, steps...), w.Status.Revision)
	if strings.Join(commits, " ") != strings.Join(want, " ") {
		t.Fatalf("Scribe's commits %v, want first, warm-up at 0, 10, 50, 100, promotion: %v", commits, want)
	}
	if got := f.routeWeights(t, w.Status.Revision); got != "web-v1=0,web-v2=100" {
		t.Errorf("promotion routes %q", got)
	}
}

func TestWorkloadFailingChecksPastThresholdRollBackWithExactlyOneCommit(t *testing.T) {
	f := newFixture(t)
	f.startWithRepository(t)
	f.deployStable(t, workload(f.ns, "v1"))
	ks := kustomizationName("Workload", f.ns, "web")
	f.addVersion(t, "v2", func(w *scribev1.Workload) {
		w.Spec.Rollout.Steps[0].Pause = scribev1.PauseFor(time.Hour)
		w.Spec.Rollout.Analysis = &scribev1.Analysis{
			Interval: &metav1.Duration{Duration: 200 * time.Millisecond}, Threshold: 2,
			Checks: []scribev1.Check{{Name: "restarts", Type: "restarts", Max: "1"}},
		}
	})
	f.warmUp(t, "v2")
	w := f.waitWorkload(t, "step 1 committed", func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.Step == 0 && w.Status.Revision != "" && canaryWeight(w) > 0
	})
	step1 := w.Status.Revision
	// v2 runs but its pod keeps crashing.
	f.deploymentReady(t, "web-v2", true)
	f.crashingPod(t, "web-v2")
	f.playFlux(t, ks, step1, true, "", "")
	w = f.waitWorkload(t, "rollback", func(w *scribev1.Workload) bool {
		return w.Status.Phase == scribev1.WorkloadRolledBack && w.Status.Revision != "" && w.Status.Revision != step1
	})
	rollback := w.Status.Revision
	if got := f.routeWeights(t, rollback); got != "web-v1=100,web-v2=0" {
		t.Fatalf("rollback commit routes %q", got)
	}
	if !strings.Contains(w.Status.Message, "7 restarts") {
		t.Errorf("status message %q does not give the failed check", w.Status.Message)
	}
	msg, _ := f.commitMessage(t, rollback)
	if !strings.Contains(msg, "rollback of v2") || !strings.Contains(msg, "restarts") {
		t.Errorf("rollback commit message lacks the reason:\n%s", msg)
	}
	// Applied: it stays rolled back, with no further commit.
	f.playFlux(t, ks, rollback, true, "", "")
	f.waitWorkload(t, "rolled back and settled", func(w *scribev1.Workload) bool {
		for _, c := range w.Status.Conditions {
			if c.Type == scribev1.ReadyCondition && c.Status == metav1.ConditionTrue {
				return w.Status.Phase == scribev1.WorkloadRolledBack
			}
		}
		return false
	})
	time.Sleep(time.Second)
	commits := f.scribeCommits(t, "Workload/"+f.ns+"/web")
	n := 0
	for _, c := range commits {
		if m, _ := f.commitMessage(t, c); strings.Contains(m, "rollback of v2") {
			n++
		}
	}
	if n != 1 || commits[len(commits)-1] != rollback {
		t.Fatalf("%d rollback commits (want exactly 1); commits %v", n, commits)
	}
}

func TestWorkloadControllerRestartedMidCanaryResumesAtTheSameStep(t *testing.T) {
	f := newFixture(t)
	stop := f.startWithRepository(t)
	f.deployStable(t, workload(f.ns, "v1"))
	ks := kustomizationName("Workload", f.ns, "web")
	f.addVersion(t, "v2", nil)
	f.warmUp(t, "v2")
	w := f.waitWorkload(t, "step 1 committed", func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.Step == 0 && w.Status.Revision != "" && canaryWeight(w) > 0
	})
	step1 := w.Status.Revision
	stop()
	before := f.scribeCommits(t, "Workload/"+f.ns+"/web")
	// Flux applies step 1 while Scribe is down.
	f.deploymentReady(t, "web-v2", true)
	f.playFlux(t, ks, step1, true, "", "")
	startController(t, f.e, f.ns)
	w = f.waitWorkload(t, "step 2 committed after the restart", func(w *scribev1.Workload) bool {
		return w.Status.Step == 1 && w.Status.Revision != "" && w.Status.Revision != step1
	})
	if got := f.routeWeights(t, w.Status.Revision); got != "web-v1=50,web-v2=50" {
		t.Fatalf("after the restart Scribe committed %q, want step 2 (50)", got)
	}
	after := f.scribeCommits(t, "Workload/"+f.ns+"/web")
	if len(after) != len(before)+1 {
		t.Fatalf("commits before restart %v, after %v: want exactly one new (step 2)", before, after)
	}
}

func TestWorkloadDeletionCommitsThePruneAndWaitsForTheApplier(t *testing.T) {
	f := newFixture(t)
	f.startWithRepository(t)
	f.deployStable(t, workload(f.ns, "v1"))
	ks := kustomizationName("Workload", f.ns, "web")
	if err := f.e.c.Delete(f.ctx(), f.workload(t)); err != nil {
		t.Fatal(err)
	}
	w := f.waitWorkload(t, "the delete commit", func(w *scribev1.Workload) bool { return w.Status.Phase == scribev1.WorkloadDeleting })
	if f.fileAt(t, w.Status.Revision, "clusters/dev/"+f.ns+"/workload/web/kustomization.yaml") != "" {
		t.Fatalf("the delete commit %s still has the Workload's files", w.Status.Revision)
	}
	time.Sleep(time.Second)
	if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, &scribev1.Workload{}); err != nil {
		t.Fatalf("the finalizer was released before the applier pruned: %v", err)
	}
	// Flux prunes: the root Kustomization removes the per-CR Kustomization.
	f.deleteKustomization(t, ks)
	waitFor(t, "the Workload to be gone", func() (bool, string) {
		err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, &scribev1.Workload{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func TestWorkloadBadInputSaysWhyAndCommitsNothing(t *testing.T) {
	f := newFixture(t)
	f.startWithRepository(t)
	head := f.head(t)
	// A Repository whose Secret has the wrong password for a server that
	// wants one.
	f.srv.RequireBasicAuth("scribe", "s3cret")
	t.Cleanup(func() { f.srv.RequireBasicAuth("", "") })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-creds", Namespace: f.ns, Annotations: map[string]string{scribev1.AllowedURLsAnnotation: f.repo.Spec.Git.URL}}, Data: map[string][]byte{"username": []byte("scribe"), "password": []byte("wrong")}}
	if err := f.e.c.Create(f.ctx(), secret); err != nil {
		t.Fatal(err)
	}
	bad := f.repo.DeepCopy()
	bad.ObjectMeta = metav1.ObjectMeta{Name: "badcreds", Namespace: f.ns}
	bad.Spec.Git.SecretRef = &scribev1.LocalObjectReference{Name: "git-creds"}
	if err := f.e.c.Create(f.ctx(), bad); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, repo string
		reason     string
		msg        string
		stalled    bool
	}{
		{"missing repository", "nope", controller.ReasonRepositoryNotFound, "repository " + f.ns + "/nope not found", true},
		{"repository with bad credentials", "badcreds", controller.ReasonRepositoryNotReady, "refused the credentials", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(f.ns, "v1")
			w.Name = tc.repo
			w.Spec.RepositoryRef = &scribev1.LocalObjectReference{Name: tc.repo}
			if err := f.e.c.Create(f.ctx(), w); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "Ready=False with reason "+tc.reason, func() (bool, string) {
				got := &scribev1.Workload{}
				if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: w.Name}, got); err != nil {
					return false, err.Error()
				}
				var ready, stalled *metav1.Condition
				for i, c := range got.Status.Conditions {
					switch c.Type {
					case scribev1.ReadyCondition:
						ready = &got.Status.Conditions[i]
					case scribev1.StalledCondition:
						stalled = &got.Status.Conditions[i]
					}
				}
				ok := ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == tc.reason &&
					strings.Contains(ready.Message, tc.msg) && (stalled != nil && stalled.Status == metav1.ConditionTrue) == tc.stalled
				return ok, describe(got)
			})
		})
	}
	if now := f.head(t); now != head {
		t.Fatalf("bad input produced a commit: main moved from %s to %s", head, now)
	}
}

func TestWorkloadMovesOnWatchedReadBackWithoutPolling(t *testing.T) {
	f := newFixture(t)
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	// Health is re-read only once an hour: only watch events can move it.
	startControllerWith(t, f.e, f.ns, controller.Options{Poll: time.Hour, Concurrency: 2})
	if err := f.e.c.Create(f.ctx(), workload(f.ns, "v1")); err != nil {
		t.Fatal(err)
	}
	w := f.waitWorkload(t, "the first commit", func(w *scribev1.Workload) bool { return w.Status.Revision != "" })
	f.playFlux(t, kustomizationName("Workload", f.ns, "web"), w.Status.Revision, true, "", "")
	// The Deployment as Flux applies it, with render's label.
	f.deploymentReady(t, "web-v1", true)
	d := &appsv1.Deployment{}
	if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web-v1"}, d); err != nil {
		t.Fatal(err)
	}
	d.Labels = map[string]string{"scribe.dev/workload": "web"}
	if err := f.e.c.Update(f.ctx(), d); err != nil {
		t.Fatal(err)
	}
	f.waitWorkload(t, "healthy from watch events alone", func(w *scribev1.Workload) bool { return w.Status.Phase == scribev1.WorkloadHealthy })
}

func TestWorkloadDecommissionsADrainedVersionAfterTheGracePeriod(t *testing.T) {
	f := newFixture(t)
	f.startWithRepository(t)
	w0 := workload(f.ns, "v1")
	w0.Spec.Rollout = nil // switch at once
	w0.Spec.Decommission = &scribev1.Decommission{GracePeriod: &metav1.Duration{Duration: 2 * time.Second}}
	f.deployStable(t, w0)
	ks := kustomizationName("Workload", f.ns, "web")
	f.addVersion(t, "v2", nil)
	w := f.waitWorkload(t, "v2 committed", func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.Revision != ""
	})
	f.deploymentReady(t, "web-v2", true)
	f.playFlux(t, ks, w.Status.Revision, true, "", "")
	w = f.waitWorkload(t, "v2 promoted and committed", func(w *scribev1.Workload) bool {
		return w.Status.StableVersion == "v2" && w.Status.Revision != ""
	})
	promotion := w.Status.Revision
	v1File := "clusters/dev/" + f.ns + "/workload/web/deployment-web-v1.yaml"
	if f.fileAt(t, promotion, v1File) == "" {
		t.Fatalf("v1 was removed at the promotion, before its grace period")
	}
	f.playFlux(t, ks, promotion, true, "", "")
	w = f.waitWorkload(t, "v1 decommissioned", func(w *scribev1.Workload) bool {
		return w.Status.Revision != "" && w.Status.Revision != promotion
	})
	if f.fileAt(t, w.Status.Revision, v1File) != "" {
		t.Fatalf("the decommission commit %s still deploys v1", w.Status.Revision)
	}
	if f.fileAt(t, w.Status.Revision, "clusters/dev/"+f.ns+"/workload/web/deployment-web-v2.yaml") == "" {
		t.Fatal("the decommission commit removed v2 too")
	}
	if d := w.Status.DrainStartedAt; d == nil || time.Since(d.Time) < 2*time.Second {
		t.Fatalf("decommissioned before the grace period: drain started %v", d)
	}
}
