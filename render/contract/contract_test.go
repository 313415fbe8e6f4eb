package contract_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCUEDefinitionsAreGeneratedFromTheGoTypes regenerates the CUE
// definitions of the contract (hack/gen-contract.sh, `cue get go`) into a
// scratch directory and compares them with the ones committed under
// schemas/, which the templates import: a field renamed in Go and not
// regenerated fails here; regenerated, it fails the templates' CUE build.
// It needs the cue binary (`make test` passes CUE).
func TestCUEDefinitionsAreGeneratedFromTheGoTypes(t *testing.T) {
	cue := os.Getenv("CUE")
	if cue == "" {
		t.Skip("CUE is not set; `make test` sets it to the pinned cue binary")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, "hack", "gen-contract.sh"))
	cmd.Env = append(os.Environ(), "CUE="+cue, "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen-contract: %v\n%s", err, b)
	}
	for _, dir := range []string{
		"github.com/scribe-gitops/scribe/render/contract",
		"github.com/scribe-gitops/scribe/api/v1alpha1",
		"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1",
	} {
		gen, err := filepath.Glob(filepath.Join(out, dir, "*.cue"))
		if err != nil || len(gen) == 0 {
			t.Fatalf("%s: nothing generated (%v)", dir, err)
		}
		committed, _ := filepath.Glob(filepath.Join(root, "schemas", dir, "*.cue"))
		if len(committed) != len(gen) {
			t.Errorf("schemas/%s has %d files, the Go types generate %d: run `make generate`", dir, len(committed), len(gen))
		}
		for _, f := range gen {
			want, _ := os.ReadFile(f)
			got, err := os.ReadFile(filepath.Join(root, "schemas", dir, filepath.Base(f)))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("schemas/%s/%s is not what the Go types generate: run `make generate`", dir, filepath.Base(f))
			}
		}
	}
}
