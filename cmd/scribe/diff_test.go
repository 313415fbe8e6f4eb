package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
