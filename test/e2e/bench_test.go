package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/util/retry"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/controller"
)

func stats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	r := func(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
	return fmt.Sprintf("min %s / median %s / max %s over %d", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]), len(s))
}

// changeToApplied changes the Workload n times and measures, for each, the
// time from the CR update to the applier holding Scribe's commit for it:
// Flux's lastAppliedRevision, or Argo CD's Application Synced at it and
// Healthy, with the health computed after the sync.
func changeToApplied(t *testing.T, s *Stack, ns string, n int) []time.Duration {
	ctx := context.Background()
	w := canaryWorkload(ns)
	w.Spec.Rollout = nil
	get := createHealthy(t, s, w)
	var out []time.Duration
	for i := range n {
		var prev string
		start := time.Now()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := get()
			prev = got.Status.Revision
			got.Spec.Versions[0].Config = map[string]string{"CHANGE": strconv.Itoa(i)}
			start = time.Now()
			return s.Client.Update(ctx, got)
		})
		if err != nil {
			t.Fatal(err)
		}
		var commit string
		pollEvery(t, 20*time.Millisecond, 5*time.Minute, fmt.Sprintf("change %d applied", i+1), func() (bool, string) {
			w := get()
			if w.Status.Revision != "" && w.Status.Revision != prev {
				commit = w.Status.Revision
			}
			if commit == "" {
				return false, describe(w)
			}
			return s.syncedAt(ctx, "workload", ns, "web", commit)
		})
		out = append(out, time.Since(start))
	}
	return out
}

// TestBenchLoopLatency is `make bench-e2e`: it reports, never asserts,
// the loop's latencies.
func TestBenchLoopLatency(t *testing.T) {
	if os.Getenv("SCRIBE_BENCH_E2E") == "" {
		t.Skip("make bench-e2e sets SCRIBE_BENCH_E2E=1")
	}
	n := 20
	if v, err := strconv.Atoi(os.Getenv("SCRIBE_BENCH_CHANGES")); err == nil && v > 0 {
		n = v
	}
	t.Run("nudged", func(t *testing.T) {
		s := newLoop(t, "bench")
		t.Logf("RESULT CR change -> Flux lastAppliedRevision = Scribe's commit (source nudged): %s", stats(changeToApplied(t, s, "bench", n)))
	})
	t.Run("not-nudged", func(t *testing.T) {
		s := newLoop(t, "bench", controller.Options{Poll: time.Second, Concurrency: 4, NoNudge: true})
		m := max(n/4, 3)
		t.Logf("RESULT CR change -> Flux lastAppliedRevision = Scribe's commit (no nudge, GitRepository interval 1m): %s", stats(changeToApplied(t, s, "bench", m)))
	})
	t.Run("canary-step", func(t *testing.T) { benchCanarySteps(t, scribev1.ApplierFlux, n) })
	t.Run("argocd", func(t *testing.T) {
		s := newLoopWith(t, scribev1.ApplierArgoCD, "bench")
		t.Logf("RESULT CR change -> Argo CD Synced at Scribe's commit and Healthy (Application refreshed): %s", stats(changeToApplied(t, s, "bench", n)))
		logRSS(t, s)
	})
	t.Run("argocd-canary-step", func(t *testing.T) { benchCanarySteps(t, scribev1.ApplierArgoCD, n) })
}

// benchCanarySteps walks an n-step canary through applier and reports the
// time from one step's commit to the next one's.
func benchCanarySteps(t *testing.T, applier scribev1.ApplierKind, n int) {
	{
		ns := "steps"
		s := newLoopWith(t, applier, ns)
		w := canaryWorkload(ns)
		w.Spec.Rollout.Steps = nil
		for i := 1; i <= n; i++ {
			w.Spec.Rollout.Steps = append(w.Spec.Rollout.Steps, scribev1.RolloutStep{Weight: int32(i * 100 / n)})
		}
		get := createHealthy(t, s, w)
		updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, webV2()) })
		// Each step's commit -> applied by Flux -> Deployments healthy is the
		// time from one step's commit to the next one's.
		var steps []time.Duration
		last, lastAt := "", time.Time{}
		poll(t, 10*time.Minute, "the canary's end", func() (bool, string) {
			w := get()
			if w.Status.Revision != "" && w.Status.Revision != last {
				now := time.Now()
				if last != "" && w.Status.CanaryVersion == "v2" {
					steps = append(steps, now.Sub(lastAt))
				}
				last, lastAt = w.Status.Revision, now
			}
			return w.Status.StableVersion == "v2", describe(w)
		})
		t.Logf("RESULT canary step commit -> applied by %s -> healthy -> next commit: %s", applier, stats(steps))
	}
}
