package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
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
		start := timedUpdate(t, s, get, func(w *scribev1.Workload) {
			prev = w.Status.Revision
			w.Spec.Versions[0].Config = map[string]string{"CHANGE": strconv.Itoa(i)}
		})
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

// timedUpdate applies mutate to the Workload get returns and updates it,
// retrying on conflicts; it returns when the update that succeeded was
// sent.
func timedUpdate(t *testing.T, s *Stack, get func() *scribev1.Workload, mutate func(*scribev1.Workload)) time.Time {
	t.Helper()
	var start time.Time
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := get()
		mutate(got)
		start = time.Now()
		return s.Client.Update(context.Background(), got)
	})
	if err != nil {
		t.Fatal(err)
	}
	return start
}

// benchChanges skips t unless `make bench-e2e` runs it and returns how
// many changes to measure: SCRIBE_BENCH_CHANGES, or def.
func benchChanges(t *testing.T, def int) int {
	t.Helper()
	if os.Getenv("SCRIBE_BENCH_E2E") == "" {
		t.Skip("make bench-e2e sets SCRIBE_BENCH_E2E=1")
	}
	if v, err := strconv.Atoi(os.Getenv("SCRIBE_BENCH_CHANGES")); err == nil && v > 0 {
		return v
	}
	return def
}

// TestBenchLoopLatency is `make bench-e2e`: it reports, never asserts,
// the loop's latencies.
func TestBenchLoopLatency(t *testing.T) {
	n := benchChanges(t, 20)
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
		rs0, ac0 := s.cpuSeconds("argocd-repo-server"), s.cpuSeconds("argocd-application-controller")
		lat := changeToApplied(t, s, "bench", n)
		t.Logf("RESULT CR change -> Argo CD Synced at Scribe's commit and Healthy (Application refreshed): %s", stats(lat))
		// The Workload's creation is in the window too: one commit more.
		per := float64(len(lat) + 1)
		t.Logf("RESULT Argo CD per Scribe commit (mean of %d): argocd-repo-server %.2f CPU-s, argocd-application-controller %.2f CPU-s",
			len(lat)+1, (s.cpuSeconds("argocd-repo-server")-rs0)/per, (s.cpuSeconds("argocd-application-controller")-ac0)/per)
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

// TestBenchNode is part of `make bench-e2e`: it reports, never asserts,
// what the real node costs and how fast it is: pod create -> Ready, a CR
// change -> applied -> its pods Ready on the real node beside the same on
// kwok, and the RSS of the loop with the node.
func TestBenchNode(t *testing.T) {
	n := benchChanges(t, 10)
	t.Run("pod-ready", func(t *testing.T) {
		s := StartOpts(t, StackOptions{RealNode: true, ControlPlaneOnly: true})
		ctx := context.Background()
		var ds []time.Duration
		for i := range n {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), Namespace: "default"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: s.Node.Registry + "/" + pauseImage}}},
			}
			start := time.Now()
			if err := s.Client.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			pollEvery(t, 20*time.Millisecond, 2*time.Minute, p.Name+" Ready", func() (bool, string) {
				got := &corev1.Pod{}
				_ = s.Client.Get(ctx, client.ObjectKeyFromObject(p), got)
				return podReady(got), podState(got)
			})
			ds = append(ds, time.Since(start))
		}
		t.Logf("RESULT pod create -> Ready on the real node (image cached after the first): %s", stats(ds))
	})
	for _, realNode := range []bool{true, false} {
		name := map[bool]string{true: "change-to-ready-real-node", false: "change-to-ready-kwok"}[realNode]
		t.Run(name, func(t *testing.T) {
			ns := "bench"
			var s *Stack
			if realNode {
				s = newNodeLoop(t, scribev1.ApplierFlux, ns)
			} else {
				s = newLoop(t, ns)
			}
			where := map[bool]string{true: "the real node (Scribe in its pod)", false: "kwok (Scribe in the test process)"}[realNode]
			t.Logf("RESULT CR change (image) -> Flux applied -> the new pods Ready, on %s: %s", where, stats(changeToReady(t, s, ns, n)))
			logRSS(t, s)
			if realNode {
				logNodeRSS(t, s)
			}
		})
	}
}

// changeToReady changes the Workload's image n times (between the demo
// app's tags 1 and 2) and measures each time from the CR update to its
// Deployment rolled out at the new image with every pod Ready.
func changeToReady(t *testing.T, s *Stack, ns string, n int) []time.Duration {
	ctx := context.Background()
	w := canaryWorkload(ns)
	w.Spec.Rollout = nil
	get := createHealthy(t, s, w)
	var out []time.Duration
	for i := range n {
		image := "ghcr.io/example/web:" + strconv.Itoa(2-i%2)
		start := timedUpdate(t, s, get, func(w *scribev1.Workload) { w.Spec.Versions[0].Image = image })
		pollEvery(t, 20*time.Millisecond, 5*time.Minute, fmt.Sprintf("change %d: %s Ready", i+1, image), func() (bool, string) {
			d := &appsv1.Deployment{}
			if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-v1"}, d); err != nil {
				return false, err.Error()
			}
			c := d.Spec.Template.Spec.Containers
			ok := len(c) > 0 && c[0].Image == image && d.Status.ObservedGeneration == d.Generation &&
				d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas
			return ok, fmt.Sprintf("image %v ready %d/%d updated %d", c[0].Image, d.Status.ReadyReplicas, d.Status.Replicas, d.Status.UpdatedReplicas)
		})
		out = append(out, time.Since(start))
	}
	return out
}

// logNodeRSS reports the real node's memory: containerd, the shims, and
// the pods' processes.
func logNodeRSS(t *testing.T, s *Stack) {
	rss := vmRSSKiB
	containerd := 0
	if s.Node.containerd != nil && s.Node.containerd.Process != nil {
		containerd = rss(s.Node.containerd.Process.Pid)
	}
	shims, pods := 0, 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "containerd-shim" {
			shims += rss(pid)
		}
	}
	seen := map[int]bool{}
	for _, cg := range kubepodsCgroups("kubepods") {
		if !strings.HasPrefix(cg, "/sys/fs/cgroup/pids/") {
			continue
		}
		b, _ := os.ReadFile(cg + "/cgroup.procs")
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				pods += rss(pid)
			}
		}
	}
	t.Logf("RESULT RSS of the real node: containerd %d MiB, shims %d MiB, the pods' processes %d MiB (%d processes; Scribe's pod among them)",
		containerd/1024, shims/1024, pods/1024, len(seen))
}
