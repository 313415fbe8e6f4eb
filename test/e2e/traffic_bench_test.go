package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
)

// TestBenchCanaryStep is part of `make bench-e2e`: it reports, never
// asserts, how long a canary step takes through Flux, split where the loop
// can see it: the step's commit (status.revision) -> the route accepted by
// the gateway at the step's weights -> an analysis round passed -> the next
// step's commit. The same 20-step canary (weights 5, 10, ... 100, an
// availability check every second, no pause) runs on the real node (Traefik
// serving the route, Scribe in its pod, Prometheus scraping the pods) and on
// kwok (the played gateway, Scribe in the test process).
func TestBenchCanaryStep(t *testing.T) {
	benchChanges(t, 20)
	for _, onNode := range []bool{true, false} {
		name := map[bool]string{true: "real-node", false: "kwok"}[onNode]
		t.Run(name, func(t *testing.T) {
			ns := "bench"
			var s *Stack
			if onNode {
				s = newTrafficLoop(t, scribev1.ApplierFlux, ns)
			} else {
				s = newLoop(t, ns)
			}
			where := map[bool]string{true: "onNode node, Traefik", false: "kwok, played gateway"}[onNode]
			toRoute, toAnalysed, toNext, total := canarySteps(t, s, ns)
			t.Logf("RESULT canary step commit -> route accepted (%s): %s", where, stats(toRoute))
			t.Logf("RESULT canary step route accepted -> analysis passed, next step decided (%s): %s", where, stats(toAnalysed))
			t.Logf("RESULT canary step next step decided -> its commit (%s): %s", where, stats(toNext))
			t.Logf("RESULT canary step commit -> next commit (%s): %s", where, stats(total))
			if onNode {
				for _, p := range []string{"traefik", "prometheus"} {
					t.Logf("RESULT RSS %s after the canary: %d MiB", p, s.ProcessRSS(p)>>20)
				}
			}
		})
	}
}

// canarySteps walks a 20-step canary of v2 and times each step, the last
// one's next commit being the promotion.
func canarySteps(t *testing.T, s *Stack, ns string) (toRoute, toAnalysed, toNext, total []time.Duration) {
	ctx := context.Background()
	w := canaryWorkload(ns)
	var steps []scribev1.RolloutStep
	for wt := int32(5); wt <= 100; wt += 5 {
		steps = append(steps, scribev1.RolloutStep{Weight: wt})
	}
	w.Spec.Rollout.Steps = steps
	// A round also runs once a step is applied and before its pods are
	// Ready: ten rounds give a loaded machine's pods 10 s.
	w.Spec.Rollout.Analysis = &scribev1.Analysis{Interval: &metav1.Duration{Duration: time.Second}, Threshold: 10,
		Checks: []scribev1.Check{{Name: "available", Type: scribev1.CheckAvailability}}}
	get := createHealthy(t, s, w)
	updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, webV2()) })
	// An analysis round that passes and the next step's intent are one
	// status write (a passed round clears the checks with the step): the
	// step moving on is when its analysis passed.
	type times struct{ intent, commit, route time.Time }
	seen := make([]times, len(steps)+1) // the last: the promotion
	var warm times
	routeOK := func(step int) bool {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("gateway.networking.k8s.io/v1")
		u.SetKind("HTTPRoute")
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, u); err != nil {
			return false
		}
		want := fmt.Sprintf("web-v1=%d,web-v2=%d", 100-steps[step].Weight, steps[step].Weight)
		return weightsOf(u) == want && health.Route(u).State == health.Healthy
	}
	pollEvery(t, 25*time.Millisecond, 15*time.Minute, "the 20-step canary promoted", func() (bool, string) {
		got := get()
		if got.Status.Phase == scribev1.WorkloadRolledBack {
			t.Fatalf("the bench's canary was rolled back: %s", got.Status.Message)
		}
		now := time.Now()
		st := -1
		switch {
		case got.Status.StableVersion == "v2":
			st = len(steps)
		case got.Status.CanaryVersion == "v2" && warmingUp(got):
			// The warm-up at weight 0 precedes step 1: timed apart.
			if warm.commit.IsZero() && got.Status.Revision != "" {
				warm.commit = now
			}
		case got.Status.CanaryVersion == "v2" && got.Status.Step >= 0 && int(got.Status.Step) < len(steps):
			st = int(got.Status.Step)
		}
		if st >= 0 {
			if seen[st].intent.IsZero() {
				seen[st].intent = now
			}
			if seen[st].commit.IsZero() && got.Status.Revision != "" {
				seen[st].commit = now
			}
			if st < len(steps) && !seen[st].commit.IsZero() && seen[st].route.IsZero() && routeOK(st) {
				seen[st].route = now
			}
		}
		return st == len(steps) && !seen[st].commit.IsZero(), describe(got)
	})
	if !warm.commit.IsZero() && !seen[0].commit.IsZero() {
		t.Logf("RESULT canary warm-up at weight 0: its commit -> step 1's commit %s", seen[0].commit.Sub(warm.commit).Round(time.Millisecond))
	}
	for i := 0; i < len(steps); i++ {
		a, b := seen[i], seen[i+1]
		if a.commit.IsZero() || a.route.IsZero() || b.intent.IsZero() || b.commit.IsZero() {
			t.Logf("step %d: not every moment seen (commit %v, route %v, next intent %v, next commit %v)", i+1, !a.commit.IsZero(), !a.route.IsZero(), !b.intent.IsZero(), !b.commit.IsZero())
			continue
		}
		toRoute = append(toRoute, a.route.Sub(a.commit))
		toAnalysed = append(toAnalysed, b.intent.Sub(a.route))
		toNext = append(toNext, b.commit.Sub(b.intent))
		total = append(total, b.commit.Sub(a.commit))
	}
	return toRoute, toAnalysed, toNext, total
}

// warmingUp says a Workload's canary is at its warm-up: weight 0 before
// its first step.
func warmingUp(w *scribev1.Workload) bool {
	for _, tr := range w.Status.Traffic {
		if tr.Version == w.Status.CanaryVersion {
			return tr.Weight == 0 && w.Status.Step == 0
		}
	}
	return false
}
