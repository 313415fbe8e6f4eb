package main

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// syncWatch tells --watch when the applier's object of a shown custom
// resource changes (its Flux Kustomization or Argo CD Application, whose
// applied revision the frame shows), so the frame follows the applier as
// it follows Scribe's objects: from watches, not polling. It runs one
// watch per API version, kind and namespace of those objects, selecting
// the label app.kubernetes.io/managed-by=scribe that Scribe renders on
// them, and signals changed for the objects shown. A watch the caller may
// not open (forbidden, a kind the cluster does not serve) is given up:
// the frame already says why it shows no applied revision.
type syncWatch struct {
	client  client.WithWatch
	changed chan struct{}

	mu sync.Mutex
	// shown are the sync objects the frame shows, by syncKey.
	shown map[string]bool
	// running are the watches started, by API version, kind and namespace.
	running map[string]bool
}

func newSyncWatch(c client.WithWatch) *syncWatch {
	return &syncWatch{client: c, changed: make(chan struct{}, 1), shown: map[string]bool{}, running: map[string]bool{}}
}

// syncKey names a sync object.
func syncKey(apiVersion, kind, namespace, name string) string {
	return apiVersion + "/" + kind + "/" + namespace + "/" + name
}

// syncObjectOf is the applier's object of o, the first generated object,
// when it is one the frame reads a revision from.
func syncObjectOf(o client.Object) (scribev1.ObjectIdentity, bool) {
	var gen *scribev1.GeneratedResources
	switch t := o.(type) {
	case *scribev1.Workload:
		gen = t.Status.GeneratedResources
	case *scribev1.Experiment:
		gen = t.Status.GeneratedResources
	}
	if gen == nil || len(gen.Objects) == 0 {
		return scribev1.ObjectIdentity{}, false
	}
	id := gen.Objects[0]
	if (id.Kind != "Kustomization" && id.Kind != "Application") || id.APIVersion == "" || id.Namespace == "" {
		return scribev1.ObjectIdentity{}, false
	}
	return id, true
}

// follow makes the watches match objs: it notes their sync objects and
// starts a watch for each API version, kind and namespace not watched yet.
// The watches end with ctx.
func (s *syncWatch) follow(ctx context.Context, objs map[string]client.Object) {
	shown := map[string]bool{}
	var start []scribev1.ObjectIdentity
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range objs {
		id, ok := syncObjectOf(o)
		if !ok {
			continue
		}
		shown[syncKey(id.APIVersion, id.Kind, id.Namespace, id.Name)] = true
		group := syncKey(id.APIVersion, id.Kind, id.Namespace, "")
		if !s.running[group] {
			s.running[group] = true
			start = append(start, id)
		}
	}
	s.shown = shown
	for _, id := range start {
		go s.run(ctx, id.APIVersion, id.Kind, id.Namespace)
	}
}

// isShown says the sync object is in the frame.
func (s *syncWatch) isShown(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shown[key]
}

// run watches one API version, kind and namespace until ctx ends or the
// watch cannot be opened, watching again when the API server ends it.
func (s *syncWatch) run(ctx context.Context, apiVersion, kind, namespace string) {
	for ctx.Err() == nil {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(apiVersion)
		list.SetKind(kind + "List")
		w, err := s.client.Watch(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/managed-by": "scribe"})
		if err != nil {
			return
		}
		began := time.Now()
		s.forward(ctx, w, apiVersion, kind)
		w.Stop()
		if time.Since(began) < time.Second {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// forward signals changed for each event about a shown object, until the
// watch ends.
func (s *syncWatch) forward(ctx context.Context, w watch.Interface, apiVersion, kind string) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return
			}
			o, ok := ev.Object.(client.Object)
			if !ok || !s.isShown(syncKey(apiVersion, kind, o.GetNamespace(), o.GetName())) {
				continue
			}
			select {
			case s.changed <- struct{}{}:
			default:
			}
		}
	}
}
