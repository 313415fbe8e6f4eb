package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/render"
)

// TestGPUSchedulingLeavesPlacementToTheNodeSelector: a GPU Workload asks
// for nvidia.com/gpu and tolerates its taint once; GKE's accelerator label
// is selected only when the Workload has no nodeSelector of its own, so a
// Workload placed by another label (the founding documents' accelerator:
// nodes, or NVIDIA's nvidia.com/gpu.product) schedules off GKE.
func TestGPUSchedulingLeavesPlacementToTheNodeSelector(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		scheduling   map[string]any
		nodeSelector string // sorted key=value pairs
		tolerations  int    // of nvidia.com/gpu
	}{
		{"no nodeSelector: GKE's accelerator label",
			map[string]any{"gpu": map[string]any{"type": "nvidia-l4"}},
			"cloud.google.com/gke-accelerator=nvidia-l4", 1},
		{"a nodeSelector of the user's: only it",
			map[string]any{"gpu": map[string]any{"type": "nvidia-a100", "count": int64(2)}, "nodeSelector": map[string]any{"accelerator": "nvidia-tesla-a100"}},
			"accelerator=nvidia-tesla-a100", 1},
		{"the user tolerates the GPU taint: not twice",
			map[string]any{"gpu": map[string]any{"type": "nvidia-a100"}, "nodeSelector": map[string]any{"accelerator": "nvidia-tesla-a100"},
				"tolerations": []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}},
			"accelerator=nvidia-tesla-a100", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{
				"apiVersion": "scribe.dev/v1alpha1", "kind": "Workload",
				"metadata": map[string]any{"name": "infer", "namespace": "ml"},
				"spec": map[string]any{
					"versions":   []any{map[string]any{"name": "v1", "image": "ghcr.io/example/vllm:1"}},
					"service":    map[string]any{"ports": []any{map[string]any{"name": "http", "port": int64(8000)}}},
					"scheduling": tc.scheduling,
				},
			}
			b, err := e.Render(context.Background(), render.Input{Object: obj, Publish: render.DefaultPublish()})
			if err != nil {
				t.Fatal(err)
			}
			var pod struct {
				NodeSelector map[string]string `json:"nodeSelector"`
				Tolerations  []struct {
					Key string `json:"key"`
				} `json:"tolerations"`
				Containers []struct {
					Resources struct {
						Limits map[string]any `json:"limits"`
					} `json:"resources"`
				} `json:"containers"`
			}
			found := false
			for _, f := range b.Files {
				if !strings.Contains(string(f.Data), "kind: Deployment\n") {
					continue
				}
				var d struct {
					Spec struct {
						Template struct {
							Spec json.RawMessage `json:"spec"`
						} `json:"template"`
					} `json:"spec"`
				}
				if err := yaml.Unmarshal(f.Data, &d); err != nil {
					t.Fatal(err)
				}
				if err := yaml.Unmarshal(d.Spec.Template.Spec, &pod); err != nil {
					t.Fatal(err)
				}
				found = true
			}
			if !found {
				t.Fatal("no Deployment rendered")
			}
			var sel []string
			for k, v := range pod.NodeSelector {
				sel = append(sel, k+"="+v)
			}
			if got := strings.Join(sel, ","); got != tc.nodeSelector {
				t.Errorf("nodeSelector %s, want %s", got, tc.nodeSelector)
			}
			n := 0
			for _, tol := range pod.Tolerations {
				if tol.Key == "nvidia.com/gpu" {
					n++
				}
			}
			if n != tc.tolerations {
				t.Errorf("%d tolerations of nvidia.com/gpu, want %d", n, tc.tolerations)
			}
			if len(pod.Containers) == 0 || fmt.Sprint(pod.Containers[0].Resources.Limits["nvidia.com/gpu"]) == "<nil>" {
				t.Errorf("the container does not ask for nvidia.com/gpu: %+v", pod.Containers)
			}
		})
	}
}
