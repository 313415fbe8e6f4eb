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
	code, _, stderr = scribe(t, "render", "-f", filepath.Join(fixtures, "valid"), "--applier", "ArgoCD")
	if code != exitError || !strings.Contains(stderr, "--repo-url is required") {
		t.Fatalf("ArgoCD without --repo-url: exit %d: %s", code, stderr)
	}
}
