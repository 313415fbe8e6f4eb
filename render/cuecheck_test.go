package render

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render/contract"
)

// withCUEChecks builds an engine that checks with CUE what renders check
// in Go: every input unified with its closed contract definition
// (templates/*/contract.cue) and every rendered object with the CUE schema
// registry.
func withCUEChecks() Option { return func(o *engineOptions) { o.cueChecks = true } }

// TestCUEChecksRenderTheSameBundles: every valid fixture renders to the
// same bundle whether its input is unified with the CUE contract and its
// objects checked by CUE, or neither (the renders' path).
func TestCUEChecksRenderTheSameBundles(t *testing.T) {
	fast, err := New()
	if err != nil {
		t.Fatal(err)
	}
	checked, err := New(withCUEChecks())
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../fixtures/valid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no valid fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := ObjectsFromYAML(data)
			if err != nil || len(objs) != 1 {
				t.Fatalf("want one object, got %d (%v)", len(objs), err)
			}
			in := Input{Object: objs[0], Publish: DefaultPublish(), Resolved: internalTestResolved}
			want, err := fast.Render(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := checked.Render(context.Background(), in)
			if err != nil {
				t.Fatalf("with CUE checks: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("bundles differ:\nwith CUE checks: %+v\nwithout: %+v", got, want)
			}
		})
	}
}

// TestCUEContractRefusesWhatGoCannotEncode: the contract is loaded with
// the CUE checks, and only then: an input no Go value encodes fails there.
func TestCUEContractRefusesWhatGoCannotEncode(t *testing.T) {
	fast, err := New()
	if err != nil {
		t.Fatal(err)
	}
	checked, err := New(withCUEChecks())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../fixtures/valid/workload-canary-50.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ObjectsFromYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(spec map[string]any)
		field  string
	}{
		{"unknown field", func(spec map[string]any) { spec["replicaz"] = 2 }, "spec.replicaz"},
		{"wrong type", func(spec map[string]any) { spec["rollout"].(map[string]any)["strategy"] = 7 }, "spec.rollout.strategy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := fast.decode(context.Background(), objs[0])
			if err != nil {
				t.Fatal(err)
			}
			w := d.typed.(*scribev1.Workload)
			raw, err := json.Marshal(contract.Workload{Metadata: metadataOf(w), Spec: w.Spec, Traffic: w.Status.Traffic, Stable: w.Status.StableVersion, Publish: DefaultPublish()})
			if err != nil {
				t.Fatal(err)
			}
			input, err := decodeData(raw)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(input["spec"].(map[string]any))
			if _, err := fast.renderBundle(context.Background(), d, input); err != nil {
				t.Fatalf("without the contract: %v", err)
			}
			_, err = checked.renderBundle(context.Background(), d, input)
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("with the contract: got %v, want an InputError", err)
			}
			found := false
			for _, fe := range ie.Errors {
				found = found || fe.Path == tc.field
			}
			if !found {
				t.Errorf("with the contract: got %v, want an error at %s", ie.Errors, tc.field)
			}
		})
	}
}

// internalTestResolved places the catalog's own components in a published
// catalog (the render_test package's testResolved).
var internalTestResolved = Resolved{Catalog: &CatalogSource{Kind: "GitRepository", Namespace: "flux-system", Name: "scribe-catalog", Path: ".",
	URL: "https://git.example.com/platform/catalog.git", Revision: "v0.1.0"}}
