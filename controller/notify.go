package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// NotifyOptions configure where Scribe's Events go besides the API server.
type NotifyOptions struct {
	// EventsAddr is the address Events are also POSTed to as Flux's
	// eventv1.Event, notification-controller's event endpoint (the
	// --events-addr flag of Flux's controllers); empty posts nothing.
	EventsAddr string
	// Namespace holds the ConfigMap NotificationsConfigMap and the Secret
	// NotificationsSecret of the notifications engine (Argo CD's and Argo
	// Rollouts' triggers, templates and services); empty sends none.
	Namespace string
	// Registerer receives the scribe_notifications_total counter; nil
	// registers nothing.
	Registerer prometheus.Registerer
}

// The ConfigMap and Secret of the notifications engine, in
// NotifyOptions.Namespace, as argocd-notifications-cm and
// argocd-notifications-secret are Argo CD's.
const (
	NotificationsConfigMap = "scribe-notifications-cm"
	NotificationsSecret    = "scribe-notifications-secret"
)

// eventSource is the reporting controller of Scribe's Events.
const eventSource = "scribe-controller"

// setupNotifier is the recorder of every reconciler (see Notifier): it
// records to the API server and, as opts ask, to Flux's
// notification-controller and Argo's notifications engine.
func setupNotifier(mgr ctrl.Manager, opts NotifyOptions) (*Notifier, error) {
	log := mgr.GetLogger().WithName("notifications")
	var sinks []sink
	if opts.EventsAddr != "" {
		fs, err := newFluxSink(mgr.GetScheme(), log, opts.EventsAddr)
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, fs)
	}
	if opts.Namespace != "" {
		sinks = append(sinks, newEngineSink(mgr.GetAPIReader(), opts.Namespace))
	}
	n, err := newNotifier(mgr.GetEventRecorder(eventSource), mgr.GetScheme(), log, opts.Registerer, sinks...)
	if err != nil {
		return nil, err
	}
	if len(sinks) > 0 {
		if err := mgr.Add(n); err != nil {
			return nil, fmt.Errorf("start notifications: %w", err)
		}
	}
	return n, nil
}

// notifyQueueLen bounds the notifications waiting for one sink: past it a
// notification is dropped (and counted), never waited for.
const notifyQueueLen = 512

// notification is one Event as the sinks other than the API server see
// it: a copy of the object when it was recorded, with its kind set.
type notification struct {
	obj      runtime.Object
	kind     string
	typ      string // Normal or Warning
	reason   string
	message  string
	revision string
}

// sink delivers notifications to one place. send must return by ctx's
// deadline or soon after; an error is logged and counted, never retried
// by the notifier.
type sink interface {
	name() string
	send(ctx context.Context, n notification) error
}

// Notifier is the one place where an Event of a reconciler becomes a
// Kubernetes Event (at once, as before) and, off the reconcile, a Flux
// event POST and the notifications engine's sends. It is the
// events.EventRecorder every reconciler records to; a sink that fails or
// hangs costs a log line and a count, never a reconcile's time: each sink
// has its own bounded queue and worker, and each send its own deadline.
type Notifier struct {
	events  events.EventRecorder
	scheme  *runtime.Scheme
	log     logr.Logger
	queues  []*sinkQueue
	results *prometheus.CounterVec
	// timeout bounds one notification's send to one sink.
	timeout time.Duration

	// published remembers each object's last published revision, for
	// the Events recorded while a new intent has none yet (see
	// revision).
	mu        sync.Mutex
	published map[types.UID]string
}

// maxRemembered bounds Notifier.published: past it, it starts again.
const maxRemembered = 10000

var _ events.EventRecorder = (*Notifier)(nil)

type sinkQueue struct {
	sink sink
	ch   chan notification
	// hung counts the sends past their deadline still running: at
	// maxHungSends the sink is skipped until one returns.
	hung atomic.Int32
}

// maxHungSends bounds the goroutines one sink's hung sends may hold.
const maxHungSends = 4

// newNotifier records to rec and delivers to sinks once started.
func newNotifier(rec events.EventRecorder, scheme *runtime.Scheme, log logr.Logger, reg prometheus.Registerer, sinks ...sink) (*Notifier, error) {
	n := &Notifier{
		published: map[types.UID]string{},
		events:    rec,
		scheme:    scheme,
		log:       log,
		timeout:   30 * time.Second,
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scribe_notifications_total",
			Help: "Events delivered to a notification sink (flux, engine) by result: sent, failed, dropped (queue full).",
		}, []string{"sink", "result"}),
	}
	if reg != nil {
		if err := reg.Register(n.results); err != nil {
			return nil, fmt.Errorf("register notification metrics: %w", err)
		}
	}
	for _, s := range sinks {
		n.queues = append(n.queues, &sinkQueue{sink: s, ch: make(chan notification, notifyQueueLen)})
	}
	return n, nil
}

// Eventf records the Event in the API server and queues it for every
// sink. It never blocks on a sink.
func (n *Notifier) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if n.events != nil {
		n.events.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
	if len(n.queues) == 0 || regarding == nil {
		return
	}
	no, err := n.notification(regarding, eventtype, reason, fmt.Sprintf(note, args...))
	if err != nil {
		n.log.Error(err, "event not forwarded", "reason", reason)
		return
	}
	for _, q := range n.queues {
		select {
		case q.ch <- no:
		default:
			n.results.WithLabelValues(q.sink.name(), "dropped").Inc()
			n.log.Info("notification dropped: queue full", "sink", q.sink.name(), "reason", reason)
		}
	}
}

// notification copies obj (the reconciler goes on changing it) and
// names its kind, which typed objects from the cache leave empty.
func (n *Notifier) notification(obj runtime.Object, typ, reason, message string) (notification, error) {
	gvk, err := apiutil.GVKForObject(obj, n.scheme)
	if err != nil {
		return notification{}, fmt.Errorf("kind of the event's object: %w", err)
	}
	cp := obj.DeepCopyObject()
	cp.GetObjectKind().SetGroupVersionKind(gvk)
	if typ == "" {
		typ = corev1.EventTypeNormal
	}
	return notification{obj: cp, kind: gvk.Kind, typ: typ, reason: reason, message: message, revision: n.revision(cp)}, nil
}

// revision is the commit an Event is about: the object's published
// revision or, while a new intent is being committed (a rollback, the
// next step: status has no revision then), the last one published before
// it, the revision the Event moves away from.
func (n *Notifier) revision(obj runtime.Object) string {
	rev := statusRevision(obj)
	o, ok := obj.(metav1.Object)
	if !ok || o.GetUID() == "" {
		return rev
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if rev == "" {
		return n.published[o.GetUID()]
	}
	if len(n.published) >= maxRemembered {
		clear(n.published)
	}
	n.published[o.GetUID()] = rev
	return rev
}

// statusRevision is the revision obj's status says is published.
func statusRevision(obj runtime.Object) string {
	switch o := obj.(type) {
	case *scribev1.Workload:
		return o.Status.Revision
	case *scribev1.Experiment:
		return o.Status.Revision
	case *scribev1.Repository:
		return o.Status.Revision
	}
	return ""
}

// Start runs one worker per sink until ctx ends (a manager Runnable).
// Notifications still queued then are dropped.
func (n *Notifier) Start(ctx context.Context) error {
	done := make(chan struct{}, len(n.queues))
	for _, q := range n.queues {
		go func() {
			defer func() { done <- struct{}{} }()
			n.work(ctx, q)
		}()
	}
	for range n.queues {
		<-done
	}
	return nil
}

// NeedLeaderElection: every replica's reconcilers record Events only
// while they lead, so the sinks run everywhere.
func (n *Notifier) NeedLeaderElection() bool { return false }

func (n *Notifier) work(ctx context.Context, q *sinkQueue) {
	for {
		select {
		case <-ctx.Done():
			return
		case no := <-q.ch:
			n.deliver(ctx, q, no)
		}
	}
}

// deliver sends no to s within n.timeout. A send that does not return by
// then is left to finish on its own (some senders take no context).
func (n *Notifier) deliver(ctx context.Context, q *sinkQueue, no notification) {
	s := q.sink
	var err error
	if h := q.hung.Load(); h >= maxHungSends {
		err = fmt.Errorf("skipped: %d earlier sends still hang", h)
	} else {
		err = n.sendWithin(ctx, q, no)
	}
	log := n.log.WithValues("sink", s.name(), "kind", no.kind, "reason", no.reason)
	if o, ok := no.obj.(metav1.Object); ok {
		log = log.WithValues("namespace", o.GetNamespace(), "name", o.GetName())
	}
	if err != nil {
		n.results.WithLabelValues(s.name(), "failed").Inc()
		log.Error(err, "notification failed")
		return
	}
	n.results.WithLabelValues(s.name(), "sent").Inc()
	log.V(1).Info("notification sent")
}

// sendWithin sends no to q's sink, waiting at most n.timeout.
func (n *Notifier) sendWithin(ctx context.Context, q *sinkQueue, no notification) error {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	errc := make(chan error, 1)
	q.hung.Add(1)
	go func() {
		err := q.sink.send(ctx, no)
		q.hung.Add(-1)
		errc <- err
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return fmt.Errorf("not sent within %s", n.timeout)
	}
}

// objectMap is obj as the JSON the templates of the notifications engine
// read (.workload.status.phase, …).
func objectMap(obj runtime.Object) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode the event's object: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode the event's object: %w", err)
	}
	return m, nil
}
