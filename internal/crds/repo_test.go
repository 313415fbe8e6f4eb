package crds

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindRepo(t *testing.T) {
	root := t.TempDir()
	mkfile := func(path, text string) {
		t.Helper()
		path = filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkfile("scribe/go.mod", "// Scribe\nmodule github.com/scribe-gitops/scribe // the module\n\ngo 1.26\n")
	mkfile("scribe/render/x.go", "package render\n")
	mkfile("scribe/testdata/other/go.mod", "module example.com/other\n")
	mkfile("quoted/go.mod", "module \"github.com/scribe-gitops/scribe\"\n")
	mkfile("elsewhere/go.mod", "module github.com/scribe-gitops/scribe-fork\n")
	tests := []struct {
		name string
		dir  string
		// want is relative to root; "" means no repository.
		want string
	}{
		{name: "the module root", dir: "scribe", want: "scribe/internal/crds/upstream"},
		{name: "a package folder in it", dir: "scribe/render", want: "scribe/internal/crds/upstream"},
		{name: "past another module's go.mod inside it", dir: "scribe/testdata/other", want: "scribe/internal/crds/upstream"},
		{name: "a quoted module path", dir: "quoted", want: "quoted/internal/crds/upstream"},
		{name: "another module", dir: "elsewhere", want: ""},
		{name: "no module at all", dir: ".", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindRepo(filepath.Join(root, filepath.FromSlash(tc.dir)))
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.want != "" {
				want = filepath.Join(root, filepath.FromSlash(tc.want))
			}
			if got != want {
				t.Errorf("FindRepo(%s) = %q, want %q", tc.dir, got, want)
			}
		})
	}
}

// repoFiles returns the files under the repository's copies, as
// slash-separated paths relative to it.
func repoFiles(t *testing.T) (repo string, files []string) {
	t.Helper()
	repo, err := filepath.Abs("upstream")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(repo, path)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return repo, files
}

// isLicense reports whether a file the repository carries beside the CRDs
// is a license text or notice.
func isLicense(name string) bool {
	return strings.HasPrefix(name, "LICENSE") || strings.HasPrefix(name, "NOTICE")
}

// TestRepositoryCarriesTheProjectsTheProxyDoesNotServe: the repository's
// copies hold every file of every project without a module, in the
// project's folder, and nothing else but SOURCES.md and license texts; no
// project the proxy serves is copied in.
func TestRepositoryCarriesTheProjectsTheProxyDoesNotServe(t *testing.T) {
	_, files := repoFiles(t)
	want := map[string]bool{"SOURCES.md": true}
	folders := map[string]bool{}
	for _, p := range Projects() {
		if !p.InRepo() {
			continue
		}
		folders[p.Mirror] = true
		for _, f := range p.Files {
			want[p.Mirror+"/"+f] = true
		}
	}
	for _, f := range files {
		folder, name, _ := strings.Cut(f, "/")
		switch {
		case want[f]:
			delete(want, f)
		case folders[folder] && !strings.Contains(name, "/") && isLicense(name):
		default:
			t.Errorf("%s/%s is neither a CRD file of a project the repository carries, nor a license text beside them, nor SOURCES.md", RepoFolder, f)
		}
	}
	for f := range want {
		t.Errorf("%s/%s is missing", RepoFolder, f)
	}
}

// TestRepositoryCopiesMatchTheMirror: when SCRIBE_CRDS_DIR names a mirror,
// every file the repository carries that the mirror has too (the CRDs and
// the license texts) is byte for byte the same, so that neither depends on
// which of the two is read.
func TestRepositoryCopiesMatchTheMirror(t *testing.T) {
	r, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if r.Mirror == "" {
		t.Skipf("%s is not set: no mirror to compare the repository's copies with", EnvDir)
	}
	repo, files := repoFiles(t)
	compared := 0
	for _, f := range files {
		if f == "SOURCES.md" {
			continue
		}
		mirrored, err := os.ReadFile(filepath.Join(r.Mirror, filepath.FromSlash(f)))
		if errors.Is(err, fs.ErrNotExist) {
			t.Logf("the mirror has no %s", f)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		carried, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(carried, mirrored) {
			t.Errorf("%s/%s differs from %s in the mirror %s; refresh it: go run ./hack/crds -from-mirror %s", RepoFolder, f, f, r.Mirror, r.Mirror)
		}
		compared++
	}
	t.Logf("%d files compared with the mirror %s", compared, r.Mirror)
}

// TestSourcesRecordTheCarriedFiles: SOURCES.md beside the copies names, for
// every project the repository carries, its upstream repository, tag,
// commit, folder upstream and files, and every license text by its path.
func TestSourcesRecordTheCarriedFiles(t *testing.T) {
	repo, files := repoFiles(t)
	data, err := os.ReadFile(filepath.Join(repo, "SOURCES.md"))
	if err != nil {
		t.Fatal(err)
	}
	sources := string(data)
	for _, p := range Projects() {
		if !p.InRepo() {
			continue
		}
		for _, want := range append([]string{p.Upstream, p.Version, p.Commit, p.Path + "/"}, p.Files...) {
			if !strings.Contains(sources, want) {
				t.Errorf("SOURCES.md does not name %q of %s", want, p.Name)
			}
		}
	}
	for _, f := range files {
		if isLicense(filepath.Base(f)) && !strings.Contains(sources, f) {
			t.Errorf("SOURCES.md does not name the license text %s", f)
		}
	}
}
