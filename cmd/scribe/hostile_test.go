package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// hostileCase is fixtures/hostile/<name>/case.yaml.
type hostileCase struct {
	// About says what the case proves (which item of the issue).
	About string `json:"about"`
	// Args are the CLI arguments; $CASE stands for the temporary copy of
	// the case directory.
	Args []string `json:"args"`
	// Exit is the expected exit code.
	Exit *int `json:"exit"`
	// Stderr are substrings that must all appear on stderr.
	Stderr []string `json:"stderr"`
	// Stdout are substrings that must all appear on stdout.
	Stdout []string `json:"stdout"`
	// StdoutAbsent are substrings that must not appear on stdout.
	StdoutAbsent []string `json:"stdoutAbsent"`
	// StderrAbsent are substrings that must not appear on stderr (a
	// credential the arguments carry, say).
	StderrAbsent []string `json:"stderrAbsent"`
	// Files are slash paths, relative to $CASE, that must exist afterwards;
	// Absent are those that must not.
	Files  []string `json:"files"`
	Absent []string `json:"absent"`
}

// TestHostileCorpus runs every fixtures/hostile/*/case.yaml through the
// real root command, each on a temporary copy of its directory, and checks
// the exit code, stderr and stdout it expects. A case that leaves the copy
// without one of its files (an -o that deleted inputs) fails too.
func TestHostileCorpus(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(fixtures, "hostile", "*", "case.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases under fixtures/hostile")
	}
	for _, file := range cases {
		src := filepath.Dir(file)
		t.Run(filepath.Base(src), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var c hostileCase
			if err := yaml.UnmarshalStrict(data, &c); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if c.About == "" || len(c.Args) == 0 || c.Exit == nil {
				t.Fatalf("%s: about, args and exit are required", file)
			}
			if *c.Exit != exitOK && len(c.Stderr) == 0 {
				t.Fatalf("%s: a failing case must name the stderr it expects", file)
			}
			dir := filepath.Join(t.TempDir(), "case")
			copyTree(t, src, dir)
			before := listTree(t, dir)
			args := make([]string, len(c.Args))
			for i, a := range c.Args {
				args[i] = strings.ReplaceAll(a, "$CASE", dir)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, &stdout, &stderr)
			if code != *c.Exit {
				t.Errorf("exit %d, want %d (%s)\nstdout:\n%s\nstderr:\n%s", code, *c.Exit, c.About, stdout.String(), stderr.String())
			}
			for _, s := range c.Stderr {
				if !strings.Contains(stderr.String(), strings.ReplaceAll(s, "$CASE", dir)) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
			for _, s := range c.Stdout {
				if !strings.Contains(stdout.String(), strings.ReplaceAll(s, "$CASE", dir)) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range c.StdoutAbsent {
				if strings.Contains(stdout.String(), s) {
					t.Errorf("stdout holds %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range c.StderrAbsent {
				if strings.Contains(stderr.String(), s) {
					t.Errorf("stderr holds %q:\n%s", s, stderr.String())
				}
			}
			after := listTree(t, dir)
			for _, p := range c.Files {
				if !after[p] {
					t.Errorf("%s is missing", p)
				}
			}
			for _, p := range c.Absent {
				if after[p] {
					t.Errorf("%s exists", p)
				}
			}
			for p := range before {
				if !after[p] {
					t.Errorf("%s was deleted", p)
				}
			}
		})
	}
}

// copyTree copies the regular files and directories under src to dst. A
// file named dot-git (a directory) is copied as .git, so a case can hold a
// checkout without the repository treating it as one.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = strings.ReplaceAll(filepath.ToSlash(rel), "dot-git", ".git")
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// listTree is the set of slash paths under root.
func listTree(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = true
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
