package controller_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/scribe-gitops/scribe/controller"
)

func TestMetricsRecordOnTheirRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := controller.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveRender("Workload", 20*time.Millisecond)
	m.ObserveRender("Workload", 30*time.Millisecond)
	m.ObserveRender("Experiment", time.Second)
	m.ObservePublish("Workload", controller.SinkGit, 400*time.Millisecond, true)
	m.ObservePublish("Workload", controller.SinkGit, 300*time.Millisecond, false)
	m.ObservePublish("Experiment", controller.SinkOCI, time.Second, true)
	m.IncPushConflict()
	m.IncPushConflict()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.ObserveCommitToApplied("Workload", t0, t0.Add(7*time.Second))
	m.ObserveCommitToApplied("Workload", t0, t0.Add(-time.Second)) // clock skew: ignored
	m.ObserveCommitToApplied("Workload", time.Time{}, t0)          // unknown commit time: ignored

	if got := testutil.ToFloat64(m.PushConflicts); got != 2 {
		t.Errorf("scribe_push_conflicts_total = %v, want 2", got)
	}
	for _, c := range []struct {
		kind, changed string
		want          float64
	}{{"Workload", "true", 1}, {"Workload", "false", 1}, {"Experiment", "true", 1}} {
		if got := testutil.ToFloat64(m.Published.WithLabelValues(c.kind, c.changed)); got != c.want {
			t.Errorf("scribe_published_total{kind=%q,changed=%q} = %v, want %v", c.kind, c.changed, got, c.want)
		}
	}
	want := `
# HELP scribe_commit_to_applied_seconds Time from Scribe's commit to the applier reporting that revision applied and healthy.
# TYPE scribe_commit_to_applied_seconds histogram
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="0.5"} 0
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="1"} 0
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="2"} 0
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="4"} 0
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="8"} 1
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="16"} 1
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="32"} 1
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="64"} 1
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="128"} 1
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="256"} 1
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="512"} 1
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="1024"} 1
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="2048"} 1
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="4096"} 1
scribe_commit_to_applied_seconds_bucket{kind="Workload",le="+Inf"} 1
scribe_commit_to_applied_seconds_sum{kind="Workload"} 7
scribe_commit_to_applied_seconds_count{kind="Workload"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "scribe_commit_to_applied_seconds"); err != nil {
		t.Error(err)
	}
	// One series per label set.
	for name, want := range map[string]int{
		"scribe_render_duration_seconds":  2, // Workload, Experiment
		"scribe_publish_duration_seconds": 2, // Workload/git, Experiment/oci
		"scribe_published_total":          3,
		"scribe_push_conflicts_total":     1,
	} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != want {
			t.Errorf("%s: %d series (%v), want %d", name, got, err, want)
		}
	}
	lint, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lint {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

func TestMetricsReuseCollectorsOnTheSameRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := controller.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := controller.NewMetrics(reg)
	if err != nil {
		t.Fatalf("second NewMetrics on one registry: %v", err)
	}
	a.IncPushConflict()
	b.IncPushConflict()
	if got := testutil.ToFloat64(a.PushConflicts); got != 2 {
		t.Errorf("shared counter = %v, want 2", got)
	}
}

func TestMetricsRefuseAConflictingCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "scribe_push_conflicts_total", Help: "not ours"}))
	if _, err := controller.NewMetrics(reg); err == nil {
		t.Fatal("NewMetrics succeeded over a conflicting collector")
	}
}

func TestNilMetricsDoNothing(t *testing.T) {
	var m *controller.Metrics
	m.ObserveRender("Workload", time.Second)
	m.ObservePublish("Workload", controller.SinkGit, time.Second, true)
	m.IncPushConflict()
	m.ObserveCommitToApplied("Workload", time.Now(), time.Now())
}
