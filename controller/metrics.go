package controller

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Sinks, the values of the sink label of scribe_publish_duration_seconds.
const (
	SinkGit = "git"
	SinkOCI = "oci"
)

// Metrics are Scribe's own Prometheus collectors. Register them on
// controller-runtime's registry (sigs.k8s.io/controller-runtime/pkg/metrics
// .Registry) so the manager's metrics endpoint serves them next to its own.
//
// The work-queue depth, latency and retries of each reconciler are not
// here: controller-runtime already exports them as workqueue_depth,
// workqueue_queue_duration_seconds, workqueue_retries_total and so on,
// labelled by controller name, as well as
// controller_runtime_reconcile_total and
// controller_runtime_reconcile_time_seconds.
//
// Every method is safe on a nil *Metrics and then does nothing, so a
// reconciler can hold an optional pointer.
type Metrics struct {
	// RenderDuration is scribe_render_duration_seconds{kind}: one CR
	// rendered into a bundle.
	RenderDuration *prometheus.HistogramVec
	// PublishDuration is scribe_publish_duration_seconds{kind,sink}: one
	// bundle published successfully, fetch and retries included.
	PublishDuration *prometheus.HistogramVec
	// PushConflicts is scribe_push_conflicts_total: pushes rejected because
	// the branch moved (non-fast-forward), each followed by a retry.
	PushConflicts prometheus.Counter
	// CommitToApplied is scribe_commit_to_applied_seconds{kind}: from
	// Scribe's commit (or artifact push) to the applier reporting that
	// revision applied and healthy.
	CommitToApplied *prometheus.HistogramVec
	// Published is scribe_published_total{kind,changed}: publishes,
	// changed="true" when a new commit or artifact was made.
	Published *prometheus.CounterVec

	// objectCollectors are the per-object metrics (metrics_objects.go).
	objectCollectors
	state objectState
}

// NewMetrics creates Scribe's collectors and registers them on reg. When
// reg already holds collectors of the same names and labels (a second
// manager in one process), those are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		RenderDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scribe_render_duration_seconds",
			Help:    "Time to render one custom resource into a bundle.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12), // 5 ms … ~10 s
		}, []string{"kind"}),
		PublishDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scribe_publish_duration_seconds",
			Help:    "Time to publish one bundle to its sink, fetch and retries included.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12), // 50 ms … ~100 s
		}, []string{"kind", "sink"}),
		PushConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scribe_push_conflicts_total",
			Help: "Pushes rejected because the branch moved, each retried on the new tip.",
		}),
		CommitToApplied: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scribe_commit_to_applied_seconds",
			Help:    "Time from Scribe's commit to the applier reporting that revision applied and healthy.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14), // 0.5 s … ~68 min
		}, []string{"kind"}),
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scribe_published_total",
			Help: "Bundles published, by whether a new commit or artifact was made.",
		}, []string{"kind", "changed"}),
	}
	var err error
	if m.RenderDuration, err = register(reg, m.RenderDuration); err != nil {
		return nil, err
	}
	if m.PublishDuration, err = register(reg, m.PublishDuration); err != nil {
		return nil, err
	}
	if m.PushConflicts, err = register(reg, m.PushConflicts); err != nil {
		return nil, err
	}
	if m.CommitToApplied, err = register(reg, m.CommitToApplied); err != nil {
		return nil, err
	}
	if m.Published, err = register(reg, m.Published); err != nil {
		return nil, err
	}
	m.objectCollectors = newObjectCollectors()
	if err := m.register(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c on reg, or returns the collector reg already holds
// under the same descriptor.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, fmt.Errorf("register metrics: %w", err)
}

// ObserveRender records one render of a CR of kind.
func (m *Metrics) ObserveRender(kind string, d time.Duration) {
	if m == nil {
		return
	}
	m.RenderDuration.WithLabelValues(kind).Observe(d.Seconds())
}

// ObservePublish records one successful publish of a CR of kind to sink
// (SinkGit or SinkOCI), its duration and whether it changed the target.
func (m *Metrics) ObservePublish(kind, sink string, d time.Duration, changed bool) {
	if m == nil {
		return
	}
	m.PublishDuration.WithLabelValues(kind, sink).Observe(d.Seconds())
	m.Published.WithLabelValues(kind, strconv.FormatBool(changed)).Inc()
}

// IncPushConflict counts one push rejected because the branch moved.
func (m *Metrics) IncPushConflict() {
	if m == nil {
		return
	}
	m.PushConflicts.Inc()
}

// ObserveCommitToApplied records the time from Scribe's commit (committed)
// to the applier reporting it applied and healthy (applied). Nothing is
// recorded when either time is unknown or applied precedes committed.
func (m *Metrics) ObserveCommitToApplied(kind string, committed, applied time.Time) {
	if m == nil || committed.IsZero() || applied.IsZero() || applied.Before(committed) {
		return
	}
	m.CommitToApplied.WithLabelValues(kind).Observe(applied.Sub(committed).Seconds())
}
