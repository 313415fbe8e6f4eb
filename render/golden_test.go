package render_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

var update = flag.Bool("update", false, "rewrite the golden trees under fixtures/golden")

const fixturesDir = "../fixtures"

func validFixtures(t testing.TB) []string {
	files, err := filepath.Glob(filepath.Join(fixturesDir, "valid", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no valid fixtures: %v", err)
	}
	return files
}

func renderFile(t testing.TB, e *render.Engine, file string) *render.Bundle {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.ObjectsFromYAML(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: want one object, got %d (%v)", file, len(objs), err)
	}
	b, err := e.Render(context.Background(), render.Input{Object: objs[0], Publish: render.DefaultPublish(), Resolved: testResolved})
	if err != nil {
		t.Fatalf("render %s: %v", file, err)
	}
	return b
}

// readTree reads every file under dir, keyed by slash path.
func readTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRenderMatchesGoldenTrees(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range validFixtures(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			b := renderFile(t, e, file)
			golden := filepath.Join(fixturesDir, "golden", name)
			if *update {
				if err := publish.WriteDir(golden, []*render.Bundle{b}); err != nil {
					t.Fatal(err)
				}
			}
			want := readTree(t, golden)
			got := map[string][]byte{}
			for _, f := range b.Files {
				got[f.Path] = f.Data
			}
			var paths []string
			for p := range want {
				paths = append(paths, p)
			}
			for p := range got {
				if _, ok := want[p]; !ok {
					paths = append(paths, p)
				}
			}
			sort.Strings(paths)
			for _, p := range paths {
				if !bytes.Equal(want[p], got[p]) {
					t.Errorf("%s differs from the golden tree (run `make update-golden` if intended):\n--- golden\n%s\n--- rendered\n%s", p, want[p], got[p])
				}
			}
		})
	}
}

func TestRenderIsDeterministicAcrossEngines(t *testing.T) {
	e1, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	e2, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range validFixtures(t) {
		a := renderFile(t, e1, file)
		b := renderFile(t, e1, file)
		c := renderFile(t, e2, file)
		for _, other := range []*render.Bundle{b, c} {
			if a.Digest != other.Digest || len(a.Files) != len(other.Files) {
				t.Fatalf("%s: digests differ: %s vs %s", file, a.Digest, other.Digest)
			}
			for i := range a.Files {
				if a.Files[i].Path != other.Files[i].Path || !bytes.Equal(a.Files[i].Data, other.Files[i].Data) {
					t.Fatalf("%s: file %s differs between renders", file, a.Files[i].Path)
				}
			}
		}
	}
}

func TestRenderedTreesBuildWithKustomize(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range validFixtures(t) {
		b := renderFile(t, e, file)
		fs := filesys.MakeFsInMemory()
		for _, f := range b.Files {
			if err := fs.WriteFile("/repo/"+f.Path, f.Data); err != nil {
				t.Fatal(err)
			}
		}
		res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/repo/"+b.Dir)
		if err != nil {
			t.Fatalf("%s: kustomize build: %v", file, err)
		}
		if got, want := len(res.Resources()), len(b.Objects); got != want {
			t.Errorf("%s: kustomize built %d objects, the bundle lists %d", file, got, want)
		}
	}
}

// TestRenderAcceptsNumbersAsEncodingJSONDecodesThem: a library caller may
// decode a CR with encoding/json or sigs.k8s.io/yaml into map[string]any,
// where every number is a float64; it renders exactly as the same CR read
// from the API server (integers as int64).
func TestRenderAcceptsNumbersAsEncodingJSONDecodesThem(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range validFixtures(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want := renderFile(t, e, file)
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := sigsyaml.Unmarshal(data, &obj); err != nil {
				t.Fatal(err)
			}
			got, err := e.Render(context.Background(), render.Input{Object: obj, Publish: render.DefaultPublish(), Resolved: testResolved})
			if err != nil {
				t.Fatalf("render with float64 numbers: %v", err)
			}
			if got.Digest != want.Digest {
				t.Fatalf("digest %s with float64 numbers, %s with int64", got.Digest, want.Digest)
			}
		})
	}
}

// testResolved places the catalog's own components (the built-in app,
// config and workflow entries) in a published catalog, as a Repository's
// spec.catalog does.
var testResolved = render.Resolved{Catalog: &render.CatalogSource{Kind: "GitRepository", Namespace: "flux-system", Name: "scribe-catalog", Path: ".",
	URL: "https://git.example.com/platform/catalog.git", Revision: "v0.1.0"}}
