package controller

import (
	"context"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// watchRepositoryChanges re-reconciles the custom resources (of the list
// newList makes: Workloads or Experiments) that publish through a
// Repository when its spec changes (a new generation, not its status): a
// new branch, path, applier or spec.git.artifacts takes effect at once,
// as a Flux Kustomization follows its source, rather than at each custom
// resource's next reconcile. Only the custom resources of this instance's
// shard are asked. What their namespace's TenantPolicy grants is watched
// too (watchTenancy): a revoked or narrowed grant reaches a custom
// resource that is otherwise idle.
func watchRepositoryChanges(b *builder.Builder, c client.Reader, newList func() client.ObjectList, shard predicate.Predicate) *builder.Builder {
	b = watchTenancy(b, c, newList, shard)
	return b.Watches(&scribev1.Repository{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			log.FromContext(ctx).Error(err, "list the custom resources of a changed Repository", "namespace", o.GetNamespace(), "name", o.GetName())
			return nil
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, it := range items {
			cr, ok := it.(client.Object)
			if !ok || repositoryOf(cr) != o.GetName() || !shard.Generic(event.GenericEvent{Object: cr}) {
				continue
			}
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}})
		}
		return out
	}), builder.WithPredicates(predicate.GenerationChangedPredicate{}))
}

// repositoryOf names the Repository a custom resource publishes through:
// its spec.repositoryRef, "default" without one.
func repositoryOf(o client.Object) string {
	var ref *scribev1.LocalObjectReference
	switch cr := o.(type) {
	case *scribev1.Workload:
		ref = cr.Spec.RepositoryRef
	case *scribev1.Experiment:
		ref = cr.Spec.RepositoryRef
	default:
		return ""
	}
	if ref == nil || ref.Name == "" {
		return "default"
	}
	return ref.Name
}
