package controller_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// startFairnessManager runs Scribe's manager over namespaces (and
// flux-system) until the test ends, and returns its Publisher. Its data
// directory is removed after the manager stops, whatever git children of
// an abandoned render still write there.
func startFairnessManager(t testing.TB, cfg *rest.Config, namespaces []string, opts controller.Options) *controller.Publisher {
	t.Helper()
	nss := map[string]cache.Config{"flux-system": {}}
	for _, ns := range namespaces {
		nss[ns] = cache.Config{}
	}
	dir, err := os.MkdirTemp("", "scribe-fairness-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	opts.DataDir = dir
	_, p := startManager(t, cfg, controller.CacheOptions(nss), nil, opts)
	return p
}

// renderMetrics are the controller's metrics on a registry of their own,
// which renderCount and renderTotals read.
func renderMetrics(t testing.TB) (*controller.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := controller.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// renderCount is the renders of kind the registry's
// scribe_render_duration_seconds observed.
func renderCount(t testing.TB, reg prometheus.Gatherer, kind string) int {
	t.Helper()
	n, _ := renderTotals(t, reg, kind)
	return n
}

// renderTotals is the renders of kind the registry's
// scribe_render_duration_seconds observed and their seconds in all.
func renderTotals(t testing.TB, reg prometheus.Gatherer, kind string) (n int, seconds float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "scribe_render_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					n += int(m.GetHistogram().GetSampleCount())
					seconds += m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return n, seconds
}

// countingConfig is cfg with a counter of the requests whose path
// contains part.
func countingConfig(cfg *rest.Config, part string) (*rest.Config, *atomic.Int64) {
	var n atomic.Int64
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.Contains(req.URL.Path, part) {
				n.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	return c, &n
}

// An Experiment committed and waiting for its applier is reconciled at
// every poll (each reads its namespace's otel-config) but rendered only
// for its commit: its render input did not change.
func TestWaitingExperimentIsNotRenderedAgainAtEachPoll(t *testing.T) {
	f := newFixture(t)
	f.publishCatalog(t)
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	m, reg := renderMetrics(t)
	cfg, polls := countingConfig(f.e.cfg, "/namespaces/"+f.ns+"/configmaps/"+controller.OTELConfigMapName)
	startFairnessManager(t, cfg, []string{f.ns}, controller.Options{Poll: 150 * time.Millisecond, Concurrency: 2, CommitInterval: -1, Metrics: m})
	if err := f.e.c.Create(f.ctx(), hubExperiment(f.ns, "waiting")); err != nil {
		t.Fatal(err)
	}
	f.waitStage(t, "waiting", scribev1.StageClusters)
	// The first poll after the commit renders once more: the sync object
	// the commit recorded in status is a render input (its name is kept
	// across naming migrations).
	settled := polls.Load() + 2
	waitFor(t, "two polls after the commit", func() (bool, string) {
		return polls.Load() >= settled, fmt.Sprintf("%d polls", polls.Load())
	})
	renders, from := renderCount(t, reg, scribev1.ExperimentKind), polls.Load()
	waitFor(t, "five polls of the waiting Experiment", func() (bool, string) {
		return polls.Load() >= from+5, fmt.Sprintf("%d polls", polls.Load()-from)
	})
	if got := renderCount(t, reg, scribev1.ExperimentKind); got != renders {
		t.Errorf("five polls of an Experiment waiting for its applier rendered it %d more times, want none", got-renders)
	}
	if e := f.experiment(t, "waiting"); e.Status.Stage != scribev1.StageClusters {
		t.Errorf("the Experiment moved without evidence: %s", expState(e))
	}
}

// heavyExperiment has 32 vcluster targets of three built-in apps each:
// a render well above the heavy size, lasting seconds.
func heavyExperiment(ns, name string) *scribev1.Experiment {
	e := &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	for i := range 32 {
		e.Spec.Targets = append(e.Spec.Targets, scribev1.Target{
			Name: fmt.Sprintf("t%02d", i), Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterVCluster},
			Components: []scribev1.Component{{App: "demo-services"}, {App: "nginx-ingress"}, {App: "envoy-gateway"}},
		})
	}
	return e
}

// While one tenant's heavy Experiments render (one at a time, the others
// waiting for the heavy slot), another tenant's new Workload takes the
// slot they leave: it is committed before any of them is.
func TestHeavyExperimentsOfOneNamespaceDoNotHoldBackAnotherNamespacesWorkload(t *testing.T) {
	heavyNS, other := newFixture(t), newFixture(t)
	heavyNS.publishCatalog(t)
	for _, f := range []*fixture{heavyNS, other} {
		if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := renderMetrics(t)
	p := startFairnessManager(t, heavyNS.e.cfg, []string{heavyNS.ns, other.ns},
		controller.Options{Poll: 150 * time.Millisecond, Concurrency: 8, CommitInterval: -1, MaxRenders: 2, Metrics: m})
	// A small Experiment first: the catalog is loaded once it commits.
	if err := heavyNS.e.c.Create(heavyNS.ctx(), hubExperiment(heavyNS.ns, "small")); err != nil {
		t.Fatal(err)
	}
	heavyNS.waitStage(t, "small", scribev1.StageClusters)
	var heavy []string
	for i := range 3 {
		name := fmt.Sprintf("heavy-%d", i)
		heavy = append(heavy, name)
		if err := heavyNS.e.c.Create(heavyNS.ctx(), heavyExperiment(heavyNS.ns, name)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a heavy render running and the others waiting", func() (bool, string) {
		running, h, waiting := controller.RenderSlots(p)
		return h == 1 && waiting >= 2, fmt.Sprintf("running=%d heavy=%d waiting=%d", running, h, waiting)
	})
	w := &scribev1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: other.ns},
		Spec: scribev1.WorkloadSpec{
			Service:  scribev1.ServiceSpec{Ports: []scribev1.ServicePort{{Name: "http", Port: 80, TargetPort: 8080}}},
			Versions: []scribev1.Version{{Name: "v1", Image: "ghcr.io/example/web:v1"}},
		},
	}
	if err := other.e.c.Create(other.ctx(), w); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	waitFor(t, "the other namespace's Workload committed", func() (bool, string) {
		got := &scribev1.Workload{}
		if err := other.e.c.Get(other.ctx(), types.NamespacedName{Namespace: other.ns, Name: "bystander"}, got); err != nil {
			return false, err.Error()
		}
		if got.Status.Revision == "" {
			return false, "no commit yet"
		}
		once.Do(func() {
			for _, name := range heavy {
				if e := heavyNS.experiment(t, name); e.Status.Revision != "" {
					t.Errorf("heavy Experiment %s was committed before the other namespace's Workload: %s", name, expState(e))
				}
			}
		})
		return true, ""
	})
}
