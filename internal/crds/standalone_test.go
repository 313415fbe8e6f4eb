package crds

import (
	"bytes"
	"errors"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// machinePaths returns the machine paths in a tracked file's text, one per
// finding, as "line N: text".
//
// A machine path starts at one of the top-level folders that exist only on
// some machine: a developer's home, root's home, a CI workspace or the
// temporary folder (see startsPath). Such a prefix counts when it starts a path, that
// is, when it is at the start of a line or follows whitespace, a quote, a
// backtick, '=', '(', '[', '{', ',' or ':'. That leaves out URLs
// (https://host/work/... follows a host name), relative and variable-rooted
// paths ($CACHE/work/..., ../tmp/...) and segments in the middle of a path.
//
// In Go files only comments and string literals are read, and inside a
// string literal only its start, the start of a line in it, or the position
// after '=' or ':' counts: a path quoted in the middle of a message is test
// data, such as another program's error text (Flux's "kustomization path
// not found: stat" of a folder in its own temporary directory), not a path
// this repository uses.
func machinePaths(name string, data []byte) []string {
	if strings.HasSuffix(name, ".go") {
		return goMachinePaths(name, data)
	}
	var found []string
	for i, line := range strings.Split(string(data), "\n") {
		if startsPath(line, "\t \"'`=([{,:") {
			found = append(found, "line "+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
		}
	}
	return found
}

func goMachinePaths(name string, data []byte) []string {
	fset := token.NewFileSet()
	file := fset.AddFile(name, -1, len(data))
	var s scanner.Scanner
	s.Init(file, data, nil, scanner.ScanComments)
	var found []string
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		var hit bool
		switch tok {
		case token.COMMENT:
			hit = startsPath(lit, "\t \"'`=([{,:")
		case token.STRING:
			value, err := strconv.Unquote(lit)
			if err != nil {
				value = lit
			}
			hit = startsPath(value, "=:")
		}
		if hit {
			found = append(found, "line "+strconv.Itoa(fset.Position(pos).Line)+": "+lit)
		}
	}
	return found
}

// startsPath reports whether a machine path prefix (home, root, work or tmp
// between slashes) in text is at the start of text or of a line in it, or
// right after one of the bytes in after.
func startsPath(text, after string) bool {
	for _, folder := range []string{"home", "root", "work", "tmp"} {
		prefix := "/" + folder + "/"
		for from := 0; ; {
			i := strings.Index(text[from:], prefix)
			if i < 0 {
				break
			}
			at := from + i
			if at == 0 || text[at-1] == '\n' || strings.IndexByte(after, text[at-1]) >= 0 {
				return true
			}
			from = at + 1
		}
	}
	return false
}

// checkedForMachinePaths reports whether a tracked file is one whose paths
// are paths on the machine that runs it: code, scripts, the Makefile, the
// CI entry point, documentation and configuration. The Dockerfile is left
// out: its paths are inside the image.
func checkedForMachinePaths(path string) bool {
	base := filepath.Base(path)
	switch {
	case base == "Makefile", strings.HasPrefix(path, ".ci/"):
		return true
	}
	switch filepath.Ext(path) {
	case ".go", ".sh", ".md", ".yaml", ".yml":
		return true
	}
	return false
}

// TestMachinePathRule proves the rule on small texts. In them ^ stands for
// the slash that starts a path, so that this file holds no machine path.
func TestMachinePathRule(t *testing.T) {
	tests := []struct {
		name string
		file string
		text string
		want bool
	}{
		{name: "a quoted absolute workspace path in Go", file: "a_test.go", text: "package a\nvar d = \"^work/shared/crds\"\n", want: true},
		{name: "a home folder after a flag's '=' in a Go string", file: "a.go", text: "package a\nvar f = \"--dir=^home/me/x\"\n", want: true},
		{name: "a machine path in a Go comment", file: "a.go", text: "package a\n// reads ^root/.cache/x\n", want: true},
		{name: "a temporary file as a shell word", file: "hack/x.sh", text: "out=^tmp/out.log\n", want: true},
		{name: "a workspace path in Markdown backticks", file: "README.md", text: "see `^work/shared/DESIGN.md`\n", want: true},
		{name: "a machine path at the start of a YAML value", file: "x.yaml", text: "path: ^home/ci/repo\n", want: true},
		{name: "a machine path in the CI entry point", file: ".ci/run", text: "cd ^work/main\n", want: true},
		{name: "a URL whose path has such a segment", file: "README.md", text: "https:^^example.com/work/tmp/x\n", want: false},
		{name: "a path below a variable", file: "hack/x.sh", text: "work=\"$CACHE/work/etcd\"\n", want: false},
		{name: "a relative path", file: "README.md", text: "../shared/crds and ./tmp/x\n", want: false},
		{name: "another program's message quoted in a Go test", file: "a_test.go", text: "package a\nconst m = \"kustomization path not found: stat ^tmp/kustomization-1/apps: no such file or directory\"\n", want: false},
		{name: "a division in Go code is not a path", file: "a.go", text: "package a\nvar x = a ^work^ b\n", want: false},
		{name: "a folder named like one, without its leading slash", file: "hack/x.sh", text: "mkdir -p work/tmp/\n", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.ReplaceAll(tc.text, "^", "/")
			got := machinePaths(tc.file, []byte(text))
			if (len(got) > 0) != tc.want {
				t.Errorf("machinePaths(%s, %q) = %q, want a finding: %v", tc.file, text, got, tc.want)
			}
		})
	}
}

// TestNoAbsoluteMachinePathInTrackedFiles keeps the repository standing on
// its own: no tracked code, script, document or configuration names a
// folder that exists only on some machine (see machinePaths for the rule).
// Data the tests need comes through the resolver of this package, tools and
// build outputs through ${XDG_CACHE_HOME:-~/.cache}/scribe, scratch space
// through t.TempDir or mktemp.
func TestNoAbsoluteMachinePathInTrackedFiles(t *testing.T) {
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not a git checkout")
	}
	dir := strings.TrimSpace(string(root))
	var stderr bytes.Buffer
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir, cmd.Stderr = dir, &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v: %s", err, stderr.String())
	}
	checked := 0
	for _, path := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if !checkedForMachinePaths(path) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, path))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, f := range machinePaths(path, data) {
			t.Errorf("%s %s: an absolute machine path; find the file through the repository, the CRD resolver, the cache or a temporary folder", path, f)
		}
	}
	if checked < 100 {
		t.Errorf("only %d tracked files checked; the listing looks wrong", checked)
	}
}
