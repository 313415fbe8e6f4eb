package controller

import (
	"reflect"
	"testing"
)

func TestRouteWeightChangeSaysEachMovedBackend(t *testing.T) {
	route := func(rules string) []byte {
		return []byte("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: web\nspec:\n  rules:\n" + rules)
	}
	for _, tc := range []struct {
		name          string
		before, after []byte
		want          []string
	}{
		{"a canary step", route("  - backendRefs:\n    - {name: web-v1, weight: 90}\n    - {name: web-v2, weight: 10}\n"),
			route("  - backendRefs:\n    - {name: web-v1, weight: 50}\n    - {name: web-v2, weight: 50}\n"),
			[]string{"web-v1 90 → 50", "web-v2 10 → 50"}},
		{"a new backend, the default weight", route("  - backendRefs:\n    - {name: web-v1}\n"),
			route("  - backendRefs:\n    - {name: web-v1}\n    - {name: web-v2, weight: 0}\n"),
			[]string{"web-v2 - → 0"}},
		{"unchanged weights", route("  - backendRefs:\n    - {name: web-v1, weight: 100}\n"),
			route("  - backendRefs:\n    - {name: web-v1, weight: 100}\n"), nil},
		{"no route", []byte("kind: ConfigMap\ndata: {a: b}\n"), []byte("kind: ConfigMap\ndata: {a: c}\n"), nil},
	} {
		if got := routeWeightChange(tc.before, tc.after); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
