package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/crds"
)

// crdYAML is a small CustomResourceDefinition of kind.
func crdYAML(kind string) string {
	plural := strings.ToLower(kind) + "s"
	return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n" +
		"metadata:\n  name: " + plural + ".example.com\n" +
		"spec:\n  group: example.com\n  scope: Namespaced\n" +
		"  names:\n    kind: " + kind + "\n    plural: " + plural + "\n" +
		"  versions:\n  - name: v1\n    served: true\n    storage: true\n"
}

func project(t *testing.T, name string) crds.Project {
	t.Helper()
	for _, p := range crds.Projects() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no project %s", name)
	return crds.Project{}
}

// writeTree creates root/<path> holding text for every entry.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree returns every file under root, by slash-separated relative path.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRunPrintsOneFilePerLineOrNothing(t *testing.T) {
	cp, boot := project(t, "talos-controlplane"), project(t, "talos-bootstrap")
	good := t.TempDir()
	writeTree(t, good, map[string]string{
		"talos/" + cp.Files[0]:   crdYAML("TalosControlPlane"),
		"talos/" + boot.Files[0]: crdYAML("TalosConfigTemplate"),
	})
	bad := t.TempDir()
	writeTree(t, bad, map[string]string{
		"talos/" + cp.Files[0]:   crdYAML("TalosControlPlane"),
		"talos/" + boot.Files[0]: crdYAML("TalosControlPlane"),
	})
	tests := []struct {
		name     string
		r        crds.Resolver
		projects []string
		check    bool
		// want are the printed files, "good/..." or "bad/...".
		want    []string
		wantErr string
	}{
		{
			name:     "the named projects' files, in order",
			r:        crds.Resolver{Mirror: good}, // no module downloads, no repository
			projects: []string{"talos-bootstrap", "talos-controlplane"},
			want:     []string{"good/talos/" + boot.Files[0], "good/talos/" + cp.Files[0]},
		},
		{
			name:     "the repository's copies come before the mirror",
			r:        crds.Resolver{Repo: good, Mirror: bad},
			projects: []string{"talos-bootstrap"},
			want:     []string{"good/talos/" + boot.Files[0]},
		},
		{
			name:     "checked files that pass",
			r:        crds.Resolver{Mirror: good},
			projects: []string{"talos-controlplane", "talos-bootstrap"},
			check:    true,
			want:     []string{"good/talos/" + cp.Files[0], "good/talos/" + boot.Files[0]},
		},
		{
			name:     "nothing when a checked file defines another kind",
			r:        crds.Resolver{Mirror: bad},
			projects: []string{"talos-controlplane", "talos-bootstrap"},
			check:    true,
			wantErr:  `defines the kind "TalosControlPlane", the table lists "TalosConfigTemplate"`,
		},
		{
			name:     "unchecked, the same files are printed",
			r:        crds.Resolver{Mirror: bad},
			projects: []string{"talos-bootstrap"},
			want:     []string{"bad/talos/" + boot.Files[0]},
		},
		{
			name:     "nothing when one project cannot be found, and an error naming SCRIBE_CRDS_DIR",
			r:        crds.Resolver{Mirror: good},
			projects: []string{"talos-bootstrap", "testkube"},
			wantErr:  crds.EnvDir,
		},
		{
			name:    "no project means every project",
			r:       crds.Resolver{Mirror: good},
			wantErr: "flux-source",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), &out, tc.r, tc.projects, tc.check)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if out.Len() > 0 {
					t.Errorf("wrote %q despite the error", out.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			for _, f := range tc.want {
				root, rel, _ := strings.Cut(f, "/")
				if root == "good" {
					root = good
				} else {
					root = bad
				}
				want.WriteString(filepath.Join(root, filepath.FromSlash(rel)) + "\n")
			}
			if out.String() != want.String() {
				t.Errorf("got\n%s\nwant\n%s", out.String(), want.String())
			}
		})
	}
}

// gitRepo makes a git repository in dir holding files at a first commit,
// then changed at a second one, and returns the first commit.
func gitRepo(t *testing.T, dir string, first, second map[string]string) string {
	t.Helper()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	writeTree(t, dir, first)
	git("add", "-A")
	git("commit", "-q", "-m", "first")
	commit := git("rev-parse", "HEAD")
	writeTree(t, dir, second)
	git("add", "-A")
	git("commit", "-q", "-m", "second")
	return commit
}

func TestRefresh(t *testing.T) {
	cp, boot := project(t, "talos-controlplane"), project(t, "talos-bootstrap")
	cpFile, bootFile := "talos/"+cp.Files[0], "talos/"+boot.Files[0]
	cpCRD, bootCRD := crdYAML("TalosControlPlane"), crdYAML("TalosConfigTemplate")

	// An upstream git repository of the bootstrap provider: the pinned
	// commit holds the CRD, the next one another version of it.
	upstream := t.TempDir()
	pinned := gitRepo(t, upstream,
		map[string]string{boot.Path + "/" + boot.Files[0]: bootCRD},
		map[string]string{boot.Path + "/" + boot.Files[0]: bootCRD + "# changed after the pin\n"})
	bootAtPin := boot
	bootAtPin.Commit = pinned

	tests := []struct {
		name     string
		repo     map[string]string
		mirror   map[string]string
		projects []crds.Project
		// git makes src read git repositories, by project name, instead of
		// the mirror.
		git     map[string]string
		want    map[string]string
		wantOut string
		wantErr string
	}{
		{
			name:     "from a mirror into an empty folder",
			mirror:   map[string]string{cpFile: cpCRD, bootFile: bootCRD, "talos/other.yaml": "not copied"},
			projects: []crds.Project{cp, boot},
			want:     map[string]string{cpFile: cpCRD, bootFile: bootCRD},
			wantOut:  "updated " + cpFile + "\nupdated " + bootFile + "\n",
		},
		{
			name:     "only what differs is written; the license beside them stays",
			repo:     map[string]string{cpFile: cpCRD, bootFile: "stale", "talos/LICENSE-MPL-2.0.txt": "license"},
			mirror:   map[string]string{cpFile: cpCRD, bootFile: bootCRD},
			projects: []crds.Project{cp, boot},
			want:     map[string]string{cpFile: cpCRD, bootFile: bootCRD, "talos/LICENSE-MPL-2.0.txt": "license"},
			wantOut:  "unchanged " + cpFile + "\nupdated " + bootFile + "\n",
		},
		{
			name:     "nothing is written when one file fails its check, not even the other project's",
			repo:     map[string]string{cpFile: "old", bootFile: "old"},
			mirror:   map[string]string{cpFile: cpCRD, bootFile: cpCRD},
			projects: []crds.Project{cp, boot},
			want:     map[string]string{cpFile: "old", bootFile: "old"},
			wantErr:  `defines the kind "TalosControlPlane", the table lists "TalosConfigTemplate"`,
		},
		{
			name:     "nothing is written when the mirror lacks a file",
			repo:     map[string]string{cpFile: "old"},
			mirror:   map[string]string{cpFile: cpCRD},
			projects: []crds.Project{cp, boot},
			want:     map[string]string{cpFile: "old"},
			wantErr:  "refresh talos-bootstrap: " + boot.Files[0],
		},
		{
			name:     "from git, the file at the pinned commit",
			projects: []crds.Project{bootAtPin},
			git:      map[string]string{boot.Name: upstream},
			want:     map[string]string{bootFile: bootCRD},
			wantOut:  "updated " + bootFile + "\n",
		},
		{
			name:     "from git, a commit the repository does not have is an error",
			repo:     map[string]string{bootFile: "old"},
			projects: []crds.Project{boot},
			git:      map[string]string{boot.Name: upstream},
			want:     map[string]string{bootFile: "old"},
			wantErr:  boot.Commit,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			repo, mirror := t.TempDir(), t.TempDir()
			writeTree(t, repo, tc.repo)
			writeTree(t, mirror, tc.mirror)
			src := mirrorSource(mirror)
			if tc.git != nil {
				src = gitSource(tc.git)
			}
			var out bytes.Buffer
			err := refresh(context.Background(), &out, repo, tc.projects, src)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "nothing written") {
					t.Errorf("err = %v, want one containing %q and saying nothing was written", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			}
			if out.String() != tc.wantOut {
				t.Errorf("reported\n%s\nwant\n%s", out.String(), tc.wantOut)
			}
			got := readTree(t, repo)
			if len(got) != len(tc.want) {
				t.Errorf("the folder holds %v, want %v", slices.Sorted(maps.Keys(got)), tc.want)
			}
			for name, text := range tc.want {
				if got[name] != text {
					t.Errorf("%s = %q, want %q", name, got[name], text)
				}
			}
		})
	}
}

func TestCarried(t *testing.T) {
	tests := []struct {
		name    string
		names   []string
		want    []string
		wantErr string
	}{
		{name: "none named means every project the repository carries", want: []string{"flux-helm", "argo-workflows", "testkube", "prometheus-operator", "talos-controlplane", "talos-bootstrap"}},
		{name: "the named ones, in table order", names: []string{"talos-bootstrap", "flux-helm"}, want: []string{"flux-helm", "talos-bootstrap"}},
		{name: "a project the proxy serves", names: []string{"keda"}, wantErr: "comes from the Go module proxy"},
		{name: "an unknown project", names: []string{"flux", "talos-bootstrap"}, wantErr: "unknown upstream project flux"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := carried(tc.names)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDispatchRefusesMixedModes(t *testing.T) {
	tests := []struct {
		name       string
		check      bool
		fromMirror string
		fromGit    map[string]string
		args       []string
		wantErr    string
	}{
		{name: "two sources", fromMirror: "m", fromGit: map[string]string{"testkube": "g"}, wantErr: "one source at a time"},
		{name: "check with a refresh", check: true, fromMirror: "m", wantErr: "-check"},
		{name: "git with project arguments", fromGit: map[string]string{"testkube": "g"}, args: []string{"testkube"}, wantErr: "unexpected arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := dispatch(context.Background(), &out, tc.check, tc.fromMirror, tc.fromGit, tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
