package controller

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// namespaceMetadata is an empty Namespace read as metadata only: Scribe
// needs a Namespace's labels (which TenantPolicy selects it), never its
// spec or status, and a metadata informer keeps the cache small.
func namespaceMetadata() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ns
}

// PolicyNamespaces decides which namespaces a TenantPolicy change
// concerns: those old selected (or may select, its selector broken)
// and those new does, among namespaces (name to labels). A nil policy
// is one that does not exist (created, or deleted). What was committed
// under the old policy is rendered again under the new one (or stalled)
// only if its namespace is asked again: a revocation must reach an idle
// custom resource.
func PolicyNamespaces(before, after *scribev1.TenantPolicy, namespaces map[string]map[string]string) []string {
	var out []string
	for name, lbls := range namespaces {
		if (before != nil && policyMaySelect(before, lbls)) || (after != nil && policyMaySelect(after, lbls)) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// NamespaceLabelsChanged is the predicate of the Namespace watch: only a
// change of labels can change which TenantPolicy selects a namespace.
// A new namespace has no Scribe resources yet, and a deleted one takes
// them along.
func NamespaceLabelsChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
	}
}

// tenancyWatch re-reconciles the custom resources of the list newList
// makes (Workloads, Experiments or Repositories) when what their
// namespace's TenantPolicy grants may have changed: a TenantPolicy
// created, changed or deleted (the namespaces it selected before and
// selects after), or a Namespace relabelled (watched as metadata only).
// Only the custom resources of this instance's shard are asked.
type tenancyWatch struct {
	client  client.Reader
	newList func() client.ObjectList
	shard   predicate.Predicate
}

// watchTenancy adds tenancyWatch's watches to b.
func watchTenancy(b *builder.Builder, c client.Reader, newList func() client.ObjectList, shard predicate.Predicate) *builder.Builder {
	w := tenancyWatch{client: c, newList: newList, shard: shard}
	return b.
		Watches(&scribev1.TenantPolicy{}, w.policyHandler()).
		WatchesMetadata(namespaceMetadata(), handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return w.requests(ctx, []string{o.GetName()})
		}), builder.WithPredicates(NamespaceLabelsChanged()))
}

// policyHandler enqueues the custom resources of the namespaces a
// TenantPolicy event concerns (PolicyNamespaces).
func (w tenancyWatch) policyHandler() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	enqueue := func(ctx context.Context, before, after client.Object, q queue) {
		oldP, _ := before.(*scribev1.TenantPolicy)
		newP, _ := after.(*scribev1.TenantPolicy)
		for _, r := range w.policyRequests(ctx, oldP, newP) {
			q.Add(r)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { enqueue(ctx, nil, e.Object, q) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) { enqueue(ctx, e.ObjectOld, e.ObjectNew, q) },
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) { enqueue(ctx, e.Object, nil, q) },
	}
}

// policyRequests lists the namespaces and then the custom resources a
// TenantPolicy change concerns.
func (w tenancyWatch) policyRequests(ctx context.Context, before, after *scribev1.TenantPolicy) []reconcile.Request {
	if before == nil && after == nil {
		return nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := w.client.List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "list Namespaces for a TenantPolicy change")
		return nil
	}
	namespaces := make(map[string]map[string]string, len(list.Items))
	for _, ns := range list.Items {
		namespaces[ns.Name] = ns.Labels
	}
	return w.requests(ctx, PolicyNamespaces(before, after, namespaces))
}

// requests lists the custom resources of namespaces in this shard.
func (w tenancyWatch) requests(ctx context.Context, namespaces []string) []reconcile.Request {
	var out []reconcile.Request
	for _, ns := range namespaces {
		list := w.newList()
		if err := w.client.List(ctx, list, client.InNamespace(ns)); err != nil {
			log.FromContext(ctx).Error(err, "list the custom resources of a namespace whose TenantPolicy may have changed", "namespace", ns)
			continue
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			continue
		}
		for _, it := range items {
			cr, ok := it.(client.Object)
			if !ok || !w.shard.Generic(event.GenericEvent{Object: cr}) {
				continue
			}
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}})
		}
	}
	return out
}
