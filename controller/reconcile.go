package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// Finalizer holds a CR until the applier has pruned what Scribe committed.
// config/admission/finalizer.yaml has the API server set it at creation;
// the controller adds it where that policy is not installed.
const Finalizer = "scribe.dev/finalizer"

// staleRetryInterval: a reconcile that read an object older than its
// published removal reads it again after this (the deletion's own event
// usually comes first).
const staleRetryInterval = time.Second

// staleStatusRetry: a reconcile that read a status older than its last
// status write reads it again after this. The cache is usually a few
// milliseconds behind, and a rollout step waits on it: one metadata read
// per retry, until it has caught up.
const staleStatusRetry = 100 * time.Millisecond

// fieldOwner is the field manager of Scribe's status patches.
const fieldOwner = "scribe-controller"

// object is a Scribe custom resource: Flux-style conditions and the
// reconcile request it handled in status.
type object interface {
	client.Object
	conditions.Setter
	meta.StatusWithHandledReconcileRequestSetter
}

// lifecycle is what one kind does inside the shape every Scribe reconciler
// shares (see run).
type lifecycle[T object] struct {
	kind string
	// finalize runs while the object is being deleted. nil: the kind has
	// no finalizer.
	finalize func(ctx context.Context, obj T) (ctrl.Result, error)
	// reconcile is one pass towards the desired state, with the
	// finalizer stored. It may patch intermediate status with patcher.
	reconcile func(ctx context.Context, obj T, patcher *statusPatcher) (ctrl.Result, error)
	// gone runs when the object is not found (RemoveIfGone). nil: nothing
	// runs.
	gone func(ctx context.Context, key types.NamespacedName) (ctrl.Result, error)
	// suspended says the object's spec.suspend is set: nothing but a
	// deletion is carried out until it is unset (a change of the object
	// starts a reconcile). nil: the kind cannot be suspended.
	suspended func(obj T) bool
	// saved receives the object once its status is written, or nil when
	// it is gone (Metrics.Observe). nil: nothing receives it.
	saved func(kind string, key types.NamespacedName, obj client.Object)
}

// run is one reconcile of the object req names, read into obj: status is
// written once at the end by finalizeStatus whatever happens; an object
// being deleted is finalized; otherwise the finalizer is stored before
// anything is published (so a deletion always publishes the removal), and
// the kind's pass runs in the same reconcile.
func (l lifecycle[T]) run(ctx context.Context, c client.Client, req ctrl.Request, obj T) (res ctrl.Result, retErr error) {
	if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			l.observe(req.NamespacedName, nil)
			if l.gone != nil {
				return l.gone(ctx, req.NamespacedName)
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s %s: %w", l.kind, req.NamespacedName, err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("kind", l.kind, "namespace", obj.GetNamespace(), "name", obj.GetName()))
	patcher := newStatusPatcher(obj, c)
	defer func() {
		if isDeleting(retErr) {
			// What this reconcile read is older than the removal that
			// was published: it writes nothing of it and reads again.
			log.FromContext(ctx).Info("stale view of an object being deleted; not publishing", "reason", retErr.Error())
			res, retErr = ctrl.Result{RequeueAfter: staleRetryInterval}, nil
			return
		}
		if isStaleStatus(retErr) {
			// What this reconcile read is older than the status last
			// written: it writes nothing of it and reads again.
			log.FromContext(ctx).V(1).Info("stale status; reading again", "reason", retErr.Error())
			res, retErr = ctrl.Result{RequeueAfter: staleStatusRetry}, nil
			return
		}
		if err := finalizeStatus(ctx, patcher, obj); err != nil {
			retErr = errors.Join(retErr, err)
			return
		}
		l.observe(req.NamespacedName, obj)
	}()

	if l.finalize != nil {
		if !obj.GetDeletionTimestamp().IsZero() {
			return l.finalize(ctx, obj)
		}
		if !controllerutil.ContainsFinalizer(obj, Finalizer) {
			controllerutil.AddFinalizer(obj, Finalizer)
			if err := patchObject(ctx, patcher, obj); err != nil {
				return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
			}
		}
	}
	if l.suspended != nil && l.suspended(obj) {
		log.FromContext(ctx).Info("reconciliation is suspended for this object")
		return ctrl.Result{}, nil
	}
	return l.reconcile(ctx, obj, patcher)
}

// observe hands what was saved of the object key (nil: it is gone) to saved.
func (l lifecycle[T]) observe(key types.NamespacedName, obj client.Object) {
	if l.saved != nil {
		l.saved(l.kind, key, obj)
	}
}

// finalizeStatus is the deferred last step of every reconcile, as in
// Flux's controllers: it records the reconcile request handled and patches
// metadata and status. An object that is gone meanwhile (its finalizer
// released) is no error.
func finalizeStatus(ctx context.Context, patcher *statusPatcher, obj object) error {
	if v, ok := meta.ReconcileAnnotationValue(obj.GetAnnotations()); ok && v != "" {
		obj.SetLastHandledReconcileRequest(v)
	}
	if err := patchObject(ctx, patcher, obj); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// patchObject writes metadata (the finalizer) and status, owning Scribe's
// conditions.
func patchObject(ctx context.Context, patcher *statusPatcher, obj object) error {
	return patcher.Patch(ctx, obj)
}

// ownedConditions are the condition types Scribe writes; on a conflict
// Scribe's value wins.
func ownedConditions() []string {
	return []string{scribev1.ReadyCondition, scribev1.ReconcilingCondition, scribev1.StalledCondition, scribev1.CatalogReadyCondition}
}

// finalizerPredicates are the events of its own kind that a reconciler of
// a kind with a finalizer (Workload, Experiment) acts on: a new
// generation, a changed annotation (a reconcile request, an Experiment's
// completion) and the start of a deletion; shard restricts them to this
// instance's objects.
func finalizerPredicates(shard predicate.Predicate) builder.Predicates {
	return builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deleting()), shard)
}

// deleting passes updates that start a deletion (the deletion timestamp
// does not change the generation).
func deleting() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectNew.GetDeletionTimestamp() != nil && e.ObjectOld.GetDeletionTimestamp() == nil
	}}
}

// kustomizationsInstalled reports whether the API server serves Flux's
// Kustomization v1, so it can be watched.
func kustomizationsInstalled(mgr ctrl.Manager) bool {
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "kustomize.toolkit.fluxcd.io", Kind: "Kustomization"}, "v1")
	return err == nil
}

// eventf records an event about obj when rec is set.
func eventf(rec events.EventRecorder, obj runtime.Object, typ, reason, format string, args ...any) {
	if rec != nil {
		rec.Eventf(obj, nil, typ, reason, reason, format, args...)
	}
}
