package render

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/parser"
)

func TestMemFS(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
	}{
		{name: "empty"},
		{name: "one file at the root", files: map[string]string{"a.cue": "a: 1"}},
		{name: "nested", files: map[string]string{
			"scribe/cue.mod/module.cue":          "module: \"x.dev/y@v0\"",
			"scribe/catalog/a.cue":               "package catalog",
			"scribe/catalog/b.cue":               "package catalog",
			"scribe/schemas/k8s.io/api/v1/t.cue": "package v1",
			"scribe/workload/w.cue":              "",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemFS()
			var names []string
			for name, data := range tt.files {
				if err := m.add(name, []byte(data)); err != nil {
					t.Fatal(err)
				}
				names = append(names, name)
			}
			// fstest.TestFS opens, reads, stats, seeks and lists every
			// file and directory, through every interface memFS has.
			if err := fstest.TestFS(m, names...); err != nil {
				t.Fatal(err)
			}
			for name, data := range tt.files {
				got, err := fs.ReadFile(m, name)
				if err != nil || string(got) != data {
					t.Errorf("ReadFile(%q) = %q, %v; want %q", name, got, err, data)
				}
			}
			for _, missing := range []string{"nope", "scribe/nope.cue", "scribe/catalog/a.cue/x"} {
				if _, err := m.Open(missing); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("Open(%q) = %v, want fs.ErrNotExist", missing, err)
				}
				if _, err := fs.Stat(m, missing); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("Stat(%q) = %v, want fs.ErrNotExist", missing, err)
				}
			}
		})
	}
}

func TestMemFSAddRefuses(t *testing.T) {
	tests := []struct {
		name    string
		present string
		add     string
		wantErr string
	}{
		{name: "absolute path", add: "/a.cue", wantErr: "not a valid file path"},
		{name: "dot-dot", add: "a/../b.cue", wantErr: "not a valid file path"},
		{name: "the root", add: ".", wantErr: "not a valid file path"},
		{name: "a file under a file", present: "a", add: "a/b.cue", wantErr: "a is a file"},
		{name: "a file over a directory", present: "a/b.cue", add: "a", wantErr: "a directory of that name exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemFS()
			if tt.present != "" {
				if err := m.add(tt.present, nil); err != nil {
					t.Fatal(err)
				}
			}
			err := m.add(tt.add, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("add(%q) = %v, want an error containing %q", tt.add, err, tt.wantErr)
			}
		})
	}
}

// TestCUEModuleIgnoresTheHost: whatever the host has at the path of the
// engine's CUE module (the binary itself, as in the container image where
// both are /scribe; a directory with a module file, a local-module.cue or
// CUE files of the module's packages), the engine loads its own module and
// nothing else. The control loads the same files as a load.Config.Overlay
// (how the engine loaded them before), which the host's files break.
func TestCUEModuleIgnoresTheHost(t *testing.T) {
	tests := []struct {
		name string
		// host lays files under dir and returns the module's root.
		host func(t *testing.T, dir string) string
	}{
		{name: "the root is a regular file (the binary)", host: func(t *testing.T, dir string) string {
			root := filepath.Join(dir, "scribe")
			writeHostFile(t, root, "\x7fELF")
			return root
		}},
		{name: "cue.mod is a regular file", host: func(t *testing.T, dir string) string {
			writeHostFile(t, filepath.Join(dir, "cue.mod"), "")
			return dir
		}},
		{name: "a local-module.cue of another module", host: func(t *testing.T, dir string) string {
			writeHostFile(t, filepath.Join(dir, "cue.mod", "local-module.cue"), "module: \"evil.example/x@v0\"\n")
			return dir
		}},
		{name: "CUE files that would join the module's packages", host: func(t *testing.T, dir string) string {
			writeHostFile(t, filepath.Join(dir, "catalog", "zz_host.cue"), "package catalog\n\nentries: 1 & 2\n")
			writeHostFile(t, filepath.Join(dir, "workload", "zz_host.cue"), "package workload\n\ninput: 1 & 2\n")
			writeHostFile(t, filepath.Join(dir, "schemas", "k8s.io", "api", "core", "v1", "zz_host.cue"), "package v1\n\n#Pod: 1 & 2\n")
			return dir
		}},
		{name: "a directory that cannot be listed", host: func(t *testing.T, dir string) string {
			// A symlink loop: every lookup under it fails (ELOOP).
			if err := os.Symlink("loop", filepath.Join(dir, "loop")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "loop")
		}},
	}
	pkgs := []string{"./catalog", "./workload", "./experiment"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.ToSlash(tt.host(t, t.TempDir()))
			m, err := newCUEModule(root, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := loadCatalogs(cuecontext.New(), m, nil); err != nil {
				t.Fatalf("load the catalog: %v", err)
			}
			for i, inst := range load.Instances(pkgs, m.config(nil)) {
				if inst.Err != nil {
					t.Fatalf("load %s: %s", pkgs[i], cueerrors.Details(inst.Err, nil))
				}
				if v := cuecontext.New().BuildInstance(inst); v.Err() != nil {
					t.Fatalf("build %s: %v", pkgs[i], v.Err())
				}
			}

			// The control: the same module laid over the host.
			overlay := map[string]load.Source{}
			for name, data := range m.fsys.files {
				overlay["/"+name] = load.FromBytes(data)
			}
			var controlErr error
			for _, inst := range load.Instances(pkgs, &load.Config{Dir: m.root, Overlay: overlay, ParseFile: m.parseFile}) {
				if controlErr = inst.Err; controlErr != nil {
					break
				}
				if controlErr = cuecontext.New().BuildInstance(inst).Validate(); controlErr != nil {
					break
				}
			}
			if controlErr == nil {
				t.Fatal("the control did not fail: the host's files at the module root are not in the way of an overlay, so this case proves nothing")
			}
			t.Logf("the control (an overlay) failed as expected: %v", controlErr)
		})
	}
}

// TestCUEModuleConfig: every load of the engine reads its in-memory module
// alone (load.Config.FS), never the host's files (load.Config.Overlay).
func TestCUEModuleConfig(t *testing.T) {
	m, err := newCUEModule(moduleRoot, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tags := range [][]string{nil, {"contract"}} {
		cfg := m.config(tags)
		if cfg.FS == nil || cfg.Overlay != nil || cfg.Dir != moduleRoot || cfg.ParseFile == nil {
			t.Errorf("config(%v) = FS %v, Overlay %v, Dir %q, ParseFile set %v; want the module's FS, no overlay, Dir %q and its ParseFile",
				tags, cfg.FS, cfg.Overlay, cfg.Dir, cfg.ParseFile != nil, moduleRoot)
		}
	}
}

func writeHostFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseFileImports(t *testing.T) {
	m, err := newCUEModule(moduleRoot, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, imp, want string
	}{
		{name: "a schema package", imp: "k8s.io/api/core/v1", want: "scribe.dev/templates/schemas/k8s.io/api/core/v1"},
		{name: "a schema package with a qualifier", imp: "k8s.io/api/core/v1:v1", want: "scribe.dev/templates/schemas/k8s.io/api/core/v1:v1"},
		{name: "the render contract", imp: "github.com/scribe-gitops/scribe/render/contract", want: "scribe.dev/templates/schemas/github.com/scribe-gitops/scribe/render/contract"},
		{name: "a parent of schema packages", imp: "k8s.io/api", want: "k8s.io/api"},
		{name: "the standard library", imp: "strings", want: "strings"},
		{name: "a package of the module", imp: "scribe.dev/templates/catalog", want: "scribe.dev/templates/catalog"},
		{name: "another module", imp: "example.com/x/v1", want: "example.com/x/v1"},
		{name: "a versioned import", imp: "k8s.io/api/core/v1@v0", want: "k8s.io/api/core/v1@v0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package p\n\nimport x " + strconv.Quote(tt.imp) + "\n\ny: x\n"
			f, err := m.parseFile("p.cue", []byte(src), parser.NewConfig())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for d := range f.ImportDecls() {
				for _, spec := range d.Specs {
					got = append(got, spec.Path.Value)
				}
			}
			if want := strconv.Quote(tt.want); len(got) != 1 || got[0] != want {
				t.Errorf("imports = %v, want [%s]", got, want)
			}
		})
	}
}
