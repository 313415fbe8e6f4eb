package controller_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// TestWorkloadMetricsFollowTheControllerAndGoWithTheWorkload: a Workload
// the controller brings to Healthy shows its phase and weights in the
// controller's registry, Deleting while its removal waits for the
// applier, and no series at all once it is gone.
func TestWorkloadMetricsFollowTheControllerAndGoWithTheWorkload(t *testing.T) {
	f := newFixture(t)
	m, reg := renderMetrics(t)
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	startControllerWith(t, f.e, f.ns, controller.Options{Poll: 150 * time.Millisecond, Concurrency: 2, CommitInterval: -1, Metrics: m})
	f.deployStable(t, workload(f.ns, "v1"))
	series := func() map[string]float64 { return webSeries(t, reg, f.ns) }
	waitForSeries(t, "v1 healthy in the metrics", series, map[string]float64{
		"scribe_resource_phase{Healthy}": 1, "scribe_resource_phase{Progressing}": 0,
		"scribe_workload_stable_weight": 100, "scribe_workload_canary_weight": 0, "scribe_workload_step": 0, "scribe_workload_steps": 3,
	})
	ks := kustomizationName("Workload", f.ns, "web")
	if err := f.e.c.Delete(f.ctx(), f.workload(t)); err != nil {
		t.Fatal(err)
	}
	waitForSeries(t, "the Workload Deleting in the metrics", series, map[string]float64{
		"scribe_resource_phase{Deleting}": 1, "scribe_resource_phase{Healthy}": 0,
	})
	f.deleteKustomization(t, ks)
	waitFor(t, "the Workload's series to go", func() (bool, string) {
		s := series()
		return len(s) == 0, fmt.Sprint(s)
	})
}

// webSeries are the series of the Workload ns/web in reg, by metric name
// and phase label.
func webSeries(t *testing.T, reg prometheus.Gatherer, ns string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] != ns || l["name"] != "web" || (l["kind"] != "" && l["kind"] != scribev1.WorkloadKind) {
				continue
			}
			key := mf.GetName()
			if l["phase"] != "" {
				key += "{" + l["phase"] + "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			default:
				out[key] = -1
			}
		}
	}
	return out
}

// waitForSeries waits until every series of want has its value.
func waitForSeries(t *testing.T, what string, series func() map[string]float64, want map[string]float64) {
	t.Helper()
	waitFor(t, what, func() (bool, string) {
		got := series()
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				return false, fmt.Sprint(got)
			}
		}
		return true, ""
	})
}
