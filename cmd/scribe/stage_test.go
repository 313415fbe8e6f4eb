package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderStageShowsEachExperimentCommitOffline: `scribe render --stage
// N` prints the tree of an Experiment's commit stage N: no Workflow before
// stage 4, no workflow template delivery before stage 3; without --stage
// the final tree; a stage that does not exist is an error naming it.
func TestRenderStageShowsEachExperimentCommitOffline(t *testing.T) {
	file := filepath.Join(fixtures, "valid", "gateway-tutorial.yaml")
	for _, tc := range []struct {
		stage        string
		workflow     bool
		templates    bool
		components   bool
		wantExitCode int
	}{
		{stage: "1"},
		{stage: "2", components: true},
		{stage: "3", components: true, templates: true},
		{stage: "4", components: true, templates: true, workflow: true},
		{stage: "", components: true, templates: true, workflow: true},
	} {
		args := []string{"render", "-f", file}
		if tc.stage != "" {
			args = append(args, "--stage", tc.stage)
		}
		code, stdout, stderr := scribe(t, args...)
		if code != exitOK {
			t.Fatalf("--stage %q: exit %d: %s", tc.stage, code, stderr)
		}
		for what, want := range map[string]bool{
			"kind: Workflow\n": tc.workflow,
			"name: gateway-tutorial-gateway-validation\n": tc.templates,
			"name: gateway-tutorial-app-demo-services\n":  tc.components,
			"kind: Cluster\n": true,
		} {
			if got := strings.Contains(stdout, what); got != want {
				t.Errorf("--stage %q: output has %q: %v, want %v", tc.stage, strings.TrimSpace(what), got, want)
			}
		}
	}
	code, _, stderr := scribe(t, "render", "-f", file, "--stage", "5")
	if code == exitOK || !strings.Contains(stderr, "stage") {
		t.Fatalf("--stage 5: exit %d: %s", code, stderr)
	}
}
