package controller_test

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// BenchmarkBystanderCommitWhileHeavyExperimentsRender is issue 27's
// starvation: one tenant creates SCRIBE_BENCH_HEAVY (default 2) large
// Experiments (32 vcluster targets × 3 built-in apps each, the largest the
// built-in catalog allows without a tenant catalog), and another tenant a
// one-version Workload while they render. With the controller's defaults
// (workers, MaxRenders, the 2 s poll), it reports the bystander's seconds
// from create to commit (and the same Workload's with nothing else
// running, before), the seconds until every heavy Experiment's first
// stage is committed, and the test process's peak RSS and Go heap while
// they run (the controller runs in the test process, beside the git
// server and the test's client). Run it with -benchtime=1x.
func BenchmarkBystanderCommitWhileHeavyExperimentsRender(b *testing.B) {
	heavyCount := envInt("SCRIBE_BENCH_HEAVY", 2)
	for range b.N {
		b.StopTimer()
		heavyNS, other := newFixture(b), newFixture(b)
		heavyNS.publishCatalog(b)
		for _, f := range []*fixture{heavyNS, other} {
			if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
				b.Fatal(err)
			}
		}
		startFairnessManager(b, heavyNS.e.cfg, []string{heavyNS.ns, other.ns}, controller.Options{})
		// Warm: the catalog loaded, both git caches cloned; then the idle
		// latency of a Workload.
		if err := heavyNS.e.c.Create(heavyNS.ctx(), hubExperiment(heavyNS.ns, "small")); err != nil {
			b.Fatal(err)
		}
		commitLatency(b, other, "warm")
		idle := commitLatency(b, other, "idle")
		waitFor(b, "the small Experiment committed", func() (bool, string) {
			e := &scribev1.Experiment{}
			if err := heavyNS.e.c.Get(heavyNS.ctx(), types.NamespacedName{Namespace: heavyNS.ns, Name: "small"}, e); err != nil {
				return false, err.Error()
			}
			return e.Status.Revision != "", expState(e)
		})

		resetHWM()
		heap := sampleHeap(100 * time.Millisecond)
		b.StartTimer()
		start := time.Now()
		for i := range heavyCount {
			if err := heavyNS.e.c.Create(heavyNS.ctx(), heavyExperiment(heavyNS.ns, fmt.Sprintf("heavy-%d", i))); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(time.Second) // the heavy renders are under way
		busy := commitLatency(b, other, "bystander")
		waitForLong(b, 30*time.Minute, 250*time.Millisecond, "every heavy Experiment's first stage committed", func() (bool, string) {
			list := &scribev1.ExperimentList{}
			if err := heavyNS.e.c.List(heavyNS.ctx(), list); err != nil {
				return false, err.Error()
			}
			done := 0
			for _, e := range list.Items {
				if e.Namespace == heavyNS.ns && e.Name != "small" && e.Status.Revision != "" {
					done++
				}
			}
			return done == heavyCount, fmt.Sprintf("%d of %d committed", done, heavyCount)
		})
		heavyDone := time.Since(start)
		b.StopTimer()
		heap.end()
		peakRSS := vmHWM()
		b.ReportMetric(busy.Seconds(), "s-bystander-commit")
		b.ReportMetric(idle.Seconds(), "s-idle-commit")
		b.ReportMetric(heavyDone.Seconds(), "s-heavy-committed")
		b.ReportMetric(peakRSS, "peak-RSS-MiB")
		b.ReportMetric(float64(heap.inuse)/(1<<20), "peak-heap-MiB")
		b.Logf("%d heavy Experiments (32 targets × 3 apps): bystander Workload committed after %s (idle: %s); heavy first stages committed after %s; peak RSS %.0f MiB, heap in use peak %.0f MiB",
			heavyCount, busy.Round(time.Millisecond), idle.Round(time.Millisecond), heavyDone.Round(time.Millisecond), peakRSS, float64(heap.inuse)/(1<<20))
	}
}

// commitLatency creates a one-version Workload named name in f's
// namespace and returns the time until its commit is in its status.
func commitLatency(b *testing.B, f *fixture, name string) time.Duration {
	b.Helper()
	w := workload(f.ns, "v1")
	w.Name = name
	start := time.Now()
	if err := f.e.c.Create(f.ctx(), w); err != nil {
		b.Fatal(err)
	}
	waitForLong(b, 30*time.Minute, 20*time.Millisecond, "workload "+name+" committed", func() (bool, string) {
		got := &scribev1.Workload{}
		if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: name}, got); err != nil {
			return false, err.Error()
		}
		return got.Status.Revision != "", string(got.Status.Phase)
	})
	return time.Since(start)
}
