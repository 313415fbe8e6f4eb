package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
)

// Deletion ordering: no commit for a custom resource lands after its
// removal commit, even when a reconcile works from a stale cache (one
// that has not seen the deletion yet). Every publish of one custom
// resource (by UID) holds that resource's lock until its commit landed,
// so a write and the removal are committed in the order they took it; the
// removal leaves a tombstone; and a write is made only when DecidePublish
// allows it: no tombstone, and the API server itself (an uncached read)
// still has the very object, not being deleted.

// ReasonDeleting: a write for a custom resource whose removal was
// published, that is being deleted or that is gone; the reconcile worked
// from a stale view. It is never recorded: the reconcile writes nothing
// and reads the object again.
const ReasonDeleting = "Deleting"

// LiveObject is a custom resource as the API server has it now.
type LiveObject struct {
	// Known says it was read (a Publisher without an uncached reader
	// does not read it).
	Known bool
	// Found says it exists; UID, Deleting and ResourceVersion are its
	// own.
	Found           bool
	UID             types.UID
	Deleting        bool
	ResourceVersion string
	// Finalized says it carries Scribe's finalizer.
	Finalized bool
}

// PublishFacts is what is known, right before a commit, of the custom
// resource it is for.
type PublishFacts struct {
	// UID is the custom resource the reconcile read (empty: unknown).
	UID types.UID
	// Delete says the change is the removal of its paths.
	Delete bool
	// Removed says its removal was published already (a tombstone).
	Removed bool
	// Live is the object as the API server has it.
	Live LiveObject
}

// DecidePublish reports whether a change may be committed, and if not,
// why. A removal always may (again: it is a no-op in Git). A write may
// not after the removal was published, nor when the API server has no such
// object, has another object of that name (another UID: the one read was
// deleted and the name taken again) or has it being deleted.
func DecidePublish(f PublishFacts) (bool, string) {
	switch {
	case f.Delete:
		return true, ""
	case f.Removed:
		return false, "its removal was published already"
	case !f.Live.Known:
		return true, ""
	case !f.Live.Found:
		return false, "it no longer exists"
	case f.UID != "" && f.Live.UID != f.UID:
		return false, fmt.Sprintf("it was deleted (the object of that name now is %s, not %s)", f.Live.UID, f.UID)
	case f.Live.Deleting:
		return false, "it is being deleted"
	}
	return true, ""
}

// isDeleting reports whether err is a write refused by DecidePublish.
func isDeleting(err error) bool {
	var re *reasonError
	return errors.As(err, &re) && re.reason == ReasonDeleting
}

// maxTombstones bounds the tombstones kept; beyond it, those older than
// tombstoneTTL go (a stale cache catches up in seconds; the uncached
// read covers what is forgotten).
const (
	maxTombstones = 10000
	tombstoneTTL  = 10 * time.Minute
)

// publishOrder serializes the publishes of each custom resource and
// remembers whose removal was published.
type publishOrder struct {
	mu      sync.Mutex
	locks   map[types.UID]*objectLock
	removed map[types.UID]time.Time
}

type objectLock struct {
	mu   sync.Mutex
	refs int
}

// lock takes uid's lock (none for an empty uid) and returns its release.
func (o *publishOrder) lock(uid types.UID) func() {
	if uid == "" {
		return func() {}
	}
	o.mu.Lock()
	if o.locks == nil {
		o.locks = map[types.UID]*objectLock{}
	}
	l := o.locks[uid]
	if l == nil {
		l = &objectLock{}
		o.locks[uid] = l
	}
	l.refs++
	o.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		o.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(o.locks, uid)
		}
		o.mu.Unlock()
	}
}

// markRemoved records that uid's removal is being published.
func (o *publishOrder) markRemoved(uid types.UID, now time.Time) {
	if uid == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.removed == nil {
		o.removed = map[types.UID]time.Time{}
	}
	if len(o.removed) >= maxTombstones {
		for u, at := range o.removed {
			if now.Sub(at) > tombstoneTTL {
				delete(o.removed, u)
			}
		}
	}
	if len(o.removed) < maxTombstones {
		o.removed[uid] = now
	}
}

func (o *publishOrder) isRemoved(uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.removed[uid]
	return ok
}

// writeWitnesses reports whether written, the object as the API server
// answered a write of the reconcile that publishes, may stand in for the
// uncached read before a write: it is the object the reconcile read (its
// UID), was not being deleted, and carries Scribe's finalizer. Such an
// object can only go through Scribe's finalize, whose removal is
// published under the object's publish lock, after the write holding it;
// a deletion that started after the answer is therefore committed after
// this write, as when it starts after an uncached read. It saves a new
// custom resource's reconcile (which has just written the finalizer) one
// request to the API server.
func writeWitnesses(uid types.UID, written LiveObject) bool {
	return uid != "" && written.Known && written.Found && written.UID == uid && !written.Deleting && written.Finalized
}

// mayPublish gathers the facts DecidePublish needs (the object is read
// from the API server only for a write without a tombstone, unless the
// reconcile's own write answered for it: written, see writeWitnesses)
// and refuses the change with ReasonDeleting when it says no.
func (p *Publisher) mayPublish(ctx context.Context, uid types.UID, c publish.Change, written LiveObject) error {
	f := PublishFacts{UID: uid, Delete: c.Delete, Removed: p.order.isRemoved(uid)}
	if !f.Delete && !f.Removed && p.Reader != nil {
		if writeWitnesses(uid, written) {
			f.Live = written
		} else {
			live, err := p.live(ctx, c.Source)
			if err != nil {
				return err
			}
			f.Live = live
		}
	}
	if ok, why := DecidePublish(f); !ok {
		return &reasonError{reason: ReasonDeleting, err: fmt.Errorf("not publishing %s: %s", publish.ObjectRef(c.Source), why)}
	}
	return nil
}

// live reads src's metadata from the API server, past the cache.
func (p *Publisher) live(ctx context.Context, src scribev1.ObjectIdentity) (LiveObject, error) {
	gv, err := schema.ParseGroupVersion(src.APIVersion)
	if err != nil {
		return LiveObject{}, fmt.Errorf("read %s: %w", publish.ObjectRef(src), err)
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gv.WithKind(src.Kind))
	if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: src.Namespace, Name: src.Name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return LiveObject{Known: true}, nil
		}
		return LiveObject{}, fmt.Errorf("read %s from the API server: %w", publish.ObjectRef(src), err)
	}
	return LiveObject{Known: true, Found: true, UID: m.GetUID(), Deleting: !m.GetDeletionTimestamp().IsZero(), ResourceVersion: m.GetResourceVersion(),
		Finalized: controllerutil.ContainsFinalizer(m, Finalizer)}, nil
}
