package render_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// TestValidateChecksEveryKindOfTheAPI: Validate admits every kind of
// Scribe's API as the apiserver would, defaulted, and names the field of
// what it refuses; Render still renders only Workloads and Experiments.
func TestValidateChecksEveryKindOfTheAPI(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	const repo = `apiVersion: scribe.dev/v1alpha1
kind: Repository
metadata: {name: dev}
spec:
  git: {url: "https://git.example.com/org/fleet.git", branch: main, secretRef: {name: creds}}
  applier: {kind: Flux, namespace: flux-system, name: fleet}
`
	const pipeline = `apiVersion: scribe.dev/v1alpha1
kind: Pipeline
metadata: {name: web, namespace: shop}
spec:
  template:
    versions: [{name: v1, image: "ghcr.io/example/web:1"}]
    service: {ports: [{name: http, port: 80, targetPort: 8080}]}
  stages: [{name: dev, repositoryRef: {name: dev}}]
`
	const policy = `apiVersion: scribe.dev/v1alpha1
kind: TenantPolicy
metadata: {name: team-a}
spec:
  namespaceSelector: {matchLabels: {team: a}}
`
	tests := []struct {
		name      string
		yaml      string
		wantKind  any
		namespace string
		wantErr   string // a field error's text
	}{
		{name: "a Repository, its namespace defaulted", yaml: repo, wantKind: &scribev1.Repository{}, namespace: "default"},
		{name: "a Pipeline", yaml: pipeline, wantKind: &scribev1.Pipeline{}, namespace: "shop"},
		{name: "a cluster-scoped TenantPolicy keeps no namespace", yaml: policy, wantKind: &scribev1.TenantPolicy{}},
		{name: "a TenantPolicy with a namespace", yaml: strings.Replace(policy, "{name: team-a}", "{name: team-a, namespace: x}", 1), wantErr: "metadata.namespace: Forbidden: TenantPolicy is cluster-scoped"},
		{name: "a Repository's unknown applier", yaml: strings.Replace(repo, "kind: Flux", "kind: Helm", 1), wantErr: `spec.applier.kind: Unsupported value: "Helm"`},
		{name: "a Repository's unknown field", yaml: strings.Replace(repo, "branch: main", "branch: main, depth: 1", 1), wantErr: "spec.git.depth: unknown field"},
		{name: "a Pipeline's stage name", yaml: strings.Replace(pipeline, "{name: dev,", "{name: Dev,", 1), wantErr: "spec.stages[0].name: Invalid value"},
		{name: "a kind that is not Scribe's", yaml: strings.Replace(repo, "kind: Repository", "kind: Secret", 1), wantErr: `kind: Scribe's kinds are Workload, Experiment, Pipeline, Repository and TenantPolicy, not "Secret"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(tt.yaml), &obj); err != nil {
				t.Fatal(err)
			}
			got, err := e.Validate(context.Background(), obj)
			if tt.wantErr != "" {
				var ie *render.InputError
				if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want an InputError with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if gotType, wantType := fmt.Sprintf("%T", got), fmt.Sprintf("%T", tt.wantKind); gotType != wantType {
				t.Fatalf("decoded %s, want %s", gotType, wantType)
			}
			if got.GetNamespace() != tt.namespace {
				t.Errorf("namespace %q, want %q", got.GetNamespace(), tt.namespace)
			}
			if _, err := e.Render(context.Background(), render.Input{Object: obj}); err == nil || !strings.Contains(err.Error(), "Scribe renders Workload and Experiment") {
				t.Errorf("Render of a %s: error %v, want a refusal", got.GetObjectKind().GroupVersionKind().Kind, err)
			}
		})
	}
}
