package controller

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	fluxevents "github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fluxSink POSTs Events to Flux's notification-controller as Flux's own
// controllers do, through fluxcd/pkg/runtime/events: an eventv1.Event
// with severity info or error, the reporting controller and instance, and
// metadata keys prefixed with the object's API group (scribe.dev/revision,
// scribe.dev/token) that notification-controller keeps (without the
// prefix) for its Providers, plus the object's own
// event.toolkit.fluxcd.io/ annotations.
type fluxSink struct {
	rec *fluxevents.Recorder
	// mu makes one POST at a time, so that result is this send's.
	mu     sync.Mutex
	result postResult
}

// postResult is what the last POST of the Flux recorder, which reports
// nothing to its caller, got.
type postResult struct {
	status int
	err    error
}

// newFluxSink posts to addr (notification-controller's event endpoint,
// http://notification-controller.flux-system.svc.cluster.local./).
func newFluxSink(scheme *runtime.Scheme, log logr.Logger, addr string) (*fluxSink, error) {
	s := &fluxSink{}
	if log.GetSink() == nil {
		// The Flux recorder asks the sink its level; logr.Discard has none.
		log = funcr.New(func(string, string) {}, funcr.Options{})
	}
	rec, err := fluxevents.NewRecorderForScheme(scheme, noKubeEvents{}, log, addr, eventSource)
	if err != nil {
		return nil, fmt.Errorf("--events-addr %q: %w", addr, err)
	}
	// Flux's defaults retry for up to about a minute; a notification is
	// worth a few seconds of one worker.
	rec.Client.RetryMax = 2
	rec.Client.RetryWaitMin = 200 * time.Millisecond
	rec.Client.RetryWaitMax = time.Second
	rec.Client.HTTPClient.Timeout = 5 * time.Second
	base := rec.Client.HTTPClient.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	rec.Client.HTTPClient.Transport = &recordingTransport{base: base, into: &s.result}
	s.rec = rec
	return s, nil
}

func (s *fluxSink) name() string { return "flux" }

func (s *fluxSink) send(_ context.Context, n notification) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.result = postResult{}
	involved, group, object := fluxInvolved(n.obj)
	// The Provider, and so its format, is notification-controller's to
	// choose: the tenant's text, the message and the object's
	// event.toolkit.fluxcd.io/ annotations (which Providers show as
	// fields), is made inert for any of them.
	esc := escaperFor("flux")
	s.rec.AnnotatedEventf(escapedFluxAnnotations(involved, esc), fluxMetadata(n, group, object), n.typ, n.reason, "%s", esc(n.message))
	switch r := s.result; {
	case r.err != nil:
		return r.err
	case r.status == 0:
		return fmt.Errorf("event not posted (see the log above)")
	// 429: notification-controller already has this event.
	case r.status >= 300 && r.status != http.StatusTooManyRequests:
		return fmt.Errorf("event endpoint answered %d", r.status)
	}
	return nil
}

// fluxMetadata are an Event's metadata in Flux's conventions: keys
// prefixed with the involved object's API group (group), which
// notification-controller strips (dropping every other group's): the
// revision the Event is about, a token, the object's generation, that
// tells events of two generations apart, and, when the involved object is
// the Kustomization delivering it, the Scribe object (object).
func fluxMetadata(n notification, group, object string) map[string]string {
	md := map[string]string{}
	if n.revision != "" {
		md[group+"/"+eventv1.MetaRevisionKey] = n.revision
	}
	if o, ok := n.obj.(client.Object); ok {
		md[group+"/"+eventv1.MetaTokenKey] = strconv.FormatInt(o.GetGeneration(), 10)
	}
	if object != "" {
		md[group+"/object"] = object
	}
	return md
}

// recordingTransport notes each response's status or error in into.
type recordingTransport struct {
	base http.RoundTripper
	into *postResult
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		*t.into = postResult{err: err}
		return resp, err
	}
	*t.into = postResult{status: resp.StatusCode}
	return resp, nil
}

// noKubeEvents is the Kubernetes recorder the Flux recorder forwards to:
// none, as the Notifier records Kubernetes Events itself.
type noKubeEvents struct{}

var _ record.EventRecorder = noKubeEvents{}

func (noKubeEvents) Event(runtime.Object, string, string, string)          {}
func (noKubeEvents) Eventf(runtime.Object, string, string, string, ...any) {}
func (noKubeEvents) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}

// escapedFluxAnnotations is obj, or a copy of it whose
// event.toolkit.fluxcd.io/ annotations esc escaped (obj is shared with
// the other sinks and is not changed).
func escapedFluxAnnotations(obj runtime.Object, esc func(string) string) runtime.Object {
	o, ok := obj.(client.Object)
	if !ok {
		return obj
	}
	var ann map[string]string
	for k, v := range o.GetAnnotations() {
		if strings.HasPrefix(k, fluxEventAnnotationPrefix) && esc(v) != v {
			if ann == nil {
				ann = maps.Clone(o.GetAnnotations())
			}
			ann[k] = esc(v)
		}
	}
	if ann == nil {
		return obj
	}
	cp := o.DeepCopyObject().(client.Object)
	cp.SetAnnotations(ann)
	return cp
}
