package health

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRouteCountsAsServedOnlyOnceEveryParentAcceptsItAtItsGeneration(t *testing.T) {
	public := map[string]any{"name": "public", "namespace": "gateway-system"}
	internal := map[string]any{"name": "internal", "namespace": "gateway-system"}
	// Implementations write the parentRef back with its defaults.
	publicDefaulted := map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "public", "namespace": "gateway-system"}
	cond := func(typ, status, reason, msg string, gen int64) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "observedGeneration": gen}
	}
	parent := func(ref map[string]any, conds ...map[string]any) map[string]any {
		cs := make([]any, len(conds))
		for i, c := range conds {
			cs[i] = c
		}
		return map[string]any{"parentRef": ref, "controllerName": "traefik.io/gateway-controller", "conditions": cs}
	}
	route := func(gen int64, refs []any, parents ...map[string]any) *unstructured.Unstructured {
		ps := make([]any, len(parents))
		for i, p := range parents {
			ps[i] = p
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"name": "web", "namespace": "demo", "generation": gen},
			"spec":     map[string]any{"parentRefs": refs},
			"status":   map[string]any{"parents": ps},
		}}
	}
	ok := func(ref map[string]any, gen int64) map[string]any {
		return parent(ref, cond("Accepted", "True", "Accepted", "", gen), cond("ResolvedRefs", "True", "ResolvedRefs", "", gen))
	}
	tests := []struct {
		name    string
		route   *unstructured.Unstructured
		state   State
		reason  string
		message []string
	}{
		{"accepted and resolved at its generation", route(3, []any{public}, ok(publicDefaulted, 3)), Healthy, ReasonHealthy, []string{"accepted by 1 parents at generation 3"}},
		{"no status yet", route(1, []any{public}), Pending, ReasonNotObserved, []string{"parent gateway-system/public has not reported on the route"}},
		{"status of an older generation", route(4, []any{public}, ok(publicDefaulted, 3)), Pending, ReasonNotObserved, []string{"not reported on generation 4", "Accepted at generation 3"}},
		{"refused by a listener that does not allow the namespace", route(2, []any{internal},
			parent(internal, cond("Accepted", "False", "NotAllowedByListeners", "", 2), cond("ResolvedRefs", "True", "ResolvedRefs", "", 2))),
			Pending, ReasonRouteRefused, []string{"parent gateway-system/internal (traefik.io/gateway-controller) reports Accepted=False NotAllowedByListeners"}},
		{"a backend that does not resolve", route(2, []any{public},
			parent(publicDefaulted, cond("Accepted", "True", "Accepted", "", 2), cond("ResolvedRefs", "False", "BackendNotFound", `service "web-v2" not found`, 2))),
			Pending, ReasonRouteRefused, []string{`reports ResolvedRefs=False BackendNotFound: service "web-v2" not found`}},
		{"one of two parents refuses", route(1, []any{public, internal}, ok(publicDefaulted, 1),
			parent(internal, cond("Accepted", "False", "NoMatchingListenerHostname", "no listener matches", 1))),
			Pending, ReasonRouteRefused, []string{"gateway-system/internal", "NoMatchingListenerHostname: no listener matches"}},
		{"one of two parents has not reported", route(1, []any{public, internal}, ok(publicDefaulted, 1)), Pending, ReasonNotObserved, []string{"parent gateway-system/internal has not reported"}},
		{"a section of the Gateway is another parent", route(1, []any{map[string]any{"name": "public", "namespace": "gateway-system", "sectionName": "https"}}, ok(publicDefaulted, 1)),
			Pending, ReasonNotObserved, []string{"gateway-system/public/https has not reported"}},
		{"the parent namespace defaults to the route's", route(1, []any{map[string]any{"name": "local"}}, ok(map[string]any{"name": "local", "namespace": "demo"}, 1)), Healthy, ReasonHealthy, nil},
		{"no parentRefs", route(1, nil), Healthy, ReasonHealthy, []string{"nothing serves the route"}},
		{"gone", nil, Pending, ReasonNotFound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Route(tt.route)
			if v.State != tt.state || v.Reason != tt.reason {
				t.Fatalf("Route = %s, want %s (%s)", v, tt.state, tt.reason)
			}
			for _, m := range tt.message {
				if !strings.Contains(v.Message, m) {
					t.Errorf("message %q does not contain %q", v.Message, m)
				}
			}
		})
	}
}
