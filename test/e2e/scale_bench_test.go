package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// gitObjects describes how a bare repository stores its objects, as
// git count-objects counts them.
func gitObjects(t *testing.T, bare string) string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir", bare, "count-objects", "-v").Output()
	if err != nil {
		t.Fatalf("git count-objects: %v", err)
	}
	f := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			f[k] = v
		}
	}
	return fmt.Sprintf("git server holding %s loose objects and %s in %s packs", f["count"], f["in-pack"], f["packs"])
}

// metric sums the samples of a Prometheus metric of a Flux controller
// whose labels contain every label of match (`name{a="b"}` text form).
func (s *Stack) metric(ctx context.Context, controller, name string, match ...string) (float64, error) {
	s.mu.Lock()
	addr := s.metrics[controller]
	s.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", controller, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, m := range match {
			if !strings.Contains(line, m) {
				continue next
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// cpuSeconds is the user+system CPU time a loop process has used so far.
func (s *Stack) cpuSeconds(name string) float64 {
	s.mu.Lock()
	cmd := s.named[name]
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	_, cpu := procStat(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	return cpu
}

// procStat reads a /proc/<pid>/stat file: the command name and the
// user+system CPU time in seconds.
func procStat(file string) (string, float64) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", 0
	}
	// Fields after the command name (which may hold spaces): utime and
	// stime are the 12th and 13th, in clock ticks (100 per second on Linux).
	rest, comm := string(b), ""
	if i, j := strings.IndexByte(rest, '('), strings.LastIndexByte(rest, ')'); i >= 0 && j > i {
		comm, rest = rest[i+1:j], rest[j+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return comm, 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return comm, (u + st) / 100
}

// cpuByCommand sums the CPU time of every process on the machine by
// command name (as the kernel shortens it to 15 characters): the loop's
// control plane, kwok, Flux, and this test process (Scribe runs in it).
func cpuByCommand() map[string]float64 {
	out := map[string]float64{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		if comm, cpu := procStat(f); comm != "" {
			out[comm] += cpu
		}
	}
	return out
}

// profileBringUp, with SCRIBE_BENCH_PROFILE naming a folder, writes
// this process's CPU profile (Scribe, the registry, the git server's
// front and the test's own clients) into <folder>/<name>.pprof until the
// returned function is called.
func profileBringUp(t *testing.T, name string) func() {
	dir := os.Getenv("SCRIBE_BENCH_PROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		t.Logf("the bring-up's CPU profile is in %s", f.Name())
	}
}

// cpuReport says, largest first, which commands used the CPU between two
// cpuByCommand readings over a wall-clock duration.
func cpuReport(before, after map[string]float64, wall time.Duration) string {
	type use struct {
		comm string
		cpu  float64
	}
	var uses []use
	total := 0.0
	for comm, cpu := range after {
		if d := cpu - before[comm]; d >= 0.5 {
			uses = append(uses, use{comm, d})
			total += d
		}
	}
	slices.SortFunc(uses, func(a, b use) int { return cmp.Compare(b.cpu, a.cpu) })
	parts := make([]string, 0, len(uses))
	for _, u := range uses {
		parts = append(parts, fmt.Sprintf("%s %.0f", u.comm, u.cpu))
	}
	return fmt.Sprintf("%.0f CPU-s in %s on %d cores (%s)", total, wall.Round(time.Second), runtime.NumCPU(), strings.Join(parts, ", "))
}

// kustomizeIdle waits (at most limit) until kustomize-controller has no
// Kustomization queued or in progress for a second.
func (s *Stack) kustomizeIdle(ctx context.Context, limit time.Duration) bool {
	quiet := 0
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		depth, err1 := s.metric(ctx, "kustomize-controller", "workqueue_depth", `name="kustomization"`)
		active, err2 := s.metric(ctx, "kustomize-controller", "controller_runtime_active_workers", `controller="kustomization"`)
		if err1 == nil && err2 == nil && depth == 0 && active == 0 {
			if quiet++; quiet >= 4 {
				return true
			}
			continue
		}
		quiet = 0
	}
	return false
}

// fluxWork is what Flux has done so far (or per second, as a rate):
// Kustomization reconciles and the CPU-seconds of kustomize-controller and
// source-controller.
type fluxWork struct{ reconciles, kc, sc float64 }

// fluxDone reads fluxWork from the controllers' metrics and /proc.
func (s *Stack) fluxDone(ctx context.Context) fluxWork {
	r, _ := s.metric(ctx, "kustomize-controller", "controller_runtime_reconcile_total", `controller="kustomization"`)
	return fluxWork{reconciles: r, kc: s.cpuSeconds("kustomize-controller"), sc: s.cpuSeconds("source-controller")}
}

// beyond is the work done from w0 to w beyond a background rate over
// seconds (never below zero).
func (w fluxWork) beyond(w0, rate fluxWork, seconds float64) fluxWork {
	return fluxWork{
		reconciles: max(0, w.reconciles-w0.reconciles-rate.reconciles*seconds),
		kc:         max(0, w.kc-w0.kc-rate.kc*seconds),
		sc:         max(0, w.sc-w0.sc-rate.sc*seconds),
	}
}

// fluxBackground measures Flux's rates over a window in which nothing is
// changed: the sources and Kustomizations reconciling on their intervals.
func (s *Stack) fluxBackground(ctx context.Context, window time.Duration) fluxWork {
	w0, start := s.fluxDone(ctx), time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(window):
	}
	d := time.Since(start).Seconds()
	w := s.fluxDone(ctx).beyond(w0, fluxWork{}, 0)
	return fluxWork{reconciles: w.reconciles / d, kc: w.kc / d, sc: w.sc / d}
}

// useArtifacts makes ns's Repository push per-CR artifacts to the loop's
// registry (spec.git.artifacts).
func useArtifacts(t *testing.T, s *Stack, ns string) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		repo := &scribev1.Repository{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, repo); err != nil {
			return err
		}
		repo.Spec.Git.Artifacts = &scribev1.ArtifactsSpec{URL: "oci://" + s.Registry + "/scribe/" + ns}
		return s.Client.Update(ctx, repo)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Scribe's reconciles read the Repository from the cache its own
	// Repository reconcile reads: once that observed the change, every
	// later render has it.
	poll(t, time.Minute, "the Repository's artifacts observed", func() (bool, string) {
		repo := &scribev1.Repository{}
		_ = s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, repo)
		return repo.Status.ObservedGeneration == repo.Generation, "Repository not yet reconciled"
	})
}

// sourceCommit is the commit (main@sha1:<sha>) the own source of the
// custom resource whose sync object is sync holds: its GitRepository's
// artifact revision, or the origin revision of its OCIRepository's
// artifact; or a word saying why there is none.
func sourceCommit(ctx context.Context, s *Stack, sync types.NamespacedName, artifacts bool) string {
	if artifacts {
		o := &sourcev1.OCIRepository{}
		if err := s.Client.Get(ctx, sync, o); err != nil {
			return err.Error()
		}
		if o.Status.Artifact == nil {
			return "no artifact yet"
		}
		return o.Status.Artifact.Metadata["org.opencontainers.image.revision"]
	}
	g := &sourcev1.GitRepository{}
	if err := s.Client.Get(ctx, sync, g); err != nil {
		return err.Error()
	}
	if g.Status.Artifact == nil {
		return "no artifact yet"
	}
	return g.Status.Artifact.Revision
}

func scaleWorkload(ns string, i int) *scribev1.Workload {
	w := canaryWorkload(ns)
	w.Name = fmt.Sprintf("svc-%04d", i)
	w.Spec.Rollout = nil
	w.Spec.Replicas = ptr.To[int32](1)
	w.Spec.Traffic.Hostnames = []string{w.Name + ".example.com"}
	return w
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// TestBenchLoopScale is part of `make bench-e2e`: with 100, 250 and 500
// one-version Workloads in the loop (SCRIBE_BENCH_SCALE, comma-separated),
// it reports the time from one CR change to Flux applying Scribe's commit
// for it, and what Flux spends per Scribe commit: Kustomization reconciles
// and kustomize-controller/source-controller CPU time until
// kustomize-controller is idle again. It measures each size twice: with the
// git server's objects as its pushes left them (loose, until git's own gc
// --auto), and again after a git gc, as a forge's maintenance leaves them.
// It reports, never asserts.
func TestBenchLoopScale(t *testing.T) {
	if os.Getenv("SCRIBE_BENCH_E2E") == "" {
		t.Skip("make bench-e2e sets SCRIBE_BENCH_E2E=1")
	}
	sizes := []int{100, 250, 500}
	if v := os.Getenv("SCRIBE_BENCH_SCALE"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				t.Fatalf("SCRIBE_BENCH_SCALE=%q: want sizes like 100,250,500", v)
			}
			sizes = append(sizes, n)
		}
	}
	changes := 7
	if v, err := strconv.Atoi(os.Getenv("SCRIBE_BENCH_SCALE_CHANGES")); err == nil && v > 0 {
		changes = v
	}
	// Each way Flux can fetch a custom resource's directory, in a loop of
	// its own: its own GitRepository (a sparse clone of the branch), or
	// its own OCIRepository on the artifact Scribe pushes for it
	// (spec.git.artifacts).
	sources := []string{"git", "artifacts"}
	if v := os.Getenv("SCRIBE_BENCH_SCALE_SOURCES"); v != "" {
		sources = strings.Split(v, ",")
	}
	for _, src := range sources {
		if src != "git" && src != "artifacts" {
			t.Fatalf("SCRIBE_BENCH_SCALE_SOURCES=%q: want git, artifacts or both", os.Getenv("SCRIBE_BENCH_SCALE_SOURCES"))
		}
		t.Run(src, func(t *testing.T) { benchLoopScale(t, sizes, changes, src == "artifacts") })
	}
}

// benchLoopScale is TestBenchLoopScale for one kind of per-CR source.
func benchLoopScale(t *testing.T, sizes []int, changes int, artifacts bool) {
	ctx := context.Background()
	ns := "scale"
	via := "per-CR GitRepository"
	if artifacts {
		via = "per-CR OCI artifact"
	}
	// Scribe runs with the command's defaults (workers, polls), not the
	// loop tests' four workers; Flux with SCRIBE_BENCH_FLUX_ARGS added to
	// its controllers' (such as Flux's vertical-scaling guide's
	// --concurrent=10 --requeue-dependency=5s), its defaults without.
	skipWithoutLoop(t)
	fluxArgs := strings.Fields(os.Getenv("SCRIBE_BENCH_FLUX_ARGS"))
	s := StartOpts(t, StackOptions{Applier: scribev1.ApplierFlux, FluxArgs: fluxArgs})
	newNamespaceAndRepository(t, s, ns)
	startScribe(t, s, controller.Options{})
	if len(fluxArgs) > 0 {
		via += " (Flux " + strings.Join(fluxArgs, " ") + ")"
	}
	if artifacts {
		useArtifacts(t, s, ns)
	}
	have := 0
	for _, n := range sizes {
		watchCtx, stopWatch := context.WithCancel(ctx)
		timeline := watchBringUp(watchCtx, t, s, ns)
		cpu0 := cpuByCommand()
		stopProfile := profileBringUp(t, fmt.Sprintf("bring-up-%d", n))
		start, before := time.Now(), have
		for ; have < n; have++ {
			if err := s.Client.Create(ctx, scaleWorkload(ns, have)); err != nil {
				t.Fatal(err)
			}
		}
		isNew := func(name string) bool {
			var i int
			_, err := fmt.Sscanf(name, "svc-%04d", &i)
			return err == nil && i >= before && i < n
		}
		// From the timeline's informer (listing a thousand Workloads from
		// the API server every poll took a fifth of this process's CPU,
		// beside the loop it measures).
		poll(t, 45*time.Minute, fmt.Sprintf("%d Workloads healthy", n), func() (bool, string) {
			healthy := timeline.count(stageHealthy, isNew)
			return healthy == n-before, fmt.Sprintf("%d of %d healthy", healthy, n-before)
		})
		t.Logf("RESULT %s, %d Workloads: created -> all Healthy through Flux: %s", via, n, time.Since(start).Round(100*time.Millisecond))
		t.Logf("RESULT %s, %d Workloads, bring-up: %s", via, n, cpuReport(cpu0, cpuByCommand(), time.Since(start)))
		stopProfile()
		stopWatch()
		for _, line := range timeline.report(isNew) {
			t.Logf("RESULT %s, %d Workloads, bring-up: %s", via, n, line)
		}
		if !s.kustomizeIdle(ctx, time.Minute) {
			t.Logf("kustomize-controller still busy a minute after the bring-up with %d Workloads", n)
		}

		measure := func(server string, round int) {
			var lat, toCommit, toArtifact []time.Duration
			var recs, kcCPU, scCPU []float64
			// With hundreds of per-CR sources and Kustomizations on their
			// intervals Flux is never idle for long: what it does with no
			// change at all is measured over a quiet window and taken off
			// each change's figures.
			idle := s.fluxBackground(ctx, 30*time.Second)
			t.Logf("RESULT %s, %d Workloads, %s: Flux with no change, per minute: %.0f Kustomization reconciles, kustomize-controller %.2f CPU-s, source-controller %.2f CPU-s",
				via, n, server, idle.reconciles*60, idle.kc*60, idle.sc*60)
			for i := range changes {
				name := fmt.Sprintf("svc-%04d", (i*7919+round*104729)%n)
				key := types.NamespacedName{Namespace: ns, Name: name}
				w0 := s.fluxDone(ctx)
				var prev string
				begin := time.Now()
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					w := &scribev1.Workload{}
					if err := s.Client.Get(ctx, key, w); err != nil {
						return err
					}
					prev = w.Status.Revision
					// Unique over every size and round, so each update is a new spec.
					w.Spec.Versions[0].Config = map[string]string{"CHANGE": fmt.Sprintf("%d-%d-%d", n, round, i)}
					begin = time.Now()
					return s.Client.Update(ctx, w)
				})
				if err != nil {
					t.Fatal(err)
				}
				var commit string
				var committed, artifact time.Duration
				ks := &kustomizev1.Kustomization{}
				sync := types.NamespacedName{Namespace: "flux-system", Name: "workload." + ns + "." + name}
				pollEvery(t, 20*time.Millisecond, 10*time.Minute, fmt.Sprintf("change %d of %s applied", i+1, name), func() (bool, string) {
					if commit == "" {
						w := &scribev1.Workload{}
						_ = s.Client.Get(ctx, key, w)
						if w.Status.Revision == "" || w.Status.Revision == prev {
							return false, describe(w)
						}
						commit, committed = w.Status.Revision, time.Since(begin)
					}
					if artifact == 0 {
						if at := sourceCommit(ctx, s, sync, artifacts); at != "main@sha1:"+commit {
							return false, "source at " + at
						}
						artifact = time.Since(begin)
					}
					_ = s.Client.Get(ctx, sync, ks)
					applied := ks.Status.LastAppliedRevision
					if artifacts {
						applied = ks.Status.LastAppliedOriginRevision
					}
					return applied == "main@sha1:"+commit, "applied " + applied
				})
				lat = append(lat, time.Since(begin))
				toCommit, toArtifact = append(toCommit, committed), append(toArtifact, artifact)
				// The change's own work is done once the queue drains, or
				// after 20 s at most; the background is taken off.
				s.kustomizeIdle(ctx, 20*time.Second)
				w := s.fluxDone(ctx).beyond(w0, idle, time.Since(begin).Seconds())
				recs, kcCPU, scCPU = append(recs, w.reconciles), append(kcCPU, w.kc), append(scCPU, w.sc)
			}
			t.Logf("RESULT %s, %d Workloads, %s: CR change -> Flux applied Scribe's commit: %s", via, n, server, stats(lat))
			t.Logf("RESULT %s, %d Workloads, %s: of which CR change -> commit in the Workload's status: %s; -> its source's artifact at the commit: %s", via, n, server, stats(toCommit), stats(toArtifact))
			t.Logf("RESULT %s, %d Workloads, %s: Flux per Scribe commit beyond its background (median of %d): %.0f Kustomization reconciles, kustomize-controller %.2f CPU-s, source-controller %.2f CPU-s",
				via, n, server, changes, median(recs), median(kcCPU), median(scCPU))
		}
		bare := s.Git.BareDir(RepoName)
		measure(gitObjects(t, bare), 0)
		if artifacts {
			// The per-CR sources do not read the git server.
			continue
		}
		// What a forge's periodic maintenance (git gc) does to the same
		// measurement: the git server here keeps each small push's
		// objects loose until git's own gc --auto threshold (6700).
		if out, err := exec.Command("git", "--git-dir", bare, "gc", "--quiet").CombinedOutput(); err != nil {
			t.Fatalf("git gc: %v: %s", err, out)
		}
		measure(gitObjects(t, bare)+" (after git gc)", 1)
	}
}
