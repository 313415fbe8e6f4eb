package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// statusPatcher writes what a reconcile changed on a Scribe object, as
// fluxcd/pkg/runtime's SerialPatcher does, but in at most two requests:
// one merge patch of metadata (the finalizer) when it changed, and one of
// the whole status, conditions included, when it changed. Flux's helper
// sends the conditions and the rest of the status as two patches, which
// doubled Scribe's status writes: with 1000 Workloads arriving at once the
// API server's write latency, not rendering or Git, bounded how fast they
// were committed.
//
// The status patch carries the resourceVersion the object was read at
// (optimistic lock). On a conflict the latest object is read again and
// the conditions are merged as Flux's helper merges them (fluxcd/pkg/runtime
// conditions.Patch, Scribe owning its condition types: another writer's
// conditions of other types are kept); every other status field is
// Scribe's and written as this reconcile computed it.
type statusPatcher struct {
	c      client.Client
	before object
	// written is the object as the API server answered this patcher's
	// last write (Known false: nothing written yet).
	written LiveObject
}

func newStatusPatcher(obj object, c client.Client) *statusPatcher {
	return &statusPatcher{c: c, before: obj.DeepCopyObject().(object)}
}

// Patch writes obj's changes since the last Patch (or since the patcher
// was made) and records obj as the new starting point. obj's
// resourceVersion follows each write.
func (p *statusPatcher) Patch(ctx context.Context, obj object) error {
	gvk, err := apiutil.GVKForObject(obj, p.c.Scheme())
	if err != nil {
		return fmt.Errorf("patch %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	before, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.before)
	if err != nil {
		return fmt.Errorf("patch %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	after, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("patch %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	statusBefore, statusAfter := before["status"], after["status"]
	delete(before, "status")
	delete(after, "status")
	if !equality.Semantic.DeepEqual(before, after) {
		from, to := &unstructured.Unstructured{Object: before}, &unstructured.Unstructured{Object: after}
		from.SetGroupVersionKind(gvk)
		to.SetGroupVersionKind(gvk)
		if err := p.c.Patch(ctx, to, client.MergeFrom(from), client.FieldOwner(fieldOwner)); err != nil {
			return fmt.Errorf("patch metadata of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		obj.SetResourceVersion(to.GetResourceVersion())
		p.written = liveFromAnswer(to)
	}
	if !equality.Semantic.DeepEqual(statusBefore, statusAfter) {
		if err := p.patchStatus(ctx, obj, gvk, statusBefore, statusAfter); err != nil {
			return err
		}
	}
	p.before = obj.DeepCopyObject().(object)
	return nil
}

// patchStatus writes statusAfter over statusBefore at obj's
// resourceVersion; on a conflict it merges with the latest object.
func (p *statusPatcher) patchStatus(ctx context.Context, obj object, gvk schema.GroupVersionKind, statusBefore, statusAfter any) error {
	rv := obj.GetResourceVersion()
	err := p.sendStatus(ctx, obj, gvk, rv, statusBefore, statusAfter)
	if !apierrors.IsConflict(err) {
		if err != nil {
			return fmt.Errorf("patch status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		return nil
	}
	diff := conditions.NewPatch(p.before, obj)
	backoff := wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Jitter: 1.0}
	err = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		latest := p.before.DeepCopyObject().(object)
		if err := p.c.Get(ctx, client.ObjectKeyFromObject(obj), latest); err != nil {
			return false, err
		}
		from, err := runtime.DefaultUnstructuredConverter.ToUnstructured(latest)
		if err != nil {
			return false, err
		}
		if err := diff.Apply(latest, conditions.WithOwnedConditions(ownedConditions()...)); err != nil {
			return false, err
		}
		want := obj.DeepCopyObject().(object)
		want.SetConditions(latest.GetConditions())
		to, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
		if err != nil {
			return false, err
		}
		err = p.sendStatus(ctx, obj, gvk, latest.GetResourceVersion(), from["status"], to["status"])
		if apierrors.IsConflict(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		obj.SetConditions(want.GetConditions())
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("patch status of %s/%s after a conflict: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// sendStatus sends one merge patch of the status subresource from
// statusBefore to statusAfter, locked at resourceVersion rv, and moves
// obj's resourceVersion to the one written.
func (p *statusPatcher) sendStatus(ctx context.Context, obj object, gvk schema.GroupVersionKind, rv string, statusBefore, statusAfter any) error {
	from, to := &unstructured.Unstructured{Object: map[string]any{}}, &unstructured.Unstructured{Object: map[string]any{}}
	for _, u := range []*unstructured.Unstructured{from, to} {
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(obj.GetNamespace())
		u.SetName(obj.GetName())
		u.SetResourceVersion(rv)
	}
	if statusBefore != nil {
		from.Object["status"] = statusBefore
	}
	if statusAfter != nil {
		to.Object["status"] = statusAfter
	}
	opts := &client.SubResourcePatchOptions{PatchOptions: client.PatchOptions{FieldManager: fieldOwner}}
	if err := p.c.Status().Patch(ctx, to, client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{}), opts); err != nil {
		return err
	}
	obj.SetResourceVersion(to.GetResourceVersion())
	p.written = liveFromAnswer(to)
	return nil
}

// Written is the object as the API server answered the patcher's last
// write in this reconcile (Known false: none was made).
func (p *statusPatcher) Written() LiveObject { return p.written }

// liveFromAnswer is what a write's answer says of the object as the API server
// has it: at least as fresh as an uncached read made before the write.
func liveFromAnswer(o client.Object) LiveObject {
	return LiveObject{
		Known: true, Found: true, UID: o.GetUID(), Deleting: !o.GetDeletionTimestamp().IsZero(),
		ResourceVersion: o.GetResourceVersion(), Finalized: controllerutil.ContainsFinalizer(o, Finalizer),
	}
}
