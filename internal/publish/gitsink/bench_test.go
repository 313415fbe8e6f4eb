package gitsink_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
	"github.com/scribe-gitops/scribe/render"
)

// Publish benchmarks run against real `git http-backend` on 127.0.0.1
// (publishtest.GitServer); timings include the loopback HTTP round trips
// and the server's git processes. Run them with
//
//	go test -run '^$' -bench . -benchmem ./publish/
//
// The large-repository benchmark generates a 100k-commit repository once
// and caches it under ${XDG_CACHE_HOME:-$HOME/.cache}/scribe/bench/.

// benchPublishTimeout bounds one Publish call of a benchmark.
const benchPublishTimeout = 2 * time.Minute

// benchBundle is a bundle shaped as render makes it for a Workload: its
// content and digest change with rev.
func benchBundle(ns, name string, rev int) *render.Bundle {
	src := scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: "Workload", Namespace: ns, Name: name}
	dir := publish.OwnedDir(src)
	deploy := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
  labels:
    app.kubernetes.io/name: %[1]s
    app.kubernetes.io/managed-by: scribe
spec:
  replicas: 3
  selector:
    matchLabels:
      app.kubernetes.io/name: %[1]s
  template:
    metadata:
      labels:
        app.kubernetes.io/name: %[1]s
    spec:
      containers:
      - name: app
        image: registry.example.com/%[2]s/%[1]s:1.%[3]d.0
        ports:
        - containerPort: 8080
        resources:
          requests:
            cpu: 100m
            memory: 128Mi
`, name, ns, rev)
	files := []render.File{
		{Path: dir + "/.scribe.json", Data: []byte(`{"source":"Workload/` + ns + "/" + name + `","generation":` + strconv.Itoa(rev+1) + "}\n")},
		{Path: dir + "/deployment-" + name + ".yaml", Data: []byte(deploy)},
		{Path: dir + "/service-" + name + ".yaml", Data: []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:\n  ports:\n  - port: 80\n    targetPort: 8080\n")},
		{Path: dir + "/kustomization.yaml", Data: []byte("resources:\n- deployment-" + name + ".yaml\n- service-" + name + ".yaml\n")},
		{Path: dir + ".sync.yaml", Data: []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:\n  path: ./" + dir + "\n")},
	}
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f.Path))
		h.Write(f.Data)
	}
	// The identities render reports, which the collision check reads.
	objects := []scribev1.ObjectIdentity{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name},
		{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: name},
	}
	sync := scribev1.ObjectIdentity{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: ns, Name: name}
	return &render.Bundle{Dir: dir, Source: src, Generation: int64(rev + 1), Digest: fmt.Sprintf("sha256:%x", h.Sum(nil)), Files: files, Objects: objects, Sync: sync}
}

func benchSink(b *testing.B, g *gitsink.Git, opts gitsink.Options) publish.Sink {
	b.Helper()
	s, err := g.Sink(opts)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// publishChanged publishes bundle and fails unless it made a commit.
func publishChanged(b *testing.B, sink publish.Sink, bundle *render.Bundle) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchPublishTimeout)
	defer cancel()
	res, err := sink.Publish(ctx, publish.ChangeFor(bundle))
	if err != nil {
		b.Fatal(err)
	}
	if !res.Changed {
		b.Fatalf("publish of %s changed nothing", bundle.Dir)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reportPerOp reports the loop's mean latency in milliseconds (easier to
// read than ns/op for network operations) and the Git counters per op.
func reportPerOp(b *testing.B, n int, g *gitsink.Git, before gitsink.Stats, srv *publishtest.GitServer, reqBefore int) {
	if n == 0 {
		return
	}
	st := g.Stats()
	b.ReportMetric(ms(b.Elapsed())/float64(n), "ms/op")
	b.ReportMetric(float64(st.Fetches-before.Fetches)/float64(n), "fetches/op")
	b.ReportMetric(float64(st.Conflicts-before.Conflicts)/float64(n), "conflicts/op")
	b.ReportMetric(float64(srv.Requests()-reqBefore)/float64(n), "http-requests/op")
}

// BenchmarkGitPublishOneBundle is the baseline: one bundle, one commit and
// push, into a small repository whose tip the cache already has.
func BenchmarkGitPublishOneBundle(b *testing.B) {
	srv := publishtest.NewGitServer(b)
	url := srv.InitRepo(b, "small", "main")
	g := gitsink.New(b.TempDir())
	g.CommitInterval = 0 // each op is one commit, measured alone
	sink := benchSink(b, g, gitsink.Options{URL: url, Branch: "main", Path: "clusters"})

	start := time.Now()
	publishChanged(b, sink, benchBundle("team-a", "web", 0))
	first := time.Since(start)

	before, reqBefore := g.Stats(), srv.Requests()
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		publishChanged(b, sink, benchBundle("team-a", "web", n))
	}
	// After the loop: b.Loop's first call resets the timer and the metrics.
	b.ReportMetric(ms(first), "first-publish-ms")
	reportPerOp(b, n, g, before, srv, reqBefore)
}

// BenchmarkGitCommitPushLargeRepo publishes into a repository of 100k
// commits and 20k files. The first publish (a shallow clone into an empty
// cache) is outside the loop and reported as first-publish-ms; each op is
// one changed bundle: fetch if needed, graft, commit, push.
//
//   - quiet-remote: nobody else writes, so no op fetches.
//   - foreign-commit-per-op: a commit lands on the server before every op
//     (outside the timer), so every op first fetches it incrementally.
func BenchmarkGitCommitPushLargeRepo(b *testing.B) {
	if testing.Short() {
		b.Skip("large repository benchmark skipped in -short mode")
	}
	spec := publishtest.BigRepo{Branch: "main", Commits: 100_000, Files: 20_000}
	gen := publishtest.CachedBigRepo(b, spec)
	src := gen.Dir
	// Logged by the sub-benchmarks: go test prints a parent's log only with -v.
	genLog := fmt.Sprintf("using cached %s: %s", spec.Key(), src)
	if gen.Took > 0 {
		genLog = fmt.Sprintf("generated %s (%d commits, %d files) in %s (%s): %s", spec.Key(), spec.Commits, spec.Files, gen.Took.Round(time.Millisecond), gen.Phases, src)
	}
	b.Run("quiet-remote", func(b *testing.B) { benchLargeRepo(b, spec, src, genLog, false) })
	b.Run("foreign-commit-per-op", func(b *testing.B) { benchLargeRepo(b, spec, src, genLog, true) })
}

func benchLargeRepo(b *testing.B, spec publishtest.BigRepo, src, genLog string, foreign bool) {
	b.Log(genLog)
	srv := publishtest.NewGitServer(b)
	start := time.Now()
	url := srv.AddBareRepo(b, "big", src)
	b.Logf("copied the repository into the server in %s", time.Since(start).Round(time.Millisecond))

	g := gitsink.New(b.TempDir())
	g.CommitInterval = 0 // each op is one commit, measured alone
	// Beside fifty foreign app directories of team-042.
	sink := benchSink(b, g, gitsink.Options{URL: url, Branch: spec.Branch, Path: "clusters"})
	start = time.Now()
	publishChanged(b, sink, benchBundle("team-042", "scribe-bench", 0))
	first := time.Since(start)
	b.Logf("first publish (shallow clone into an empty cache): %s", first.Round(time.Millisecond))

	before, reqBefore := g.Stats(), srv.Requests()
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		if foreign {
			b.StopTimer()
			file := fmt.Sprintf("clusters/team-007/workload/app-00/foreign-%d.txt", n)
			if _, err := srv.CommitOnServer("big", spec.Branch, file, file+"\n"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		publishChanged(b, sink, benchBundle("team-042", "scribe-bench", n))
	}
	b.ReportMetric(ms(first), "first-publish-ms")
	reportPerOp(b, n, g, before, srv, reqBefore)
}

// BenchmarkGitPublish1000Bundles publishes 1000 distinct bundles through
// one sink into a fresh small repository per op, and reports how many
// commits the writer needed (the batching) and the memory it took.
//
//   - concurrent-1000: 1000 Publish calls at once.
//   - 50x20: 50 goroutines, each publishing 20 bundles one after another
//     (at most 50 changes wait at any time, so at least 20 commits).
//   - *-interval-1s: the same with Git.CommitInterval = 1s (the default;
//     the others run with 0).
//
// peak-rss-MiB is the process's VmHWM, reset before every op when the
// kernel allows it (clear_refs), so it is the peak of the op; without the
// reset it is the peak since the process started. The server's git
// processes are not part of it.
func BenchmarkGitPublish1000Bundles(b *testing.B) {
	cases := []struct {
		name       string
		goroutines int
		perRoutine int
		interval   time.Duration
	}{
		{"concurrent-1000", 1000, 1, 0},
		{"concurrent-1000-interval-1s", 1000, 1, time.Second},
		{"50x20", 50, 20, 0},
		{"50x20-interval-1s", 50, 20, time.Second},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			bench1000(b, tc.goroutines, tc.perRoutine, tc.interval)
		})
	}
}

func bench1000(b *testing.B, goroutines, perRoutine int, interval time.Duration) {
	const total = 1000
	if goroutines*perRoutine != total {
		b.Fatalf("%d goroutines x %d bundles is not %d", goroutines, perRoutine, total)
	}
	srv := publishtest.NewGitServer(b)
	var (
		commits, maxCommits int64
		conflicts           int64
		peakRSS, peakHeap   uint64
		heapEnd             uint64
		rssReset            = true
		n                   int
	)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		n++
		repo := fmt.Sprintf("fleet-%d", n)
		url := srv.InitRepo(b, repo, "main")
		g := gitsink.New(b.TempDir())
		g.CommitInterval = interval
		sink := benchSink(b, g, gitsink.Options{URL: url, Branch: "main", Path: "clusters"})
		bundles := make([]*render.Bundle, total)
		for i := range bundles {
			bundles[i] = benchBundle(fmt.Sprintf("team-%02d", i%10), fmt.Sprintf("app-%04d", i), n)
		}
		runtime.GC()
		if !resetPeakRSS() {
			rssReset = false
		}
		stopSampler := sampleHeap()
		b.StartTimer()

		errs := make(chan error, total)
		var wg sync.WaitGroup
		for r := 0; r < goroutines; r++ {
			wg.Go(func() {
				for j := 0; j < perRoutine; j++ {
					bundle := bundles[r*perRoutine+j]
					ctx, cancel := context.WithTimeout(context.Background(), benchPublishTimeout)
					res, err := sink.Publish(ctx, publish.ChangeFor(bundle))
					cancel()
					if err == nil && !res.Changed {
						err = fmt.Errorf("publish of %s changed nothing", bundle.Dir)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()

		b.StopTimer()
		heap := stopSampler()
		peakHeap = max(peakHeap, heap)
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		heapEnd = max(heapEnd, m.HeapInuse)
		peakRSS = max(peakRSS, vmHWM(b))
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		st := g.Stats()
		if got := publishtest.Git(b, "", "--git-dir", srv.BareDir(repo), "rev-list", "--count", "main"); got != strconv.FormatInt(st.Commits+1, 10) {
			b.Fatalf("branch has %s commits, the writer counted %d after the initial one", got, st.Commits)
		}
		synced := 0
		for _, p := range strings.Split(publishtest.Git(b, "", "--git-dir", srv.BareDir(repo), "ls-tree", "-r", "--name-only", "main", "clusters/"), "\n") {
			if strings.HasSuffix(p, ".sync.yaml") {
				synced++
			}
		}
		if synced != total {
			b.Fatalf("branch holds %d bundles, want %d", synced, total)
		}
		commits += st.Commits
		maxCommits = max(maxCommits, st.Commits)
		conflicts += st.Conflicts
		b.StartTimer()
	}
	if n == 0 {
		return
	}
	b.ReportMetric(ms(b.Elapsed())/float64(n), "ms/op")
	b.ReportMetric(float64(commits)/float64(n), "commits/op")
	b.ReportMetric(float64(maxCommits), "max-commits")
	b.ReportMetric(float64(conflicts)/float64(n), "conflicts/op")
	b.ReportMetric(float64(peakRSS)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(heapEnd)/(1<<20), "heap-inuse-end-MiB")
	if !rssReset {
		b.Logf("peak-rss-MiB is the process's peak since start: /proc/self/clear_refs refused the reset")
	}
}

// vmHWM is the process's peak resident set size in bytes (VmHWM in
// /proc/self/status), or 0 where there is no /proc.
func vmHWM(b *testing.B) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			b.Fatalf("VmHWM %q: %v", rest, err)
		}
		return kb << 10
	}
	return 0
}

// resetPeakRSS sets VmHWM back to the current RSS (Linux 4.0+: write 5 to
// /proc/self/clear_refs); false when that is not possible.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// sampleHeap samples the bytes of live and not yet swept heap objects every
// 5ms, without stopping the world, until the returned function is called;
// that returns the largest sample.
func sampleHeap() (stop func() uint64) {
	const name = "/memory/classes/heap/objects:bytes"
	done := make(chan struct{})
	result := make(chan uint64, 1)
	go func() {
		s := []metrics.Sample{{Name: name}}
		var peak uint64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if s[0].Value.Kind() == metrics.KindUint64 {
				peak = max(peak, s[0].Value.Uint64())
			}
			select {
			case <-done:
				result <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-result
	}
}
