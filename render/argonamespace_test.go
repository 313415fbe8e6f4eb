package render

import (
	"reflect"
	"testing"
)

func TestArgoNamespaceLeavesTheNamespaceToTheApplication(t *testing.T) {
	ns := func(name string, labels, annotations map[string]any) map[string]any {
		md := map[string]any{"name": name}
		if labels != nil {
			md["labels"] = labels
		}
		if annotations != nil {
			md["annotations"] = annotations
		}
		return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": md}
	}
	svc := map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "web", "namespace": "demo"}}
	guards := map[string]any{"kustomize.toolkit.fluxcd.io/prune": "disabled", "argocd.argoproj.io/sync-options": "Prune=false,Delete=false"}
	tests := []struct {
		name         string
		objs         []map[string]any
		wantKinds    []string
		wantMetadata map[string]any
	}{
		{
			name:      "the component's Namespace, with only the pruning guards, is left out with no metadata",
			objs:      []map[string]any{ns("demo", nil, guards), svc},
			wantKinds: []string{"Service"},
		},
		{
			name: "its labels and other annotations become the managed namespace metadata",
			objs: []map[string]any{svc, ns("demo", map[string]any{"pod-security.kubernetes.io/enforce": "baseline"},
				map[string]any{"kustomize.toolkit.fluxcd.io/prune": "disabled", "owner": "platform"})},
			wantKinds: []string{"Service"},
			wantMetadata: map[string]any{
				"labels":      map[string]any{"pod-security.kubernetes.io/enforce": "baseline"},
				"annotations": map[string]any{"owner": "platform"},
			},
		},
		{
			name:      "a component without a Namespace is left as it is",
			objs:      []map[string]any{svc},
			wantKinds: []string{"Service"},
		},
		{
			name:      "another namespace's object named like it stays",
			objs:      []map[string]any{{"apiVersion": "example.com/v1", "kind": "Namespace", "metadata": map[string]any{"name": "demo"}}},
			wantKinds: []string{"Namespace"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(tt.objs)
			rest, md := argoNamespace(tt.objs, "demo")
			var kinds []string
			for _, o := range rest {
				kinds = append(kinds, o["kind"].(string))
			}
			if !reflect.DeepEqual(kinds, tt.wantKinds) {
				t.Errorf("kept %v, want %v", kinds, tt.wantKinds)
			}
			if !reflect.DeepEqual(md, tt.wantMetadata) {
				t.Errorf("metadata %v, want %v", md, tt.wantMetadata)
			}
			if len(tt.objs) != before {
				t.Error("the input changed")
			}
		})
	}
}
