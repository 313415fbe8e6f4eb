package render

import (
	"strings"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render/contract"
)

// TestCrossKindDepends: under Flux, a target's app or config component
// may depend only on deliveries of its own kind; a workflow component may
// depend on any (the controller's stages order it); Argo CD orders by
// sync waves, whatever the kinds.
func TestCrossKindDepends(t *testing.T) {
	helm := contract.Resolved{Name: "envoy-gateway", Kind: contract.ComponentApp, Entry: map[string]any{"source": map[string]any{"type": "helm"}}}
	cat := func(name string, kind contract.ComponentKind) contract.Resolved {
		return contract.Resolved{Name: name, Kind: kind, Entry: map[string]any{"source": map[string]any{"type": "catalog"}}}
	}
	exp := func(depends ...string) *scribev1.Experiment {
		return &scribev1.Experiment{Spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{{Name: "app"}, {Name: "next", Depends: depends}}}}
	}
	tests := []struct {
		name    string
		x       *scribev1.Experiment
		targets []contract.TargetInput
		applier scribev1.ApplierKind
		want    string // the error's path and a part of it, "" for none
	}{
		{name: "a kustomization depending on a helm release is refused", x: exp("app"), applier: scribev1.ApplierFlux,
			targets: []contract.TargetInput{{Components: []contract.Resolved{helm}}, {Components: []contract.Resolved{cat("demo-services", contract.ComponentApp)}}},
			want:    `spec.targets[1].depends[0]: target "next" depends on target "app", whose component "envoy-gateway" Flux delivers as a HelmRelease, while this target's component "demo-services" is a Kustomization`},
		{name: "a helm release depending on a kustomization is refused", x: exp("app"), applier: scribev1.ApplierFlux,
			targets: []contract.TargetInput{{Components: []contract.Resolved{cat("demo-services", contract.ComponentApp)}}, {Components: []contract.Resolved{helm}}},
			want:    "spec.targets[1].depends[0]"},
		{name: "one kind on both sides is allowed", x: exp("app"), applier: scribev1.ApplierFlux,
			targets: []contract.TargetInput{{Components: []contract.Resolved{cat("a", contract.ComponentApp), cat("b", contract.ComponentConfig)}}, {Components: []contract.Resolved{cat("c", contract.ComponentApp)}}}},
		{name: "a workflow component may depend on helm releases", x: exp("app"), applier: scribev1.ApplierFlux,
			targets: []contract.TargetInput{{Components: []contract.Resolved{helm, cat("demo-services", contract.ComponentApp)}}, {Components: []contract.Resolved{cat("k6-http-loadgen", contract.ComponentWorkflow)}}}},
		{name: "argo cd orders any kinds", x: exp("app"), applier: scribev1.ApplierArgoCD,
			targets: []contract.TargetInput{{Components: []contract.Resolved{helm}}, {Components: []contract.Resolved{cat("demo-services", contract.ComponentApp)}}}},
		{name: "no depends, no refusal", x: exp(), applier: scribev1.ApplierFlux,
			targets: []contract.TargetInput{{Components: []contract.Resolved{helm}}, {Components: []contract.Resolved{cat("demo-services", contract.ComponentApp)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := crossKindDepends(tt.x, tt.targets, tt.applier)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Path+": "+errs[0].Message, tt.want) {
				t.Fatalf("errors %v, want one with %q", errs, tt.want)
			}
		})
	}
}
