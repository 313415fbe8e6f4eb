package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDecideDependencyRequestAsksOnlyWhenEveryDependencyIsAsKustomizeControllerRequires(t *testing.T) {
	const rev = "main@sha1:2222"
	ks := func(name, source string, gen int64, ready map[string]any, mutate ...func(map[string]any)) *unstructured.Unstructured {
		o := map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
			"metadata": map[string]any{"name": name, "namespace": "flux-system", "generation": gen},
			"spec":     map[string]any{"sourceRef": map[string]any{"kind": "GitRepository", "name": source}},
			"status":   map[string]any{"conditions": []any{ready}},
		}
		for _, m := range mutate {
			m(o)
		}
		return &unstructured.Unstructured{Object: o}
	}
	cond := func(status, reason string, gen int64) map[string]any {
		return map[string]any{"type": "Ready", "status": status, "reason": reason, "message": "m", "observedGeneration": gen,
			"lastTransitionTime": "2026-11-28T07:00:00Z"}
	}
	dependsOn := func(names ...string) func(map[string]any) {
		return func(o map[string]any) {
			var list []any
			for _, n := range names {
				list = append(list, map[string]any{"name": n})
			}
			o["spec"].(map[string]any)["dependsOn"] = list
		}
	}
	applied := func(r string) func(map[string]any) {
		return func(o map[string]any) {
			o["status"].(map[string]any)["lastAppliedRevision"] = r
			o["status"].(map[string]any)["observedGeneration"] = o["metadata"].(map[string]any)["generation"]
		}
	}
	annotated := func(requested, handled string) func(map[string]any) {
		return func(o map[string]any) {
			o["metadata"].(map[string]any)["annotations"] = map[string]any{"reconcile.fluxcd.io/requestedAt": requested}
			o["status"].(map[string]any)["lastHandledReconcileAt"] = handled
		}
	}
	src := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"artifact": map[string]any{"revision": rev}}}}
	waiting := cond("False", "DependencyNotReady", 1)
	readyDep := func(name, source, revision string) *unstructured.Unstructured {
		return ks(name, source, 3, cond("True", "ReconciliationSucceeded", 3), applied(revision))
	}
	a := dependencyRef{Namespace: "flux-system", Name: "a"}
	b := dependencyRef{Namespace: "flux-system", Name: "b"}
	tests := []struct {
		name  string
		ks    *unstructured.Unstructured
		deps  map[dependencyRef]*unstructured.Unstructured
		noSrc bool
		want  bool
	}{
		{"every dependency ready at the source's revision", ks("c", "repo", 1, waiting, dependsOn("a", "b")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "repo", rev), b: readyDep("b", "repo", rev)}, false, true},
		{"a dependency applied an older revision of the same source", ks("c", "repo", 1, waiting, dependsOn("a", "b")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "repo", rev), b: readyDep("b", "repo", "main@sha1:1111")}, false, false},
		{"a dependency of another source is judged by Ready alone", ks("c", "repo", 1, waiting, dependsOn("a")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "other", "main@sha1:9999")}, false, true},
		{"a dependency not ready", ks("c", "repo", 1, waiting, dependsOn("a")),
			map[dependencyRef]*unstructured.Unstructured{a: ks("a", "repo", 1, cond("False", "Progressing", 1))}, false, false},
		{"a dependency missing", ks("c", "repo", 1, waiting, dependsOn("a", "b")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "repo", rev), b: nil}, false, false},
		{"the component is ready already", ks("c", "repo", 1, cond("True", "ReconciliationSucceeded", 1), dependsOn("a")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "repo", rev)}, false, false},
		{"the component waits for another reason", ks("c", "repo", 1, cond("False", "Progressing", 1), dependsOn("a")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "repo", rev)}, false, false},
		{"its DependencyNotReady is about an older generation", ks("c", "repo", 2, waiting, dependsOn("a")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "repo", rev)}, false, false},
		{"a request made before is not handled yet", ks("c", "repo", 1, waiting, dependsOn("a"), annotated("t2", "t1")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "repo", rev)}, false, false},
		{"a request made before was handled", ks("c", "repo", 1, waiting, dependsOn("a"), annotated("t2", "t2")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "repo", rev)}, false, true},
		{"no dependsOn", ks("c", "repo", 1, waiting), nil, false, false},
		{"its source unknown: a dependency on the same source cannot be judged", ks("c", "repo", 1, waiting, dependsOn("a")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "repo", rev)}, true, false},
		{"its source unknown: a dependency on another source is judged by Ready", ks("c", "repo", 1, waiting, dependsOn("a")),
			map[dependencyRef]*unstructured.Unstructured{a: readyDep("a", "other", rev)}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			source := src
			if tt.noSrc {
				source = nil
			}
			if got := decideDependencyRequest(tt.ks, source, tt.deps); got != tt.want {
				t.Errorf("decideDependencyRequest = %v, want %v", got, tt.want)
			}
		})
	}
}
