package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/termtext"
)

// TestDiffReportsCustomResourcesRemovedFromTheInput: a tree in the
// checkout whose custom resource is not in -f would be deleted: diff says
// so and exits 1, or 0 with --allow-removals; the stage Workloads of a
// Pipeline in -f are its own.
func TestDiffReportsCustomResourcesRemovedFromTheInput(t *testing.T) {
	checkout := filepath.Join(fixtures, "valid", "workload-canary-50.yaml")
	worker := filepath.Join(fixtures, "valid", "workload-keda.yaml")
	pipeline := filepath.Join(validateTestdata, "all-kinds", "pipeline.yaml")
	data, err := os.ReadFile(checkout)
	if err != nil {
		t.Fatal(err)
	}
	// The Workload the Pipeline shop/web runs in its stage dev.
	stage := filepath.Join(t.TempDir(), "web-dev.yaml")
	writeFile(t, stage, strings.Replace(string(data), "name: checkout\n", "name: web-dev\n", 1))

	// The Pipeline shop/order, whose stage worker's Workload is
	// order-worker: the name of the Workload removed from -f.
	pipelineData, err := os.ReadFile(pipeline)
	if err != nil {
		t.Fatal(err)
	}
	collider := filepath.Join(t.TempDir(), "order.yaml")
	writeFile(t, collider, strings.NewReplacer("name: web,", "name: order,", "{name: dev, ", "{name: worker, ").Replace(string(pipelineData)))
	if !strings.Contains(readString(t, collider), "name: worker,") {
		t.Fatalf("%s: the stage was not renamed:\n%s", collider, readString(t, collider))
	}

	base := t.TempDir()
	const removed = "removed: Workload shop/order-worker is not in --file: shop/workload/order-worker/ and shop/workload/order-worker.sync.yaml would be deleted ("
	tests := []struct {
		name    string
		path    string // --path; the tree is published under it
		args    []string
		code    int
		want    string
		notWant string
		// withStage keeps the tree of the Pipeline's stage Workload.
		withStage bool
	}{
		{name: "every custom resource in the input", args: []string{"-f", checkout, "-f", worker}, code: exitOK, notWant: "removed:"},
		{name: "a removed custom resource fails", args: []string{"-f", checkout}, code: exitChanges, want: removed, notWant: "allowed"},
		{name: "a removed custom resource is reported but allowed", args: []string{"-f", checkout, "--allow-removals"}, code: exitOK, want: removed},
		{name: "under --path", path: "clusters/dev", args: []string{"-f", checkout}, code: exitChanges, want: removed},
		{name: "a Pipeline's stage Workload is not removed", args: []string{"-f", checkout, "-f", worker, "-f", pipeline}, code: exitOK, notWant: "removed:", withStage: true},
		// A tree is known by its name only: the stage's Workload and a
		// Workload of that name removed from -f look alike, so the tree
		// is reported, never silently kept (before, exit 0 and nothing).
		{name: "a Pipeline whose stage Workload is named like a removed Workload still reports it", args: []string{"-f", checkout, "-f", collider}, code: exitOK,
			want: "stage: Workload shop/order-worker is not in --file: shop/workload/order-worker/ is kept as the Workload of Pipeline shop/order's stage worker (10 files); were it another Workload, removed from --file, its tree would be deleted and the stage's written in its place", notWant: "removed:"},
		{name: "a Pipeline's stage Workload is reported as the stage's", args: []string{"-f", checkout, "-f", worker, "-f", pipeline}, code: exitOK,
			want: "stage: Workload shop/web-dev is not in --file: shop/workload/web-dev/ is kept as the Workload of Pipeline shop/web's stage dev", withStage: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(base, string(rune('a'+i)))
			path := tt.path
			if path == "" {
				path = "."
			}
			if code, _, stderr := scribe(t, "publish", "-f", checkout, "-f", worker, "-f", stage, "-o", out, "--path", path); code != exitOK {
				t.Fatalf("publish: exit %d: %s", code, stderr)
			}
			// A checkout's .git is not read for trees.
			writeFile(t, filepath.Join(out, ".git", "shop", "workload", "old", provenanceFile), `{"kind": "Provenance"}`)
			if !tt.withStage {
				// Without the Pipeline, its stage's tree would be a removal too.
				if err := os.RemoveAll(filepath.Join(out, path, "shop", "workload", "web-dev")); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"diff", "-d", out, "--path", path}, tt.args...)
			code, stdout, stderr := scribe(t, args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			if tt.want != "" && !strings.Contains(stdout, tt.want) {
				t.Errorf("stdout lacks %q:\n%s", tt.want, stdout)
			}
			if tt.notWant != "" && strings.Contains(stdout, tt.notWant) {
				t.Errorf("stdout has %q:\n%s", tt.notWant, stdout)
			}
		})
	}
}

func readString(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestDiffOutputStartsNoWorkflowCommand: text from the input and the
// checkout reaches a CI log without starting a workflow command or
// carrying a control character: a ConfigMap value with "::error::" on a
// line of its own, shown as a diff context line (a space, then YAML's
// indentation, which GitHub Actions trims), "##[" anywhere, and a removed
// tree's name read from its .scribe.json holding a newline and an escape
// sequence.
func TestDiffOutputStartsNoWorkflowCommand(t *testing.T) {
	dir := filepath.Join("testdata", "diff", "workflow-commands")
	code, stdout, stderr := scribe(t, "diff", "-f", filepath.Join(dir, "input.yaml"), "-d", filepath.Join(dir, "checkout"))
	if code != exitChanges {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitChanges, stdout, stderr)
	}
	for _, want := range []string{
		"     \\x3a:error::pwned",
		"##\\x5bset-output name=ok;]yes",
		"+    third",
		"removed: Workload shop/gone\\n::set-output name=ok::yes\\x1b[2J is not in --file",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for i, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "::") || strings.Contains(line, "##[") {
			t.Errorf("line %d reads as a workflow command: %q", i+1, line)
		}
		if strings.ContainsFunc(line, termtext.Unsafe) {
			t.Errorf("line %d holds a control character: %q", i+1, line)
		}
	}
}
