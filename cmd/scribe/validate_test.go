package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const validateTestdata = "testdata/validate"

// scribeStdin runs the CLI with stdin as its standard input.
func scribeStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runIO(context.Background(), "scribe", args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// validLines are the custom resources validate reported valid, sorted.
func validLines(stdout string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if dir, _, ok := strings.Cut(l, ": valid ("); ok {
			out = append(out, dir)
		}
	}
	sort.Strings(out)
	return out
}

// allKindsWorkload is the Workload of the all-kinds input: the fixture,
// so that it follows the API.
var allKindsWorkload = filepath.Join(fixtures, "valid", "workload-canary-50.yaml")

// allKinds are the custom resources of testdata/validate/all-kinds and
// allKindsWorkload.
var allKinds = []string{
	"demo/experiment/gateway-tutorial",
	"demo/repository/default",
	"shop/pipeline/web",
	"shop/repository/default",
	"shop/repository/dev",
	"shop/repository/prod",
	"shop/workload/checkout",
}

// TestValidateAcceptsEveryKindAndSkipsHiddenFiles: a directory holding
// all four kinds validates, from a directory (whose hidden files and
// folders, which are no custom resources, are not read) and from stdin.
func TestValidateAcceptsEveryKindAndSkipsHiddenFiles(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, filepath.Join(validateTestdata, "all-kinds"), dir)
	copyTree(t, allKindsWorkload, filepath.Join(dir, "workload.yaml"))
	writeFile(t, filepath.Join(dir, ".golangci.yml"), "version: \"2\"\nlinters: {default: standard}\n")
	writeFile(t, filepath.Join(dir, ".github", "workflows", "ci.yaml"), "on: push\njobs: {}\n")
	writeFile(t, filepath.Join(dir, "team", ".draft.yaml"), "kind: Nonsense\n")
	var stream strings.Builder
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stream.WriteString("---\n")
		stream.Write(data)
	}
	tests := []struct {
		name  string
		stdin string
		args  []string
	}{
		{name: "a directory", args: []string{"validate", "-f", dir, "--strict-refs"}},
		{name: "a stream on stdin", stdin: stream.String(), args: []string{"validate", "-f", "-", "--strict-refs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := scribeStdin(t, tt.stdin, tt.args...)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, stdout, stderr)
			}
			if got := validLines(stdout); strings.Join(got, "\n") != strings.Join(allKinds, "\n") {
				t.Errorf("valid: %q, want %q", got, allKinds)
			}
		})
	}
}

// TestValidateRefusesBadPipelinesAndRepositoriesByField: Pipelines and
// Repositories are checked by the apiserver's validation of their CRD: the
// error names the field, the exit code is 2, from a file or from stdin.
func TestValidateRefusesBadPipelinesAndRepositoriesByField(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(validateTestdata, "invalid", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no invalid fixtures")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			code, _, stderr := scribe(t, "validate", "-f", file)
			if code != exitError {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitError, stderr)
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
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			code, _, stdinErr := scribeStdin(t, string(data), "validate", "-f", "-")
			if want := strings.ReplaceAll(got, filepath.Base(file), stdinName); code != exitError || stdinErr != want {
				t.Errorf("from stdin: exit %d, stderr:\n%s\nwant:\n%s", code, stdinErr, want)
			}
		})
	}
}

// TestValidateWarnsOfRepositoriesNotInTheInput: a reference to a
// Repository the input does not define is a warning, an error with
// --strict-refs.
func TestValidateWarnsOfRepositoriesNotInTheInput(t *testing.T) {
	dir := filepath.Join(validateTestdata, "all-kinds")
	workload := allKindsWorkload
	pipeline := filepath.Join(dir, "pipeline.yaml")
	repos := filepath.Join(dir, "repository.yaml")
	const missingDefault = `Workload shop/checkout: spec.repositoryRef: unset, so the Repository "default" of namespace shop is not defined in the input`
	const missingStage = `Pipeline shop/web: spec.stages[0].repositoryRef.name: Repository "dev" of namespace shop is not defined in the input`
	tests := []struct {
		name       string
		args       []string
		code       int
		wantStderr []string
		valid      int
	}{
		{name: "every Repository in the input", args: []string{"-f", workload, "-f", pipeline, "-f", repos}, code: exitOK, valid: 6},
		{name: "a Workload's default Repository missing is a warning", args: []string{"-f", workload}, code: exitOK,
			wantStderr: []string{"warning: " + missingDefault + "\n"}, valid: 1},
		{name: "a Pipeline stage's Repository missing is a warning", args: []string{"-f", pipeline}, code: exitOK,
			wantStderr: []string{"warning: " + missingStage + "\n", `stages[1].repositoryRef.name: Repository "prod"`}, valid: 1},
		{name: "with --strict-refs a missing Repository is an error", args: []string{"-f", workload, "-f", pipeline, "--strict-refs"}, code: exitError,
			wantStderr: []string{"Error: --strict-refs: references to Repositories not in the input:\n", "  " + missingDefault + "\n", "  " + missingStage + "\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := scribe(t, append([]string{"validate"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if len(tt.wantStderr) == 0 && stderr != "" {
				t.Errorf("stderr:\n%s\nwant none", stderr)
			}
			if got := len(validLines(stdout)); got != tt.valid {
				t.Errorf("%d valid, want %d:\n%s", got, tt.valid, stdout)
			}
		})
	}
}
