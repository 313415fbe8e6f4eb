package controller_test

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// vmHWM is the process's peak resident set size in MiB.
func vmHWM() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// TestMeasureWorkloads1000 is the measured run behind the number in the
// closing note; it runs only with SCRIBE_MEASURE=1 (it takes minutes).
func TestMeasureWorkloads1000(t *testing.T) {
	if os.Getenv("SCRIBE_MEASURE") == "" {
		t.Skip("set SCRIBE_MEASURE=1 to run the 1000-Workload measurement")
	}
	const n = 1000
	f := newFixture(t)
	workers := 16
	if v, err := strconv.Atoi(os.Getenv("SCRIBE_CONCURRENCY")); err == nil && v > 0 {
		workers = v
	}
	f.startWithRepository(t, workers)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapInuse
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			w := workload(f.ns, "v1")
			w.Name = fmt.Sprintf("web-%04d", i)
			if err := f.e.c.Create(f.ctx(), w); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	created := time.Since(start)
	var peakHeap uint64
	waitForLong(t, 15*time.Minute, "every Workload committed", func() (bool, string) {
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapInuse)
		list := &scribev1.WorkloadList{}
		if err := f.e.c.List(f.ctx(), list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		done := 0
		for _, w := range list.Items {
			if w.Status.Revision != "" {
				done++
			}
		}
		return done == n, fmt.Sprintf("%d of %d committed", done, n)
	})
	elapsed := time.Since(start)
	commits := publishtest.Git(t, "", "--git-dir", f.srv.BareDir(repoName), "rev-list", "--count", "main")
	t.Logf("%d Workloads, %d workers: created in %s, all committed after %s, %s commits on main (incl. the initial one), peak RSS %.0f MiB, peak heap in use %.0f MiB (%.0f MiB before)",
		n, workers, created.Round(time.Millisecond), elapsed.Round(time.Millisecond), commits, vmHWM(), float64(peakHeap)/(1<<20), float64(heapBefore)/(1<<20))
}

func waitForLong(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(time.Second)
	}
	t.Fatalf("timed out waiting for %s; last state: %s", what, last)
}
