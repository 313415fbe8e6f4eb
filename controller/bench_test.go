package controller_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// vmHWM is the process's peak resident set size in MiB.
func vmHWM() float64 { return procStatusMiB("VmHWM:") }

// vmRSS is the process's resident set size in MiB.
func vmRSS() float64 { return procStatusMiB("VmRSS:") }

// procStatusMiB is the field (a size in kB) of /proc/self/status in MiB,
// or 0 where there is none.
func procStatusMiB(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// resetHWM restarts the peak resident set size from the current one
// (Linux ≥ 4.0), so one run's peak is not an earlier run's.
func resetHWM() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0o600)
}

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// heapPeak samples the Go heap while a run lasts: the heap in use (what
// the process holds for Go objects, garbage included) and the live heap
// (what the last GC found reachable).
type heapPeak struct {
	stop        chan struct{}
	done        chan struct{}
	inuse, live uint64
}

func sampleHeap(every time.Duration) *heapPeak {
	h := &heapPeak{stop: make(chan struct{}), done: make(chan struct{})}
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}, {Name: "/gc/heap/live:bytes"}}
	read := func() {
		metrics.Read(samples)
		h.inuse = max(h.inuse, samples[0].Value.Uint64()+samples[1].Value.Uint64())
		h.live = max(h.live, samples[2].Value.Uint64())
	}
	go func() {
		defer close(h.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			read()
			select {
			case <-h.stop:
				read()
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapPeak) end() { close(h.stop); <-h.done }

// BenchmarkCreate1000Workloads is issue 14's burst: 1000 one-version
// Workloads created at once against a real kube-apiserver and git server
// while the controller runs, measured until every one has its commit in
// status. It reports the seconds until all are committed (from the first
// create, so the API server's own pace of creating them counts), the
// commits Scribe made, Scribe's API writes per CR, the peak RSS of the
// test process (which also holds the test's own client and the git
// server's HTTP side) and the Go heap: peak in use, peak live, and live
// after a GC once all are committed (what the controller keeps per CR).
//
// SCRIBE_BENCH_WORKLOADS changes the count (e.g. 200 for a quick run);
// SCRIBE_CONCURRENCY the reconcilers' workers (default: Setup's);
// SCRIBE_BENCH_QPS and SCRIBE_BENCH_BURST the client's pace (default: the
// controller command's, ClientRateLimit: none, as envtest's API server has
// priority and fairness);
// SCRIBE_BENCH_HEAPPROFILE names a file for a heap profile taken once all
// are committed. Run it once per process with -benchtime=1x (`make bench`
// does).
func BenchmarkCreate1000Workloads(b *testing.B) { benchBurst(b, false) }

// BenchmarkStartWith1000Workloads is the same burst as a controller sees
// it when it starts (installed, upgraded or restarted) with 1000 Workloads
// not yet committed: all arrive at once in the informer's first list, and
// the clock starts with the manager.
func BenchmarkStartWith1000Workloads(b *testing.B) { benchBurst(b, true) }

func benchBurst(b *testing.B, present bool) {
	n := envInt("SCRIBE_BENCH_WORKLOADS", 1000)
	workers := envInt("SCRIBE_CONCURRENCY", 0)
	for range b.N {
		b.StopTimer()
		f := newFixture(b)
		if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
			b.Fatal(err)
		}
		// The production defaults but the workers: poll, batching, cache.
		// The manager's requests to the API server are counted by verb
		// and resource: what a burst costs the API server, whatever the
		// machine's speed.
		calls := &apiCalls{}
		cfg := rest.CopyConfig(f.e.cfg)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return calls.wrap(rt) })
		// The client's pace is the command's (not envtest's own 1000 QPS).
		_, qpsSet := os.LookupEnv("SCRIBE_BENCH_QPS")
		_, burstSet := os.LookupEnv("SCRIBE_BENCH_BURST")
		limit := controller.ClientRateLimit(f.ctx(), cfg,
			float32(envInt("SCRIBE_BENCH_QPS", controller.DefaultKubeAPIQPS)),
			envInt("SCRIBE_BENCH_BURST", controller.DefaultKubeAPIBurst), qpsSet || burstSet)
		stop := startControllerCfg(b, cfg, f.ns, controller.Options{Concurrency: workers})
		waitFor(b, "the Repository to be Ready", func() (bool, string) {
			r := &scribev1.Repository{}
			if err := f.e.c.Get(f.ctx(), client.ObjectKeyFromObject(f.repo), r); err != nil {
				return false, err.Error()
			}
			for _, c := range r.Status.Conditions {
				if c.Type == scribev1.ReadyCondition {
					return c.Status == "True", c.Message
				}
			}
			return false, "no Ready condition"
		})
		create := func() {
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
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		}
		if present {
			// The Workloads wait for a controller that is not running.
			stop()
			create()
		}
		commitsBefore := commitCount(b, f)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heapBefore := ms.HeapInuse
		resetHWM()
		heap := sampleHeap(100 * time.Millisecond)
		calls.reset()

		b.StartTimer()
		start := time.Now()
		var created time.Duration
		if present {
			stop = startControllerCfg(b, cfg, f.ns, controller.Options{Concurrency: workers})
		} else {
			create()
			created = time.Since(start)
		}
		waitForLong(b, 15*time.Minute, 250*time.Millisecond, "every Workload committed", func() (bool, string) {
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
		b.StopTimer()
		heap.end()
		peakRSS := vmHWM()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heapAfter := ms.HeapInuse
		if p := os.Getenv("SCRIBE_BENCH_HEAPPROFILE"); p != "" {
			writeHeapProfile(b, p)
		}
		commits := commitCount(b, f) - commitsBefore
		writes, reads, byKind := calls.snapshot()
		stop()

		b.ReportMetric(elapsed.Seconds(), "s-to-committed")
		b.ReportMetric(float64(commits), "commits")
		b.ReportMetric(float64(writes)/float64(n), "api-writes/CR")
		b.ReportMetric(float64(reads)/float64(n), "api-reads/CR")
		b.Logf("API requests until all were committed: %s", byKind)
		b.ReportMetric(peakRSS, "peak-RSS-MiB")
		b.ReportMetric(float64(heap.inuse)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(heap.live)/(1<<20), "peak-live-heap-MiB")
		b.ReportMetric(float64(heapAfter)/(1<<20), "heap-after-MiB")
		how := "created while the controller ran, in " + created.Round(time.Millisecond).String()
		if present {
			how = "present when the controller started"
		}
		b.Logf("%d Workloads, workers %d (0: default), %s, %s: all committed after %s in %d commits; peak RSS %.0f MiB, heap in use peak %.0f MiB, live peak %.0f MiB, %.0f MiB before and %.0f MiB after (GC'd, manager stopped: %.0f MiB)",
			n, workers, limit, how, elapsed.Round(time.Millisecond), commits, peakRSS,
			float64(heap.inuse)/(1<<20), float64(heap.live)/(1<<20), float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20), afterStop())
	}
}

// apiCalls counts the requests a manager makes to the API server, by
// method and resource (watches and the discovery calls included).
type apiCalls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *apiCalls) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.add(req.Method + " " + resourceOf(req.URL.Path))
		return rt.RoundTrip(req)
	})
}

func (c *apiCalls) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
}

func (c *apiCalls) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = nil
}

// snapshot returns the writes (POST, PUT, PATCH, DELETE), the reads and
// every count by method and resource, sorted.
func (c *apiCalls) snapshot() (writes, reads int, byKind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.n))
	for k, v := range c.n {
		keys = append(keys, k)
		if strings.HasPrefix(k, "GET ") {
			reads += v
		} else {
			writes += v
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c.n[k]))
	}
	return writes, reads, strings.Join(parts, ", ")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf names the resource (and subresource) of an API path:
// /apis/scribe.dev/v1alpha1/namespaces/ns/workloads/web/status is
// "workloads/status".
func resourceOf(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if i := slices.Index(parts, "namespaces"); i >= 0 && len(parts) > i+2 {
		parts = parts[i+2:]
	} else if len(parts) > 0 && parts[0] == "api" && len(parts) > 2 {
		parts = parts[2:]
	} else if len(parts) > 3 {
		parts = parts[3:]
	}
	switch len(parts) {
	case 0:
		return p
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

// writeHeapProfile writes what is live now (the manager still running,
// every Workload committed) to path, for `go tool pprof`.
func writeHeapProfile(t testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// afterStop is the heap in use after a GC, in MiB.
func afterStop() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

// commitCount is the number of commits on main in the fixture's repository.
func commitCount(t testing.TB, f *fixture) int {
	t.Helper()
	n, err := strconv.Atoi(publishtest.Git(t, "", "--git-dir", f.srv.BareDir(repoName), "rev-list", "--count", "main"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitForLong(t testing.TB, limit, every time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(every)
	}
	t.Fatalf("timed out waiting for %s; last state: %s", what, last)
}
