package controller_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// metricsWorkload is a Workload of three canary steps in status st.
func metricsWorkload(st scribev1.WorkloadStatus) *scribev1.Workload {
	return &scribev1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart"},
		Spec: scribev1.WorkloadSpec{Rollout: &scribev1.Rollout{Steps: []scribev1.RolloutStep{
			{Weight: 10}, {Weight: 50}, {Weight: 100},
		}}},
		Status: st,
	}
}

func canaryAt(step int32, weight int32, checks ...scribev1.CheckResult) scribev1.WorkloadStatus {
	return scribev1.WorkloadStatus{
		Phase: scribev1.WorkloadProgressing, StableVersion: "v1", CanaryVersion: "v2", Step: step,
		Traffic: []scribev1.VersionWeight{{Version: "v1", Weight: 100 - weight}, {Version: "v2", Weight: weight}},
		Checks:  checks,
	}
}

func stableOn(version string, phase scribev1.WorkloadPhase, rolledBack string) scribev1.WorkloadStatus {
	return scribev1.WorkloadStatus{
		Phase: phase, StableVersion: version, Step: -1, RolledBackVersion: rolledBack,
		Traffic: []scribev1.VersionWeight{{Version: version, Weight: 100}},
	}
}

// objectSeries are the values of the series of the objects shop/name,
// each named by its metric without scribe_ and its phase or check label.
func objectSeries(t *testing.T, reg prometheus.Gatherer, name string) map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] != "shop" || l["name"] != name {
				continue
			}
			key := strings.TrimPrefix(mf.GetName(), "scribe_")
			for _, k := range []string{"phase", "check"} {
				if l[k] != "" {
					key += "{" + l[k] + "}"
				}
			}
			switch {
			case m.GetGauge() != nil:
				got[key] = trimFloat(m.GetGauge().GetValue())
			case m.GetCounter() != nil:
				got[key] = trimFloat(m.GetCounter().GetValue())
			case m.GetHistogram() != nil:
				got[key] = "count=" + trimFloat(float64(m.GetHistogram().GetSampleCount())) + " sum=" + trimFloat(m.GetHistogram().GetSampleSum())
			}
		}
	}
	return got
}

func trimFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func TestWorkloadMetricsFollowTheSavedStatus(t *testing.T) {
	key := types.NamespacedName{Namespace: "shop", Name: "cart"}
	passed := scribev1.CheckResult{Name: "errors", Passed: true, Value: "0.01"}
	failed := scribev1.CheckResult{Name: "errors", Value: "0.2"}
	unsure := scribev1.CheckResult{Name: "latency", Inconclusive: true}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		// statuses are saved one after the other, a minute apart.
		statuses []scribev1.WorkloadStatus
		want     map[string]string
	}{{
		name:     "a canary at its second step shows its weights, step and checks",
		statuses: []scribev1.WorkloadStatus{canaryAt(1, 50, passed, unsure)},
		want: map[string]string{
			"resource_phase{Progressing}": "1", "resource_phase{Healthy}": "0", "resource_phase{Pending}": "0",
			"resource_phase{RolledBack}": "0", "resource_phase{Failed}": "0", "resource_phase{Deleting}": "0",
			"workload_canary_weight": "50", "workload_stable_weight": "50", "workload_step": "2", "workload_steps": "3",
			"workload_rollbacks_total": "0", "workload_check_passed{errors}": "1", "workload_check_value{errors}": "0.01",
		},
	}, {
		name:     "a step seen to start and advance is timed; the first, whose start was not seen, is not",
		statuses: []scribev1.WorkloadStatus{canaryAt(0, 10), canaryAt(1, 50), canaryAt(2, 100)},
		want: map[string]string{
			"resource_phase{Progressing}": "1", "resource_phase{Healthy}": "0", "resource_phase{Pending}": "0",
			"resource_phase{RolledBack}": "0", "resource_phase{Failed}": "0", "resource_phase{Deleting}": "0",
			"workload_canary_weight": "100", "workload_stable_weight": "0", "workload_step": "3", "workload_steps": "3",
			"workload_rollbacks_total": "0", "workload_step_duration_seconds": "count=1 sum=60",
		},
	}, {
		name: "a promotion times the last step and leaves no canary",
		statuses: []scribev1.WorkloadStatus{
			stableOn("v1", scribev1.WorkloadHealthy, ""), canaryAt(0, 10), canaryAt(1, 50), canaryAt(2, 100),
			stableOn("v2", scribev1.WorkloadProgressing, ""), stableOn("v2", scribev1.WorkloadHealthy, ""),
		},
		want: map[string]string{
			"resource_phase{Progressing}": "0", "resource_phase{Healthy}": "1", "resource_phase{Pending}": "0",
			"resource_phase{RolledBack}": "0", "resource_phase{Failed}": "0", "resource_phase{Deleting}": "0",
			"workload_canary_weight": "0", "workload_stable_weight": "100", "workload_step": "0", "workload_steps": "3",
			"workload_rollbacks_total": "0", "workload_step_duration_seconds": "count=3 sum=180",
		},
	}, {
		name: "a rollback is counted once and drops the checks it no longer reports",
		statuses: []scribev1.WorkloadStatus{
			canaryAt(0, 10, passed, unsure), canaryAt(0, 10, failed), stableOn("v1", scribev1.WorkloadRolledBack, "v2"),
			stableOn("v1", scribev1.WorkloadRolledBack, "v2"),
		},
		want: map[string]string{
			"resource_phase{Progressing}": "0", "resource_phase{Healthy}": "0", "resource_phase{Pending}": "0",
			"resource_phase{RolledBack}": "1", "resource_phase{Failed}": "0", "resource_phase{Deleting}": "0",
			"workload_canary_weight": "0", "workload_stable_weight": "100", "workload_step": "0", "workload_steps": "3",
			"workload_rollbacks_total": "1",
		},
	}, {
		name:     "a rollback this process did not see happen is not counted",
		statuses: []scribev1.WorkloadStatus{stableOn("v1", scribev1.WorkloadRolledBack, "v2")},
		want: map[string]string{
			"resource_phase{Progressing}": "0", "resource_phase{Healthy}": "0", "resource_phase{Pending}": "0",
			"resource_phase{RolledBack}": "1", "resource_phase{Failed}": "0", "resource_phase{Deleting}": "0",
			"workload_canary_weight": "0", "workload_stable_weight": "100", "workload_step": "0", "workload_steps": "3",
			"workload_rollbacks_total": "0",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := controller.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			now := t0
			controller.SetMetricsClock(m, func() time.Time { return now })
			for _, st := range tc.statuses {
				m.Observe(scribev1.WorkloadKind, key, metricsWorkload(st))
				now = now.Add(time.Minute)
			}
			assertSeries(t, objectSeries(t, reg, "cart"), tc.want)
			problems, err := testutil.GatherAndLint(reg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("metric %s: %s", p.Metric, p.Text)
			}
		})
	}
}

func assertSeries(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s = %q", k, v)
		}
	}
}

func TestObjectMetricsGoWithTheObject(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind string
		obj  func(key types.NamespacedName) client.Object
		gone client.Object
	}{
		{"a deleted Workload", scribev1.WorkloadKind, func(types.NamespacedName) client.Object {
			return metricsWorkload(canaryAt(1, 50, scribev1.CheckResult{Name: "errors", Passed: true, Value: "1"}))
		}, nil},
		{"a Workload read back empty", scribev1.WorkloadKind, func(types.NamespacedName) client.Object {
			return metricsWorkload(canaryAt(1, 50))
		}, &scribev1.Workload{}},
		{"a deleted Experiment", scribev1.ExperimentKind, func(key types.NamespacedName) client.Object {
			return &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Status: scribev1.ExperimentStatus{Phase: scribev1.ExperimentRunning, Stage: 4}}
		}, nil},
		{"a deleted Pipeline", scribev1.PipelineKind, func(key types.NamespacedName) client.Object {
			return &scribev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec: scribev1.PipelineSpec{Stages: []scribev1.PipelineStage{{Name: "dev"}, {Name: "prod"}}}}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := controller.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			key := types.NamespacedName{Namespace: "shop", Name: "cart"}
			other := types.NamespacedName{Namespace: "shop", Name: "other"}
			m.Observe(tc.kind, key, tc.obj(key))
			m.Observe(tc.kind, other, tc.obj(other))
			if got := objectSeries(t, reg, "cart"); len(got) == 0 {
				t.Fatal("no series before the deletion")
			}
			others := objectSeries(t, reg, "other")
			if tc.gone == nil {
				m.Observe(tc.kind, key, nil)
			} else {
				m.Observe(tc.kind, key, tc.gone)
			}
			if got := objectSeries(t, reg, "cart"); len(got) != 0 {
				t.Errorf("series left after the deletion: %v", got)
			}
			assertSeries(t, objectSeries(t, reg, "other"), others)
		})
	}
}

func TestExperimentAndPipelineMetricsShowTheirPhaseAndStage(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := controller.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "shop", Name: "cart"}
	m.Observe(scribev1.ExperimentKind, key, &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart"},
		Status: scribev1.ExperimentStatus{Phase: scribev1.ExperimentProvisioning, Stage: 2}})
	p := &scribev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart"},
		Spec: scribev1.PipelineSpec{Stages: []scribev1.PipelineStage{{Name: "dev"}, {Name: "staging"}, {Name: "prod"}}},
		Status: scribev1.PipelineStatus{Version: "v2", Stages: []scribev1.PipelineStageStatus{
			{Name: "dev", Stable: "v2"}, {Name: "staging", Stable: "v1", InFlight: "v2"}, {Name: "prod", Stable: "v1"},
		}, Conditions: []metav1.Condition{{Type: scribev1.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: "Progressing"}}},
	}
	m.Observe(scribev1.PipelineKind, key, p)
	got := objectSeries(t, reg, "cart")
	want := map[string]string{
		"resource_phase{Pending}": "0", "resource_phase{Provisioning}": "1", "resource_phase{Ready}": "0",
		"resource_phase{Running}": "0", "resource_phase{Complete}": "0", "resource_phase{Failed}": "0",
		"experiment_stage": "2",
		// The Pipeline's: Ready is shared with the Experiment's phase names.
		"resource_phase{Progressing}": "1", "resource_phase{Stalled}": "0", "resource_phase{NotReady}": "0",
		"pipeline_stages": "3", "pipeline_stages_at_version": "1",
	}
	// The two kinds' "Ready" series are told apart by kind, which the
	// map does not show: check the count instead.
	if n := testutil.ToFloat64(m.Phase.WithLabelValues(scribev1.PipelineKind, "shop", "cart", controller.PipelinePhaseReady)); n != 0 {
		t.Errorf("Pipeline phase Ready = %v, want 0", n)
	}
	assertSeries(t, got, want)
}
