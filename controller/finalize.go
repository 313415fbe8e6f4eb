package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
)

// removal is a Workload or Experiment being deleted, and how its reconciler
// records what happened.
type removal struct {
	obj       object
	kind      string
	repo      *scribev1.LocalObjectReference
	generated *scribev1.GeneratedResources
	// committed says the removal commit is already recorded in status
	// (publishing it again after a restart would be a no-op anyway).
	committed bool
	// record stores the removal commit in status.
	record func(commit string)
	event  func(typ, reason, format string, args ...any)
	poll   time.Duration
	// released, when set, undoes what the reconciler did outside Git once
	// the applier has pruned everything (an Experiment's Argo CD cluster
	// registrations, which Argo CD needs until then); the finalizer stays
	// while it fails.
	released func(ctx context.Context, t *Target) error
}

// finalize publishes the removal of a custom resource's paths once and
// releases its finalizer when the applier has pruned its per-CR sync object.
// With its Repository gone there is nowhere to delete from, and nothing
// Scribe wrote can be pruned: the finalizer goes at once.
func (p *Publisher) finalize(ctx context.Context, rm removal) (ctrl.Result, error) {
	obj := rm.obj
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	// A tenancy refusal (a grant revoked since the commit) does not hold a
	// removal up: see grantFor.
	t, err := p.TargetForRemoval(ctx, obj.GetNamespace(), rm.repo)
	if err != nil {
		var re *reasonError
		if errors.As(err, &re) && re.reason == ReasonRepositoryNotFound {
			controllerutil.RemoveFinalizer(obj, Finalizer)
			return ctrl.Result{}, nil
		}
		return fail(obj, err)
	}
	src := scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: rm.kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	sync, err := p.syncIdentity(t, rm.generated, src)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !rm.committed {
		// An open pull request of the custom resource is closed first: a
		// merge after the removal would bring back what it took away.
		if t.PullRequests() {
			note := fmt.Sprintf("Closed by Scribe: %s was deleted and its files are removed from %s; merging this pull request would bring them back.",
				publish.ObjectRef(src), baseOpts(t).Branch)
			closed, err := p.CloseProposal(ctx, t, src, note)
			if err != nil {
				return fail(obj, err)
			}
			if closed != nil {
				rm.event(corev1.EventTypeNormal, "Deleting", "closed pull request #%d: its custom resource was deleted", closed.Number)
			}
		}
		res, err := p.Publish(ctx, t, obj.GetUID(), publish.DeleteFor(src, obj.GetGeneration()), sync, LiveObject{})
		if err != nil {
			return fail(obj, err)
		}
		rm.record(res.Commit)
		log.FromContext(ctx).Info("removed from git", "revision", res.Revision, "changed", res.Changed)
		rm.event(corev1.EventTypeNormal, "Deleting", "removed from Git at %s; waiting for the applier to prune", shortRev(res.Commit))
	}
	gone, err := p.SyncGone(ctx, t, sync)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read applier object %s/%s: %w", sync.Namespace, sync.Name, err)
	}
	if !gone {
		conditions.MarkReconciling(obj, ReasonPruning, "waiting for %s/%s to be pruned", sync.Namespace, sync.Name)
		return ctrl.Result{RequeueAfter: rm.poll}, nil
	}
	if rm.released != nil {
		if err := rm.released(ctx, t); err != nil {
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(obj, Finalizer)
	return ctrl.Result{}, nil
}

// syncIdentity finds the applier object among the generated resources, or
// asks the render to name it (a CR whose first commit was never recorded).
func (p *Publisher) syncIdentity(t *Target, g *scribev1.GeneratedResources, src scribev1.ObjectIdentity) (scribev1.ObjectIdentity, error) {
	if g != nil && len(g.Objects) > 0 {
		return g.Objects[0], nil
	}
	engine := t.Engine
	if engine == nil {
		engine = p.BuiltinEngine()
	}
	id, err := engine.SyncObject(src, t.Input)
	if err != nil {
		return id, fmt.Errorf("name the sync object of %s: %w", publish.ObjectRef(src), err)
	}
	return id, nil
}
