package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected error files of fixtures/invalid")

const fixtures = "../../fixtures"

func scribe(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestInvalidFixturesFailWithTheirFieldErrorsAndWriteNothing(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "invalid", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no invalid fixtures")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			code, _, stderr := scribe(t, "render", "-f", file, "-o", out)
			if code != exitError {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitError, stderr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("output directory %s exists after a failed render", out)
			}
			siblings, _ := os.ReadDir(filepath.Dir(out))
			if len(siblings) != 0 {
				t.Fatalf("temporary files left next to the output: %v", siblings)
			}
			got := strings.ReplaceAll(stderr, file, filepath.Base(file))
			expectFile := strings.TrimSuffix(file, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(expectFile, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(expectFile)
			if err != nil {
				t.Fatalf("read expected error: %v", err)
			}
			if got != string(want) {
				t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestRenderWritesTheGoldenTreeAndDiffReportsChanges(t *testing.T) {
	file := filepath.Join(fixtures, "valid", "workload-canary-50.yaml")
	out := filepath.Join(t.TempDir(), "repo")
	if code, _, stderr := scribe(t, "render", "-f", file, "-o", out); code != exitOK {
		t.Fatalf("render: exit %d: %s", code, stderr)
	}
	golden := filepath.Join(fixtures, "golden", "workload-canary-50")
	for _, rel := range []string{"shop/workload/checkout/httproute-checkout.yaml", "shop/workload/checkout.sync.yaml", "shop/workload/checkout/.scribe.json"} {
		got, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(golden, rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the CLI's tree differs from the golden tree", rel)
		}
	}

	if code, stdout, stderr := scribe(t, "diff", "-f", file, "-d", out); code != exitOK {
		t.Fatalf("diff of an unchanged tree: exit %d\n%s%s", code, stdout, stderr)
	}
	route := filepath.Join(out, "shop/workload/checkout/httproute-checkout.yaml")
	data, _ := os.ReadFile(route)
	if err := os.WriteFile(route, bytes.Replace(data, []byte("weight: 50"), []byte("weight: 40"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := scribe(t, "diff", "-f", file, "-d", out)
	if code != exitChanges || !strings.Contains(stdout, "-      weight: 40") || !strings.Contains(stdout, "+      weight: 50") {
		t.Fatalf("diff of a changed tree: exit %d, want %d, output:\n%s", code, exitChanges, stdout)
	}
	if code, _, _ := scribe(t, "diff", "-f", file, "-d", filepath.Join(out, "missing")); code != exitError {
		t.Fatalf("diff against a missing directory: exit %d, want %d", code, exitError)
	}
}

func TestRenderToStdoutIsAYAMLStreamOfObjects(t *testing.T) {
	code, stdout, stderr := scribe(t, "render", "-f", filepath.Join(fixtures, "valid", "workload-keda.yaml"))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stdout, "kind: Kustomization\nresources:") || !strings.Contains(stdout, "kind: ScaledObject") {
		t.Fatalf("unexpected stream:\n%s", stdout)
	}
	if n := strings.Count(stdout, "\n---\n"); n != 7 {
		t.Fatalf("want 8 documents (7 objects + the Flux Kustomization), got %d separators", n)
	}
}

func TestValidateReportsEveryFileAndArgoCDNeedsARepoURL(t *testing.T) {
	code, stdout, stderr := scribe(t, "validate", "-f", filepath.Join(fixtures, "valid"))
	if code != exitOK || strings.Count(stdout, ": valid (") != 7 {
		t.Fatalf("validate: exit %d\n%s%s", code, stdout, stderr)
	}
	// The demo's CRs (make demo applies them) are valid offline too.
	// (Each on its own: workload-v2.yaml is the next version of workload.yaml.)
	// The Experiment is checked against the loop's catalog, as make demo
	// publishes it (Scribe's catalog/ with the team's entries and apps of
	// test/e2e/testdata/catalog), its app target's address given.
	loop := loopCatalog(t)
	for f, flags := range map[string][]string{
		"workload.yaml": nil, "workload-v2.yaml": nil,
		"experiment.yaml": {"--catalog", loop, "--catalog-source-dir", loop, "--allowed-namespace", "edge", "--target-address", "app=10.213.10.1"},
	} {
		code, stdout, stderr = scribe(t, append([]string{"validate", "-f", filepath.Join(fixtures, "demo", f)}, flags...)...)
		if code != exitOK || strings.Count(stdout, ": valid (") != 1 {
			t.Fatalf("validate fixtures/demo/%s: exit %d\n%s%s", f, code, stdout, stderr)
		}
	}
	code, _, stderr = scribe(t, "render", "-f", filepath.Join(fixtures, "valid"), "--applier", "ArgoCD")
	if code != exitError || !strings.Contains(stderr, "--repo-url is required") {
		t.Fatalf("ArgoCD without --repo-url: exit %d: %s", code, stderr)
	}
	// To stdout, each sync file's AppProject and Application are their own
	// documents under the file's Source header.
	code, stdout, stderr = scribe(t, "render", "-f", filepath.Join(fixtures, "valid", "workload-canary-50.yaml"), "--applier", "ArgoCD", "--repo-url", "https://git.example/acme.git")
	for _, want := range []string{"# Source: shop/workload/checkout.sync.yaml\napiVersion: argoproj.io/v1alpha1\nkind: AppProject\n",
		"# Source: shop/workload/checkout.sync.yaml\napiVersion: argoproj.io/v1alpha1\nkind: Application\n"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Fatalf("render --applier ArgoCD to stdout: exit %d, want %q in:\n%s%s", code, want, stdout, stderr)
		}
	}
}

// TestRenderWithUserCatalog: --catalog adds entries and overrides built-in
// ones; a catalog whose entry breaks the entry schema is bad input (exit 2)
// and the error names the user's file, not the engine's copy of it.
func TestRenderWithUserCatalog(t *testing.T) {
	experiment := filepath.Join(t.TempDir(), "exp.yaml")
	if err := os.WriteFile(experiment, []byte(`apiVersion: scribe.dev/v1alpha1
kind: Experiment
metadata: {name: tutorial, namespace: lab}
spec:
  targets:
  - name: app
    cluster: {type: hub}
    components: [{app: demo-services}, {app: team-cache}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		catalog string
		code    int
		want    []string // in stdout for exit 0, in stderr otherwise
		notWant string
	}{
		{
			name: "entries are added and override the built-in ones",
			catalog: `package catalog

entries: {
	"demo-services": {kind: "app", override: true, source: {type: "git", url: "https://git.example.com/platform/catalog", ref: tag: "v2.0.0", path: "./apps/demo"}, #Params: {}}
	"team-cache": {kind: "app", source: {type: "oci", url: "oci://registry.example.com/team/cache", tag: "1.2.3"}, #Params: {}}
}
`,
			code: exitOK,
			want: []string{"url: https://git.example.com/platform/catalog", "url: oci://registry.example.com/team/cache", "targetNamespace: lab"},
		},
		{
			name: "an entry replacing a built-in one without override: true names the entry and its file",
			catalog: `package catalog

entries: "demo-services": {kind: "app", source: {type: "git", url: "https://git.example.com/platform/catalog", ref: tag: "v2.0.0", path: "./apps/demo"}, #Params: {}}
`,
			code: exitError,
			want: []string{`entry "demo-services"`, "entries.cue", "override: true"},
		},
		{
			name: "an entry installing into a namespace nothing allows is refused",
			catalog: `package catalog

entries: "team-cache": {kind: "app", namespace: "kube-system", source: {type: "oci", url: "oci://registry.example.com/team/cache", tag: "1.2.3"}, #Params: {}}
`,
			code: exitError,
			want: []string{"spec.targets[0].components[1].app", `namespace "kube-system"`, "spec.allowedNamespaces"},
		},
		{
			name: "an entry breaking the entry schema names the user's file",
			catalog: `package catalog

entries: "team-cache": {kind: "app", source: {type: "ftp", url: "ftp://x"}, #Params: {}}
`,
			code:    exitError,
			want:    []string{`entry "team-cache"`, "entries.cue:3:"},
			notWant: "usercatalog",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "entries.cue"), []byte(tt.catalog), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := scribe(t, "render", "-f", experiment, "--catalog", dir)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			out := stdout
			if code != exitOK {
				out = stderr
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if tt.notWant != "" && strings.Contains(out, tt.notWant) {
				t.Errorf("output names %q:\n%s", tt.notWant, out)
			}
			if code != exitOK && !strings.Contains(stderr, dir) {
				t.Errorf("error does not name the catalog directory %s:\n%s", dir, stderr)
			}
		})
	}
}

// loopCatalog is the end-to-end loop's catalog repository as a folder:
// Scribe's catalog/ with test/e2e/testdata/catalog over it (its entries.cue
// in place of the shipped one, its apps beside the built-in ones).
func loopCatalog(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../catalog")); err != nil {
		t.Fatal(err)
	}
	team := "../../test/e2e/testdata/catalog"
	if err := os.Remove(filepath.Join(dir, "entries.cue")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(team)); err != nil {
		t.Fatal(err)
	}
	return dir
}
