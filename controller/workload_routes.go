package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/render"
)

// Route read-back: a step's weights move traffic only once the Gateway
// API implementation serves the route, so a step counts as applied only
// when every HTTPRoute of the render is Accepted with its references
// resolved at its generation by each parent (health.Route decides).

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch

var httpRouteGK = schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}

// watchRoutes watches the HTTPRoutes' metadata (a status change bumps the
// resourceVersion), mapped to their Workload by its label, when the
// Gateway API is installed.
func watchRoutes(mgr ctrl.Manager, b *builder.Builder) *builder.Builder {
	m, err := mgr.GetRESTMapper().RESTMapping(httpRouteGK)
	if err != nil {
		return b
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(m.GroupVersionKind)
	return b.WatchesMetadata(obj, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[WorkloadLabel]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	}))
}

// routes reads every route the render holds and aggregates health.Route
// over them. A cluster without the Gateway API (no such kind) leaves the
// verdict to the applier, which cannot have applied the route there.
func (r *WorkloadReconciler) routes(ctx context.Context, b *render.Bundle) health.Verdict {
	var vs []health.Verdict
	for _, id := range b.Objects {
		gv, err := schema.ParseGroupVersion(id.APIVersion)
		if err != nil || gv.Group != httpRouteGK.Group || id.Kind != httpRouteGK.Kind {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(id.APIVersion)
		u.SetKind(id.Kind)
		err = r.Publisher.Client.Get(ctx, types.NamespacedName{Namespace: id.Namespace, Name: id.Name}, u)
		switch {
		case apimeta.IsNoMatchError(err):
			continue
		case apierrors.IsNotFound(err):
			u = nil
		case err != nil:
			vs = append(vs, health.Verdict{State: health.Pending, Reason: health.ReasonUnknown, Subject: "HTTPRoute/" + id.Namespace + "/" + id.Name, Message: strings.TrimSpace(err.Error())})
			continue
		}
		v := health.Route(u)
		if u == nil {
			v.Subject = "HTTPRoute/" + id.Namespace + "/" + id.Name
		}
		vs = append(vs, v)
	}
	if len(vs) == 1 {
		return vs[0]
	}
	return health.Aggregate(vs...)
}

// routeWeightChange compares the backend weights of two versions of an
// HTTPRoute (or any object with spec.rules[].backendRefs[]): one entry per
// backend whose weight changed, "name before → after" ("-" for absent).
// A pull request's description shows them (gitsink.WeightsFunc), so the
// Gateway API is read here, beside the route read-back, and not in the
// sink.
func routeWeightChange(before, after []byte) []string {
	a, b := backendWeights(before), backendWeights(after)
	if a == nil && b == nil {
		return nil
	}
	names := map[string]bool{}
	for n := range a {
		names[n] = true
	}
	for n := range b {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var out []string
	for _, n := range sorted {
		x, okx := a[n]
		y, oky := b[n]
		if okx && oky && x == y {
			continue
		}
		show := func(v string, ok bool) string {
			if !ok {
				return "-"
			}
			return v
		}
		out = append(out, fmt.Sprintf("%s %s → %s", n, show(x, okx), show(y, oky)))
	}
	return out
}

// backendWeights reads spec.rules[].backendRefs[] as name → weight.
func backendWeights(doc []byte) map[string]string {
	var route struct {
		Spec struct {
			Rules []struct {
				BackendRefs []struct {
					Name   string `json:"name"`
					Weight *int64 `json:"weight"`
				} `json:"backendRefs"`
			} `json:"rules"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &route); err != nil {
		return nil
	}
	var out map[string]string
	for _, r := range route.Spec.Rules {
		for _, br := range r.BackendRefs {
			if out == nil {
				out = map[string]string{}
			}
			w := "1" // Gateway API's default weight
			if br.Weight != nil {
				w = fmt.Sprint(*br.Weight)
			}
			out[br.Name] = w
		}
	}
	return out
}
