package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
)

// A custom resource can go without Scribe's finalize even though the
// reconcile added the finalizer first: the API server's DELETE of an
// object that had no finalizer when the DELETE read it removes the object
// although a finalizer was added meanwhile (the delete's retry does not
// look at finalizers again). Where the finalizer policy sets the
// finalizer at creation there is no such window; elsewhere a custom
// resource deleted right after its creation could keep the files its
// first reconcile committed. So the Publisher remembers, for each custom
// resource it committed and has not removed, its UID and Repository
// (committedCRs), and the reconcile that finds the custom resource gone
// publishes its removal (RemoveIfGone), after the API server itself says
// no object of that name exists.

// committedCR is what RemoveIfGone needs of a committed custom resource.
type committedCR struct {
	uid  types.UID
	repo string
}

// committedCRs are the custom resources this process committed and has
// not removed, by kind/namespace/name.
type committedCRs struct {
	mu sync.Mutex
	by map[string]committedCR
}

func committedKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func (c *committedCRs) remember(key string, cr committedCR) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]committedCR{}
	}
	c.by[key] = cr
}

func (c *committedCRs) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.by, key)
}

func (c *committedCRs) of(key string) (committedCR, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr, ok := c.by[key]
	return cr, ok
}

// RemoveIfGone publishes the removal of the custom resource kind key when
// the reconcile found it gone but this process committed it and did not
// remove it (see above). Nothing happens for one it never committed, or
// when the API server has an object of that name (its own reconcile
// decides).
func (p *Publisher) RemoveIfGone(ctx context.Context, kind string, key types.NamespacedName) (ctrl.Result, error) {
	ck := committedKey(kind, key.Namespace, key.Name)
	cr, ok := p.unremoved.of(ck)
	if !ok {
		return ctrl.Result{}, nil
	}
	src := scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: kind, Namespace: key.Namespace, Name: key.Name}
	if p.Reader != nil {
		live, err := p.live(ctx, src)
		if err != nil {
			return ctrl.Result{}, err
		}
		if live.Found {
			return ctrl.Result{}, nil
		}
	}
	t, err := p.TargetForRemoval(ctx, key.Namespace, &scribev1.LocalObjectReference{Name: cr.repo})
	if err != nil {
		var re *reasonError
		if errors.As(err, &re) && re.reason == ReasonRepositoryNotFound {
			p.unremoved.forget(ck)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("remove %s, gone without its finalize: %w", publish.ObjectRef(src), err)
	}
	sync, err := p.syncIdentity(t, nil, src)
	if err != nil {
		return ctrl.Result{}, err
	}
	res, err := p.Publish(ctx, t, cr.uid, publish.DeleteFor(src, 0), sync, LiveObject{})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("remove %s, gone without its finalize: %w", publish.ObjectRef(src), err)
	}
	log.FromContext(ctx).Info("removed from git: the custom resource went without its finalize", "kind", kind, "namespace", key.Namespace, "name", key.Name, "revision", res.Revision)
	return ctrl.Result{}, nil
}
