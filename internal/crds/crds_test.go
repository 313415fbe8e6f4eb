package crds

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func project(t *testing.T, name string) Project {
	t.Helper()
	for _, p := range Projects() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no project %s", name)
	return Project{}
}

// writeFiles creates dir/<f> for every f, plus the extras.
func writeFiles(t *testing.T, dir string, files []string, extras ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(slices.Clone(files), extras...) {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("kind: CustomResourceDefinition\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeModules serves modules from folders under root, named after the
// module path, with the pinned sums unless sums overrides one.
func fakeModules(t *testing.T, root string, sums map[string]string, calls *[]string) DownloadFunc {
	return func(_ context.Context, module, version string) (Module, error) {
		*calls = append(*calls, module+"@"+version)
		dir := filepath.Join(root, filepath.FromSlash(module)+"@"+version)
		if _, err := os.Stat(dir); err != nil {
			return Module{}, errors.New("not found: " + module + "@" + version)
		}
		sum, ok := sums[module]
		if !ok {
			for _, p := range Projects() {
				if p.Module == module {
					sum = p.Sum
				}
			}
		}
		return Module{Dir: dir, Sum: sum}, nil
	}
}

func TestResolverFiles(t *testing.T) {
	fluxSource := project(t, "flux-source")
	fluxHelm := project(t, "flux-helm")
	keda := project(t, "keda")
	argoWorkflows := project(t, "argo-workflows")

	tests := []struct {
		name string
		// repo lays out the repository's copies; nil means none.
		repo func(t *testing.T, dir string)
		// mirror lays out the mirror; nil means no mirror.
		mirror func(t *testing.T, dir string)
		// modules lays out the module cache.
		modules func(t *testing.T, dir string)
		sums    map[string]string
		ask     []string
		// want are the wanted files, relative to the repository's copies
		// ("repo/..."), the mirror ("mirror/...") or the module cache
		// ("modules/...").
		want      []string
		wantCalls []string
		// wantMissing are the projects of the *UnavailableError.
		wantMissing []string
		// wantErr is part of another error's message.
		wantErr string
	}{
		{
			name: "the mirror takes precedence over the module cache",
			mirror: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "flux"), fluxSource.Files)
			},
			modules: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "github.com/fluxcd/source-controller@v1.9.6", fluxSource.Path), fluxSource.Files)
			},
			ask:  []string{"flux-source"},
			want: prefixed("mirror/flux/", fluxSource.Files),
		},
		{
			name: "a project the mirror lacks comes from the module cache, only its listed files",
			mirror: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "flux"), fluxSource.Files)
			},
			modules: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "github.com/kedacore/keda/v2@v2.21.0", keda.Path), keda.Files, "kustomization.yaml", "keda.sh_clustertriggerauthentications.yaml")
			},
			ask:       []string{"flux-source", "keda"},
			want:      append(prefixed("mirror/flux/", fluxSource.Files), prefixed("modules/github.com/kedacore/keda/v2@v2.21.0/config/crd/bases/", keda.Files)...),
			wantCalls: []string{"github.com/kedacore/keda/v2@v2.21.0"},
		},
		{
			name: "without a mirror a project the proxy serves comes from the module cache",
			modules: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "github.com/kedacore/keda/v2@v2.21.0", keda.Path), keda.Files)
			},
			ask:       []string{"keda"},
			want:      prefixed("modules/github.com/kedacore/keda/v2@v2.21.0/config/crd/bases/", keda.Files),
			wantCalls: []string{"github.com/kedacore/keda/v2@v2.21.0"},
		},
		{
			name: "a project the proxy does not serve comes from the repository, before the mirror",
			repo: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "argo-workflows"), argoWorkflows.Files)
				writeFiles(t, filepath.Join(dir, "flux"), fluxHelm.Files)
			},
			mirror: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "argo-workflows"), argoWorkflows.Files)
				writeFiles(t, filepath.Join(dir, "flux"), append(slices.Clone(fluxSource.Files), fluxHelm.Files...))
			},
			ask:  []string{"argo-workflows", "flux-helm"},
			want: append(prefixed("repo/argo-workflows/", argoWorkflows.Files), prefixed("repo/flux/", fluxHelm.Files)...),
		},
		{
			name: "a project the proxy serves is never read from the repository, even from a folder it shares",
			repo: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "flux"), append(slices.Clone(fluxSource.Files), fluxHelm.Files...))
			},
			modules: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "github.com/fluxcd/source-controller@v1.9.6", fluxSource.Path), fluxSource.Files)
			},
			ask:       []string{"flux-source"},
			want:      prefixed("modules/github.com/fluxcd/source-controller@v1.9.6/config/crd/bases/", fluxSource.Files),
			wantCalls: []string{"github.com/fluxcd/source-controller@v1.9.6"},
		},
		{
			name: "a repository copy that lacks one of the project's files is an error, not a fallback to the mirror",
			repo: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "argo-workflows"), argoWorkflows.Files[1:])
			},
			mirror: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "argo-workflows"), argoWorkflows.Files)
			},
			ask:     []string{"argo-workflows"},
			wantErr: "the repository's copy",
		},
		{
			name: "without the repository's copies a project the proxy does not serve is found in the mirror",
			mirror: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "argo-workflows"), argoWorkflows.Files)
			},
			ask:  []string{"argo-workflows"},
			want: prefixed("mirror/argo-workflows/", argoWorkflows.Files),
		},
		{
			name: "a project the proxy does not serve that neither the repository nor a mirror holds is unavailable, the others still resolve",
			modules: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "github.com/kedacore/keda/v2@v2.21.0", keda.Path), keda.Files)
			},
			ask:         []string{"argo-workflows", "keda", "flux-helm"},
			want:        prefixed("modules/github.com/kedacore/keda/v2@v2.21.0/config/crd/bases/", keda.Files),
			wantCalls:   []string{"github.com/kedacore/keda/v2@v2.21.0"},
			wantMissing: []string{"argo-workflows", "flux-helm"},
		},
		{
			name: "a mirror folder that lacks one of the project's files is an error, not a fallback",
			mirror: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "flux"), fluxSource.Files)
			},
			ask:     []string{"flux-helm"},
			wantErr: "no CRD file " + fluxHelm.Files[0],
		},
		{
			name: "a module whose hash is not the pinned one is refused",
			modules: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "github.com/kedacore/keda/v2@v2.21.0", keda.Path), keda.Files)
			},
			sums:      map[string]string{"github.com/kedacore/keda/v2": "h1:other="},
			ask:       []string{"keda"},
			wantCalls: []string{"github.com/kedacore/keda/v2@v2.21.0"},
			wantErr:   "want the pinned " + keda.Sum,
		},
		{
			name: "a module without one of the listed files is an error",
			modules: func(t *testing.T, dir string) {
				writeFiles(t, filepath.Join(dir, "github.com/kedacore/keda/v2@v2.21.0", keda.Path), keda.Files[:1])
			},
			ask:       []string{"keda"},
			wantCalls: []string{"github.com/kedacore/keda/v2@v2.21.0"},
			wantErr:   "no CRD file " + keda.Files[1],
		},
		{
			name:    "an unknown project is an error naming the known ones",
			ask:     []string{"flux"},
			wantErr: `unknown upstream project "flux" (known: flux-source, flux-kustomize`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var calls []string
			r := Resolver{Download: fakeModules(t, filepath.Join(root, "modules"), tc.sums, &calls)}
			if tc.repo != nil {
				r.Repo = filepath.Join(root, "repo")
				if err := os.MkdirAll(r.Repo, 0o755); err != nil {
					t.Fatal(err)
				}
				tc.repo(t, r.Repo)
			}
			if tc.mirror != nil {
				r.Mirror = filepath.Join(root, "mirror")
				if err := os.MkdirAll(r.Mirror, 0o755); err != nil {
					t.Fatal(err)
				}
				tc.mirror(t, r.Mirror)
			}
			if tc.modules != nil {
				tc.modules(t, filepath.Join(root, "modules"))
			}
			files, err := r.Files(context.Background(), tc.ask...)
			var unavailable *UnavailableError
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if files != nil {
					t.Errorf("files = %v with an error, want none", files)
				}
				return
			case tc.wantMissing != nil:
				if !errors.As(err, &unavailable) {
					t.Fatalf("err = %v, want an *UnavailableError", err)
				}
				if !slices.Equal(unavailable.Projects, tc.wantMissing) {
					t.Errorf("missing = %v, want %v", unavailable.Projects, tc.wantMissing)
				}
				if !strings.Contains(err.Error(), EnvDir) || !strings.Contains(err.Error(), RepoFolder) {
					t.Errorf("%q does not name %s and %s", err, EnvDir, RepoFolder)
				}
			case err != nil:
				t.Fatal(err)
			}
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = filepath.Join(root, filepath.FromSlash(w))
			}
			if !slices.Equal(files, want) {
				t.Errorf("files:\n got %v\nwant %v", files, want)
			}
			if !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("downloads = %v, want %v", calls, tc.wantCalls)
			}
		})
	}
}

func prefixed(prefix string, files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = prefix + f
	}
	return out
}

func TestFromEnvReadsTheMirrorFolderAndFindsTheRepository(t *testing.T) {
	abs := t.TempDir()
	// Tests run in their package's folder: internal/crds.
	repo, err := filepath.Abs("upstream")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		env        string
		wantMirror string
		wantErr    bool
	}{
		{name: "unset means no mirror", env: "", wantMirror: ""},
		{name: "an absolute path is the mirror", env: abs, wantMirror: abs},
		{name: "a relative path is refused, since tests run in their package's folder", env: filepath.Join("..", "shared", "crds"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvDir, tc.env)
			r, err := FromEnv()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if r.Mirror != tc.wantMirror {
				t.Errorf("Mirror = %q, want %q", r.Mirror, tc.wantMirror)
			}
			if r.Repo != repo {
				t.Errorf("Repo = %q, want %q", r.Repo, repo)
			}
		})
	}
}

func TestResolverRefusesFoldersThatAreNotFolders(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "absent")
	tests := []struct {
		name    string
		r       Resolver
		wantErr string
	}{
		{name: "a mirror", r: Resolver{Mirror: absent}, wantErr: EnvDir},
		{name: "the repository's copies", r: Resolver{Repo: absent}, wantErr: "the repository's CRDs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.r.Files(context.Background(), "keda"); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestProjectsTableIsWellFormed: unique names and file names (hack/gen-schemas.sh
// finds a file by its name), a module always with its hash, version and path,
// a project the repository carries with its upstream commit and path, and
// one kind per file.
func TestProjectsTableIsWellFormed(t *testing.T) {
	commitRE := regexp.MustCompile(`^[0-9a-f]{40}$`)
	names, files := map[string]bool{}, map[string]string{}
	for _, p := range Projects() {
		if p.Name == "" || names[p.Name] {
			t.Errorf("project name %q is empty or repeated", p.Name)
		}
		names[p.Name] = true
		if p.Mirror == "" || p.Upstream == "" || p.Version == "" || len(p.Files) == 0 || len(p.Kinds) != len(p.Files) {
			t.Errorf("%s: want a mirror folder, upstream, version, files and one kind per file: %+v", p.Name, p)
		}
		if p.Path == "" || filepath.IsAbs(p.Path) || strings.Contains(p.Path, `\`) {
			t.Errorf("%s: want the files' folder upstream as a relative slash-separated path: %+v", p.Name, p)
		}
		if p.Module != "" && (!strings.HasPrefix(p.Sum, "h1:") || p.Commit != "") {
			t.Errorf("%s: a module needs its h1: hash and no commit: %+v", p.Name, p)
		}
		if p.Module == "" && (p.Sum != "" || !commitRE.MatchString(p.Commit)) {
			t.Errorf("%s: a project the repository carries needs the full upstream commit and no hash: %+v", p.Name, p)
		}
		for _, f := range p.Files {
			if other, ok := files[f]; ok || filepath.Base(f) != f || !strings.HasSuffix(f, ".yaml") {
				t.Errorf("%s: file %q is repeated (also in %q) or not a bare .yaml name", p.Name, f, other)
			}
			files[f] = p.Name
		}
	}
}

// TestPinnedFilesDefineTheTableKinds reads the real files (the repository's
// copies, the mirror or the module cache): each is one
// apiextensions.k8s.io/v1 CustomResourceDefinition whose kind the table
// lists, and every listed kind has its file.
func TestPinnedFilesDefineTheTableKinds(t *testing.T) {
	r, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Projects() {
		t.Run(p.Name, func(t *testing.T) {
			files, err := r.Files(t.Context(), p.Name)
			var unavailable *UnavailableError
			if errors.As(err, &unavailable) {
				if os.Getenv(EnvRequired) == "1" {
					t.Fatal(err)
				}
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckFiles(p, files); err != nil {
				t.Error(err)
			}
		})
	}
}
