package controller

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// Pipeline phases, the values of scribe_resource_phase's phase label for a
// Pipeline (whose status has no phase): read from its conditions.
const (
	PipelinePhaseReady       = "Ready"
	PipelinePhaseProgressing = "Progressing"
	PipelinePhaseStalled     = "Stalled"
	PipelinePhaseNotReady    = "NotReady"
)

// phases are the known phases of kind: scribe_resource_phase has one
// series per phase, 1 for the current one and 0 for the others, as Flux's
// gotk_reconcile_condition has one per condition status.
func phases(kind string) []string {
	switch kind {
	case scribev1.WorkloadKind:
		return []string{
			string(scribev1.WorkloadPending), string(scribev1.WorkloadProgressing), string(scribev1.WorkloadHealthy),
			string(scribev1.WorkloadRolledBack), string(scribev1.WorkloadFailed), string(scribev1.WorkloadDeleting),
		}
	case scribev1.ExperimentKind:
		return []string{
			string(scribev1.ExperimentPending), string(scribev1.ExperimentProvisioning), string(scribev1.ExperimentReady),
			string(scribev1.ExperimentRunning), string(scribev1.ExperimentComplete), string(scribev1.ExperimentFailed),
		}
	case scribev1.PipelineKind:
		return []string{PipelinePhaseReady, PipelinePhaseProgressing, PipelinePhaseStalled, PipelinePhaseNotReady}
	}
	return nil
}

// objectCollectors are the per-object metrics, derived from the status a
// reconcile saved (Metrics.Observe). Their labels are the object's kind,
// namespace and name, and a phase or a check name from the object's own
// spec: never free text, so their number is bounded by the objects'.
type objectCollectors struct {
	// Phase is scribe_resource_phase{kind,namespace,name,phase}.
	Phase *prometheus.GaugeVec
	// CanaryWeight is scribe_workload_canary_weight{namespace,name}: the
	// percent of traffic the version rolling out receives (0 when none).
	CanaryWeight *prometheus.GaugeVec
	// StableWeight is scribe_workload_stable_weight{namespace,name}.
	StableWeight *prometheus.GaugeVec
	// Step is scribe_workload_step{namespace,name}: the committed step of
	// the rollout, counted from 1; 0 when no rollout is in progress.
	Step *prometheus.GaugeVec
	// Steps is scribe_workload_steps{namespace,name}: the rollout's steps.
	Steps *prometheus.GaugeVec
	// Rollbacks is scribe_workload_rollbacks_total{namespace,name}.
	Rollbacks *prometheus.CounterVec
	// CheckPassed is scribe_workload_check_passed{namespace,name,check}:
	// 1 when the check's last round passed, 0 when it failed; absent when
	// it was inconclusive.
	CheckPassed *prometheus.GaugeVec
	// CheckValue is scribe_workload_check_value{namespace,name,check}: the
	// value the check last measured, when it is a number.
	CheckValue *prometheus.GaugeVec
	// StepDuration is scribe_workload_step_duration_seconds{namespace,name}:
	// from a step's commit to the next step's or the promotion, observed
	// when the step advances. A step this process did not see start is
	// not observed.
	StepDuration *prometheus.HistogramVec
	// ExperimentStage is scribe_experiment_stage{namespace,name}.
	ExperimentStage *prometheus.GaugeVec
	// PipelineStages is scribe_pipeline_stages{namespace,name}.
	PipelineStages *prometheus.GaugeVec
	// PipelineStagesAtVersion is
	// scribe_pipeline_stages_at_version{namespace,name}: the stages whose
	// stable version is the Pipeline's newest.
	PipelineStagesAtVersion *prometheus.GaugeVec
}

func newObjectCollectors() objectCollectors {
	obj := []string{"namespace", "name"}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append(append([]string{}, obj...), labels...))
	}
	return objectCollectors{
		Phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "scribe_resource_phase",
			Help: "The phase of a Scribe object: 1 for its current phase, 0 for the others.",
		}, []string{"kind", "namespace", "name", "phase"}),
		CanaryWeight: gauge("scribe_workload_canary_weight", "Percent of a Workload's traffic its version rolling out receives."),
		StableWeight: gauge("scribe_workload_stable_weight", "Percent of a Workload's traffic its stable version receives."),
		Step:         gauge("scribe_workload_step", "A Workload's committed rollout step, from 1; 0 when no rollout is in progress."),
		Steps:        gauge("scribe_workload_steps", "The steps of a Workload's rollout."),
		Rollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scribe_workload_rollbacks_total",
			Help: "Rollbacks of a Workload seen by this process.",
		}, obj),
		CheckPassed: gauge("scribe_workload_check_passed", "1 when an analysis check's last round passed, 0 when it failed.", "check"),
		CheckValue:  gauge("scribe_workload_check_value", "The value an analysis check last measured.", "check"),
		StepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scribe_workload_step_duration_seconds",
			Help:    "Time a Workload's rollout spent on a step, observed when the step advances or is promoted.",
			Buckets: prometheus.ExponentialBuckets(5, 2, 12), // 5 s … ~2.8 h
		}, obj),
		ExperimentStage:         gauge("scribe_experiment_stage", "The commit stage an Experiment is at (1 clusters … 4 workflow runs)."),
		PipelineStages:          gauge("scribe_pipeline_stages", "The stages of a Pipeline."),
		PipelineStagesAtVersion: gauge("scribe_pipeline_stages_at_version", "The stages of a Pipeline whose stable version is its newest version."),
	}
}

// register registers every collector on reg (reusing those reg holds).
func (c *objectCollectors) register(reg prometheus.Registerer) error {
	var err error
	for _, g := range []**prometheus.GaugeVec{&c.Phase, &c.CanaryWeight, &c.StableWeight, &c.Step, &c.Steps, &c.CheckPassed, &c.CheckValue, &c.ExperimentStage, &c.PipelineStages, &c.PipelineStagesAtVersion} {
		if *g, err = register(reg, *g); err != nil {
			return err
		}
	}
	if c.Rollbacks, err = register(reg, c.Rollbacks); err != nil {
		return err
	}
	c.StepDuration, err = register(reg, c.StepDuration)
	return err
}

// seen is what Observe last saw of a Workload: what its next status is
// compared with to count rollbacks and time steps.
type seen struct {
	canary, rolledBack string
	step               int32
	// since is when the step was first seen; zero when this process did
	// not see it start.
	since  time.Time
	checks []string
}

// objectState is the last status seen of each Workload.
type objectState struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]seen
	now  func() time.Time
}

// Observe derives the per-object metrics of obj, a Workload, Experiment
// or Pipeline, from the status its reconcile just saved. obj nil: the
// object is gone and its series are removed.
func (m *Metrics) Observe(kind string, key types.NamespacedName, obj client.Object) {
	if m == nil {
		return
	}
	now := time.Now()
	if m.state.now != nil {
		now = m.state.now()
	}
	switch o := obj.(type) {
	case nil:
		m.forget(kind, key)
	case *scribev1.Workload:
		if o.Name == "" {
			m.forget(kind, key)
			return
		}
		m.observeWorkload(key, o, now)
	case *scribev1.Experiment:
		if o.Name == "" {
			m.forget(kind, key)
			return
		}
		m.setPhase(kind, key, string(o.Status.Phase))
		m.ExperimentStage.WithLabelValues(key.Namespace, key.Name).Set(float64(o.Status.Stage))
	case *scribev1.Pipeline:
		if o.Name == "" {
			m.forget(kind, key)
			return
		}
		m.setPhase(kind, key, pipelinePhase(o))
		m.PipelineStages.WithLabelValues(key.Namespace, key.Name).Set(float64(len(o.Spec.Stages)))
		at := 0
		for _, s := range o.Status.Stages {
			if o.Status.Version != "" && s.Stable == o.Status.Version {
				at++
			}
		}
		m.PipelineStagesAtVersion.WithLabelValues(key.Namespace, key.Name).Set(float64(at))
	}
}

// pipelinePhase reads a Pipeline's phase from its conditions.
func pipelinePhase(p *scribev1.Pipeline) string {
	switch {
	case conditions.IsTrue(p, scribev1.StalledCondition):
		return PipelinePhaseStalled
	case conditions.IsTrue(p, scribev1.ReconcilingCondition):
		return PipelinePhaseProgressing
	case conditions.IsTrue(p, scribev1.ReadyCondition):
		return PipelinePhaseReady
	}
	return PipelinePhaseNotReady
}

// setPhase sets the kind's phase series of key: 1 for phase, 0 for the others.
func (m *Metrics) setPhase(kind string, key types.NamespacedName, phase string) {
	for _, p := range phases(kind) {
		v := 0.0
		if p == phase {
			v = 1
		}
		m.Phase.WithLabelValues(kind, key.Namespace, key.Name, p).Set(v)
	}
}

func (m *Metrics) observeWorkload(key types.NamespacedName, w *scribev1.Workload, now time.Time) {
	st := &w.Status
	ns, name := key.Namespace, key.Name
	m.setPhase(scribev1.WorkloadKind, key, string(st.Phase))
	canary, stable := 0.0, 0.0
	for _, t := range st.Traffic {
		switch t.Version {
		case st.CanaryVersion:
			canary = float64(t.Weight)
		case st.StableVersion:
			stable = float64(t.Weight)
		}
	}
	m.CanaryWeight.WithLabelValues(ns, name).Set(canary)
	m.StableWeight.WithLabelValues(ns, name).Set(stable)
	step := 0.0
	if st.CanaryVersion != "" && st.Step >= 0 {
		step = float64(st.Step) + 1
	}
	m.Step.WithLabelValues(ns, name).Set(step)
	m.Steps.WithLabelValues(ns, name).Set(float64(len(steps(w))))
	rollbacks := m.Rollbacks.WithLabelValues(ns, name) // the series exists from the first sighting, at 0

	checks := make([]string, 0, len(st.Checks))
	for _, c := range st.Checks {
		checks = append(checks, c.Name)
		if c.Inconclusive {
			m.CheckPassed.DeleteLabelValues(ns, name, c.Name)
		} else {
			passed := 0.0
			if c.Passed {
				passed = 1
			}
			m.CheckPassed.WithLabelValues(ns, name, c.Name).Set(passed)
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(c.Value), 64); err == nil && !c.Inconclusive {
			m.CheckValue.WithLabelValues(ns, name, c.Name).Set(v)
		} else {
			m.CheckValue.DeleteLabelValues(ns, name, c.Name)
		}
	}

	m.state.mu.Lock()
	prev, ok := m.state.seen[key]
	cur := seen{canary: st.CanaryVersion, rolledBack: st.RolledBackVersion, step: st.Step, since: prev.since, checks: checks}
	switch {
	case !ok:
		cur.since = time.Time{}
	case prev.canary != "" && cur.canary == prev.canary && cur.step > prev.step,
		prev.canary != "" && cur.canary == "" && st.StableVersion == prev.canary:
		// The step advanced, or the last one was promoted.
		if !prev.since.IsZero() {
			m.StepDuration.WithLabelValues(ns, name).Observe(now.Sub(prev.since).Seconds())
		}
		cur.since = now
	case cur.canary != prev.canary:
		// A new version started, or the rollout ended another way.
		cur.since = now
	}
	if ok && cur.rolledBack != "" && cur.rolledBack != prev.rolledBack {
		rollbacks.Inc()
	}
	if m.state.seen == nil {
		m.state.seen = map[types.NamespacedName]seen{}
	}
	m.state.seen[key] = cur
	m.state.mu.Unlock()
	for _, c := range prev.checks {
		if !contains(checks, c) {
			m.CheckPassed.DeleteLabelValues(ns, name, c)
			m.CheckValue.DeleteLabelValues(ns, name, c)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// forget removes every series of the object key of kind.
func (m *Metrics) forget(kind string, key types.NamespacedName) {
	m.Phase.DeletePartialMatch(prometheus.Labels{"kind": kind, "namespace": key.Namespace, "name": key.Name})
	l := prometheus.Labels{"namespace": key.Namespace, "name": key.Name}
	switch kind {
	case scribev1.WorkloadKind:
		for _, g := range []*prometheus.GaugeVec{m.CanaryWeight, m.StableWeight, m.Step, m.Steps, m.CheckPassed, m.CheckValue} {
			g.DeletePartialMatch(l)
		}
		m.Rollbacks.DeletePartialMatch(l)
		m.StepDuration.DeletePartialMatch(l)
		m.state.mu.Lock()
		delete(m.state.seen, key)
		m.state.mu.Unlock()
	case scribev1.ExperimentKind:
		m.ExperimentStage.DeletePartialMatch(l)
	case scribev1.PipelineKind:
		m.PipelineStages.DeletePartialMatch(l)
		m.PipelineStagesAtVersion.DeletePartialMatch(l)
	}
}
