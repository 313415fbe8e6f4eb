package controller_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
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

// BenchmarkBystanderChangeWhileLargestExperimentsRenderStage2 is issue
// 27's bystander figure with the largest Experiment the CRD allows: each
// of K tenants (SCRIBE_BENCH_LARGEST, a comma-separated list of K, one
// sub-benchmark each; default 2,4) has one Experiment of 32 vcluster
// targets × 8 apps (256 components, the CRD's cap) from its own published
// catalog. The test plays Flux for their first stage (the per-Experiment
// Kustomization applied, each vcluster's HelmRelease Ready and its
// kubeconfig Secret exported), so all K render their second stage (the
// components) at once, and while they do, another tenant changes its
// one-version Workload again and again, each change a commit interval
// after the last commit (so it measures one change, not a burst's
// pacing), until every second stage is committed and no heavy render
// runs or waits. With the controller's defaults (workers, MaxRenders,
// the 2 s poll, the commit interval), it reports the bystander's change →
// commit seconds (median and max, over the samples changed while a heavy
// render held a slot; and the same before the Experiments exist), the
// seconds until every second stage is committed and until the last heavy
// render ended, the mean seconds of one Experiment render in that window
// (scribe_render_duration_seconds), the most Experiment renders that
// ended while one bystander change waited, and the test process's peak
// RSS (VmHWM of /proc/self/status, reset before the Experiments are
// created, so their first stages' renders count too) and Go heap. A
// sub-benchmark run after another starts with what the earlier one left
// in the heap (RSS-before-MiB says how much): for a figure of its own,
// run one K per process. The controller runs in the test process, beside the test's
// client and the git servers' HTTP side; the kube-apiserver, etcd, git's
// children and the catalog checker are other processes and not counted.
// Run it with -benchtime=1x.
func BenchmarkBystanderChangeWhileLargestExperimentsRenderStage2(b *testing.B) {
	for _, k := range envInts("SCRIBE_BENCH_LARGEST", []int{2, 4}) {
		b.Run(fmt.Sprintf("%d-experiments", k), func(b *testing.B) {
			for range b.N {
				benchLargestStage2(b, k)
			}
		})
	}
}

// idleSamples is how many bystander changes measure its latency with no
// Experiment present.
const idleSamples = 5

func benchLargestStage2(b *testing.B, k int) {
	b.StopTimer()
	tenants := make([]*fixture, k)
	namespaces := make([]string, 0, k+1)
	for i := range tenants {
		f := newFixture(b)
		f.publishCatalogWith(b, largestAppsCatalog())
		if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
			b.Fatal(err)
		}
		tenants[i] = f
		namespaces = append(namespaces, f.ns)
	}
	by := newFixture(b)
	if err := by.e.c.Create(by.ctx(), by.repo); err != nil {
		b.Fatal(err)
	}
	namespaces = append(namespaces, by.ns)
	expInstallCRDs(b, by, helmReleaseCRD)
	m, reg := renderMetrics(b)
	p := startFairnessManager(b, by.e.cfg, namespaces, controller.Options{Metrics: m})

	// Warm (the git cache cloned), then the bystander's latency alone.
	if err := by.e.c.Create(by.ctx(), bystanderWorkload(by.ns)); err != nil {
		b.Fatal(err)
	}
	changeLatency(b, by, 0)
	idle := make([]time.Duration, 0, idleSamples)
	for i := range idleSamples {
		idle = append(idle, changeLatency(b, by, i+1))
	}

	// Every tenant's largest Experiment, committed at its first stage
	// (the clusters) and waiting for its applier. The peaks are from
	// here: the first stages' renders are as large.
	rssBefore := vmRSS()
	resetHWM()
	heap := sampleHeap(100 * time.Millisecond)
	for _, f := range tenants {
		if err := f.e.c.Create(f.ctx(), largestExperiment(f.ns, "largest")); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range tenants {
		f.waitStageLong(b, "largest", scribev1.StageClusters)
	}
	renders0, seconds0 := renderTotals(b, reg, scribev1.ExperimentKind)
	b.StartTimer()
	start := time.Now()
	for _, f := range tenants {
		f.playVClusters(b, "largest")
		f.applyStage(b, "largest", scribev1.StageClusters)
	}
	allAtStage2 := func() bool {
		for _, f := range tenants {
			if !stageCommitted(f.experiment(b, "largest"), scribev1.StageComponents) {
				return false
			}
		}
		return true
	}
	// Until every second stage is committed and no heavy render runs or
	// waits any more (a render that follows a commit counts too).
	var (
		busy                []time.Duration
		mostAhead           int
		stage2Done, quietAt time.Duration
	)
	for i := idleSamples + 1; ; i++ {
		_, heavy, waiting := controller.RenderSlots(p)
		if stage2Done == 0 && allAtStage2() {
			stage2Done = time.Since(start)
		}
		if stage2Done != 0 && heavy == 0 && waiting == 0 {
			quietAt = time.Since(start)
			break
		}
		before := renderCount(b, reg, scribev1.ExperimentKind)
		d := changeLatency(b, by, i)
		if heavy > 0 { // else no heavy render was running when it changed
			busy = append(busy, d)
			mostAhead = max(mostAhead, renderCount(b, reg, scribev1.ExperimentKind)-before)
		}
	}
	b.StopTimer()
	heap.end()
	peakRSS := vmHWM()
	renders1, seconds1 := renderTotals(b, reg, scribev1.ExperimentKind)
	renders := renders1 - renders0
	meanRender := 0.0
	if renders > 0 {
		meanRender = (seconds1 - seconds0) / float64(renders)
	}
	if len(busy) == 0 {
		b.Fatalf("no bystander change was made while a heavy render ran (every second stage committed after %s)", stage2Done)
	}
	b.ReportMetric(median(idle).Seconds(), "s-idle-median")
	b.ReportMetric(slices.Max(idle).Seconds(), "s-idle-max")
	b.ReportMetric(median(busy).Seconds(), "s-bystander-median")
	b.ReportMetric(slices.Max(busy).Seconds(), "s-bystander-max")
	b.ReportMetric(float64(len(busy)), "bystander-samples")
	b.ReportMetric(float64(mostAhead), "max-exp-renders-during-sample")
	b.ReportMetric(stage2Done.Seconds(), "s-stage2-all-committed")
	b.ReportMetric(quietAt.Seconds(), "s-heavy-renders-done")
	b.ReportMetric(float64(renders), "exp-renders")
	b.ReportMetric(meanRender, "s-exp-render-mean")
	b.ReportMetric(rssBefore, "RSS-before-MiB")
	b.ReportMetric(peakRSS, "peak-RSS-MiB")
	b.ReportMetric(float64(heap.inuse)/(1<<20), "peak-heap-MiB")
	b.Logf("%d largest Experiments (32 vcluster targets × 8 apps) at stage 2: bystander change → commit median %s max %s over %d samples (idle: median %s max %s); at most %d Experiment renders ended during one sample; every stage 2 committed after %s, the last heavy render done after %s; %d Experiment renders, mean %.2f s; RSS %.0f MiB before, peak %.0f MiB; heap in use peak %.0f MiB, live peak %.0f MiB",
		k, median(busy).Round(time.Millisecond), slices.Max(busy).Round(time.Millisecond), len(busy),
		median(idle).Round(time.Millisecond), slices.Max(idle).Round(time.Millisecond), mostAhead,
		stage2Done.Round(time.Millisecond), quietAt.Round(time.Millisecond), renders, meanRender, rssBefore, peakRSS,
		float64(heap.inuse)/(1<<20), float64(heap.live)/(1<<20))
}

// helmReleaseCRD is Flux's HelmRelease, which a vcluster target's
// cluster is read back from.
const helmReleaseCRD = "flux-helm/helm.toolkit.fluxcd.io_helmreleases.yaml"

// largestApps is how many apps each target of largestExperiment has: 32
// targets × 8 = 256 components, the most an Experiment may have.
const largestApps = 8

// largestAppsCatalog is a platform team's entries.cue with the apps
// largestExperiment delivers: app0 … app7, each an OCI artifact.
func largestAppsCatalog() string {
	var s strings.Builder
	s.WriteString("package catalog\n")
	for i := range largestApps {
		fmt.Fprintf(&s, "\nentries: \"app%d\": {\n\tkind: \"app\"\n\tsource: {type: \"oci\", url: \"oci://registry.example.com/app%d\", tag: \"1.0.0\"}\n\t#Params: {}\n}\n", i, i)
	}
	return s.String()
}

// largestExperiment is the largest Experiment the CRD allows: 32 vcluster
// targets of largestApps apps each.
func largestExperiment(ns, name string) *scribev1.Experiment {
	e := &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	for i := range 32 {
		t := scribev1.Target{Name: fmt.Sprintf("t%02d", i), Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterVCluster}}
		for a := range largestApps {
			t.Components = append(t.Components, scribev1.Component{App: fmt.Sprintf("app%d", a)})
		}
		e.Spec.Targets = append(e.Spec.Targets, t)
	}
	return e
}

// waitStageLong is waitStage for an Experiment whose render takes long,
// behind others: at most 30 minutes.
func (f *fixture) waitStageLong(t testing.TB, name string, n int32) {
	t.Helper()
	waitForLong(t, 30*time.Minute, 250*time.Millisecond, fmt.Sprintf("experiment %s: stage %d committed", name, n), func() (bool, string) {
		e := f.experiment(t, name)
		return stageCommitted(e, n), expState(e)
	})
}

// playVClusters does what Flux's helm-controller and vcluster do for the
// vcluster targets of Experiment name's committed first stage: each
// HelmRelease the render generated is installed (Ready for its
// generation) and has exported its kubeconfig Secret
// (<HelmRelease name>-kubeconfig, as the render's values name it).
func (f *fixture) playVClusters(t testing.TB, name string) {
	t.Helper()
	ctx := f.ctx()
	e := f.experiment(t, name)
	if e.Status.GeneratedResources == nil {
		t.Fatalf("experiment %s has no generatedResources: %s", name, expState(e))
	}
	played := 0
	for _, o := range e.Status.GeneratedResources.Objects {
		if o.Kind != "HelmRelease" {
			continue
		}
		hr := &unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{
				"interval": "10m",
				"chart":    map[string]any{"spec": map[string]any{"chart": "vcluster", "sourceRef": map[string]any{"kind": "HelmRepository", "name": o.Name + "-vcluster"}}},
			},
		}}
		hr.SetAPIVersion(o.APIVersion)
		hr.SetKind(o.Kind)
		hr.SetNamespace(o.Namespace)
		hr.SetName(o.Name)
		if err := f.e.c.Create(ctx, hr); err != nil {
			t.Fatalf("create HelmRelease %s/%s: %v", o.Namespace, o.Name, err)
		}
		hr.Object["status"] = map[string]any{
			"observedGeneration": hr.GetGeneration(),
			"conditions": []any{map[string]any{
				"type": meta.ReadyCondition, "status": "True", "reason": "InstallSucceeded", "message": "Helm install succeeded",
				"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339), "observedGeneration": hr.GetGeneration(),
			}},
		}
		if err := f.e.c.Status().Update(ctx, hr); err != nil {
			t.Fatalf("HelmRelease %s/%s status: %v", o.Namespace, o.Name, err)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: o.Name + "-kubeconfig"},
			Data: map[string][]byte{"config": []byte("apiVersion: v1\nkind: Config\n")}}
		if err := f.e.c.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		played++
	}
	if played != len(e.Spec.Targets) {
		t.Fatalf("experiment %s: %d HelmReleases generated for %d vcluster targets", name, played, len(e.Spec.Targets))
	}
}

// bystanderWorkload is a one-version Workload with no rollout: a change
// to it is one commit.
func bystanderWorkload(ns string) *scribev1.Workload {
	return &scribev1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: ns},
		Spec: scribev1.WorkloadSpec{
			Service:  scribev1.ServiceSpec{Ports: []scribev1.ServicePort{{Name: "http", Port: 80, TargetPort: 8080}}},
			Versions: []scribev1.Version{{Name: "v1", Image: "ghcr.io/example/web:v1"}},
		},
	}
}

// changeLatency sets the bystander Workload's SAMPLE variable to i and
// returns the time from the change until its commit is in the status.
func changeLatency(b *testing.B, f *fixture, i int) time.Duration {
	b.Helper()
	key := types.NamespacedName{Namespace: f.ns, Name: "bystander"}
	w := &scribev1.Workload{}
	if err := f.e.c.Get(f.ctx(), key, w); err != nil {
		b.Fatal(err)
	}
	prev := w.Status.Revision
	// The previous commit to the branch was at least CommitInterval ago:
	// the change is measured alone, not paced as part of a burst.
	time.Sleep(gitsink.DefaultCommitInterval + 100*time.Millisecond)
	patch := client.MergeFrom(w.DeepCopy())
	w.Spec.Versions[0].Env = []corev1.EnvVar{{Name: "SAMPLE", Value: strconv.Itoa(i)}}
	start := time.Now()
	if err := f.e.c.Patch(f.ctx(), w, patch); err != nil {
		b.Fatal(err)
	}
	gen := w.Generation
	waitForLong(b, 30*time.Minute, 20*time.Millisecond, fmt.Sprintf("bystander change %d committed", i), func() (bool, string) {
		got := &scribev1.Workload{}
		if err := f.e.c.Get(f.ctx(), key, got); err != nil {
			return false, err.Error()
		}
		return got.Status.ObservedGeneration >= gen && got.Status.Revision != "" && got.Status.Revision != prev,
			fmt.Sprintf("generation %d observed %d phase %s", gen, got.Status.ObservedGeneration, got.Status.Phase)
	})
	return time.Since(start)
}

// median is the middle of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// envInts reads a comma-separated list of positive integers from the
// environment, or def.
func envInts(name string, def []int) []int {
	var out []int
	for _, f := range strings.Split(os.Getenv(name), ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return def
	}
	return out
}
