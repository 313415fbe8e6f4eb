package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
	"github.com/scribe-gitops/scribe/render"
)

// envRunMain makes the test binary run the CLI's main instead of the tests,
// so a test can run the real process (signals, exit codes) without a build.
const envRunMain = "SCRIBE_TEST_RUN_MAIN"

// TestStdoutStreamCannotBeBrokenOutOf: whatever a bundle path holds (line
// breaks of every kind YAML knows, a document marker, control bytes), the
// `# Source:` header stays one comment line and the stream holds exactly
// one document per manifest; a file that is not exactly one YAML object is
// refused rather than copied.
func TestStdoutStreamCannotBeBrokenOutOf(t *testing.T) {
	crb := "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: pwned}\n"
	data := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: ns\n")
	for _, tc := range []struct {
		name string
		path string
		data []byte
		err  string
	}{
		{name: "plain path is written as it is", path: "ns/workload/x/configmap-x.yaml", data: data},
		{name: "newline and a document marker", path: "ns/workload/x" + crb + "/configmap-x.yaml", data: data},
		{name: "carriage return", path: "ns/workload/x\r---\rkind: ClusterRoleBinding/c.yaml", data: data},
		{name: "unicode line separators", path: "ns/workload/x\u2028---\u2029kind: ClusterRoleBinding\u0085/c.yaml", data: data},
		{name: "control bytes and invalid UTF-8", path: "ns/workload/x\x00\x1b[2J\xff/c.yaml", data: data},
		{name: "a file of two documents is refused", path: "ns/workload/x/c.yaml", data: append(append([]byte{}, data...), []byte(crb)...), err: "more than one YAML document"},
		{name: "a file that is not an object is refused", path: "ns/workload/x/c.yaml", data: []byte("- a\n"), err: "not one YAML object"},
		{name: "a sync file of two objects is written as two documents", path: "ns/workload/x.sync.yaml", data: append(append([]byte{}, data...), []byte("---\n"+string(data))...)},
		{name: "a sync file's documents must be objects", path: "ns/workload/x.sync.yaml", data: append(append([]byte{}, data...), []byte("---\n- a\n")...), err: "not one YAML object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &render.Bundle{Dir: "ns/workload/x", Files: []render.File{{Path: tc.path, Data: tc.data}, {Path: "ns/workload/y/c.yaml", Data: data}}}
			var out bytes.Buffer
			err := writeStream(context.Background(), &out, []*render.Bundle{b})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			text := out.String()
			dec := yaml.NewDecoder(strings.NewReader(text))
			var kinds []string
			for {
				var doc map[string]any
				err := dec.Decode(&doc)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("the stream is not YAML: %v\n%s", err, text)
				}
				kinds = append(kinds, doc["kind"].(string))
			}
			want := "ConfigMap,ConfigMap"
			if strings.HasSuffix(tc.path, ".sync.yaml") {
				want = "ConfigMap,ConfigMap,ConfigMap"
			}
			if strings.Join(kinds, ",") != want {
				t.Fatalf("documents %v, want %s:\n%s", kinds, want, text)
			}
			for _, line := range strings.Split(text, "\n") {
				if strings.Contains(line, "ClusterRoleBinding") && !strings.HasPrefix(line, "# Source: ") {
					t.Fatalf("the path left its comment: line %q", line)
				}
			}
			if tc.path == "ns/workload/x/configmap-x.yaml" && !strings.HasPrefix(text, "# Source: ns/workload/x/configmap-x.yaml\napiVersion: v1\n") {
				t.Fatalf("a plain path is not written as it is:\n%s", text)
			}
		})
	}
}

// TestInputsMustBeRegularFiles: a FIFO (with no writer), a device, a
// socket, symbolic links to them, and a file over the size cap are refused
// with exit 2 naming the file, without blocking.
func TestInputsMustBeRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.yaml")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	linkToFifo := filepath.Join(dir, "link-fifo.yaml")
	linkToZero := filepath.Join(dir, "zero.yaml")
	for old, link := range map[string]string{fifo: linkToFifo, "/dev/zero": linkToZero} {
		if err := os.Symlink(old, link); err != nil {
			t.Fatal(err)
		}
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxInputSize + 1); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	// A directory walk meets the FIFO too.
	walked := filepath.Join(t.TempDir(), "crs")
	if err := os.MkdirAll(walked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(walked, "a.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, want string
	}{
		{"a FIFO without a writer", fifo, "not a regular file (a named pipe)"},
		{"a symbolic link to a FIFO", linkToFifo, "not a regular file (a named pipe)"},
		{"a symbolic link to /dev/zero", linkToZero, "not a regular file (a character device)"},
		{"/dev/zero itself", "/dev/zero", "not a regular file (a character device)"},
		{"a socket", sock, "not a regular file (a socket)"},
		{"a FIFO found in a directory", walked, "a.yaml: not a regular file (a named pipe)"},
		{"a file over the cap", big, "larger than 16 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				code   int
				stderr string
			}
			done := make(chan result, 1)
			go func() {
				code, _, stderr := scribe(t, "render", "-f", tc.file)
				done <- result{code, stderr}
			}()
			select {
			case r := <-done:
				if r.code != exitError || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, filepath.Base(tc.file)) {
					t.Fatalf("exit %d, want %d with %q naming %s:\n%s", r.code, exitError, tc.want, tc.file, r.stderr)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("render -f %s blocked", tc.file)
			}
		})
	}
}

// TestOutputDirOwnership: -o accepts a new directory, an empty one and one
// Scribe wrote (its .scribe-output marker lists every file); it refuses one
// that gained a foreign file, a symbolic link, and keeps everything when it
// refuses.
func TestOutputDirOwnership(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	if code, _, stderr := scribe(t, "render", "-f", canary, "-o", out); code != exitOK {
		t.Fatalf("new directory: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, publish.OutputMarker)); err != nil {
		t.Fatalf("no marker: %v", err)
	}
	if code, _, stderr := scribe(t, "render", "-f", canary, "-o", out); code != exitOK {
		t.Fatalf("Scribe's own directory: exit %d: %s", code, stderr)
	}
	notes := filepath.Join(out, "shop", "NOTES.md")
	if err := os.WriteFile(notes, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := scribe(t, "publish", "-f", canary, "-o", out)
	if code != exitError || !strings.Contains(stderr, "refusing to write to "+out) || !strings.Contains(stderr, "shop/NOTES.md") {
		t.Fatalf("directory with a foreign file: exit %d: %s", code, stderr)
	}
	if data, err := os.ReadFile(notes); err != nil || string(data) != "mine\n" {
		t.Fatalf("the foreign file was touched: %q %v", data, err)
	}
	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := scribe(t, "render", "-f", canary, "-o", empty); code != exitOK {
		t.Fatalf("empty directory: exit %d: %s", code, stderr)
	}
	link := filepath.Join(parent, "link")
	if err := os.Symlink(empty, link); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := scribe(t, "render", "-f", canary, "-o", link); code != exitError || !strings.Contains(stderr, "symbolic link") {
		t.Fatalf("symbolic link: exit %d: %s", code, stderr)
	}
	// An input reached through a symbolic link is still an input.
	crs := filepath.Join(parent, "crs")
	if err := os.Mkdir(crs, 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(canary)
	if err := os.WriteFile(filepath.Join(crs, "w.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(crs, filepath.Join(parent, "crs-link")); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := scribe(t, "publish", "-f", filepath.Join(parent, "crs-link", "w.yaml"), "-o", filepath.Join(parent, "."), "--path", "crs"); code != exitError || !strings.Contains(stderr, "refusing to write to "+crs) {
		t.Fatalf("-o holding an input: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(crs, "w.yaml")); err != nil {
		t.Fatalf("the input is gone: %v", err)
	}
}

// TestDiffDoesNotFollowSymlinksOutOfDir: a symbolic link in the checkout
// (a file or a directory of the owned paths) that leads outside -d is an
// error, and its target is never printed.
func TestDiffDoesNotFollowSymlinksOutOfDir(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(outside, []byte("token: TOPSECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		link string // created in the checkout, pointing at the secret (or its directory)
		dir  bool
	}{
		{name: "a file", link: "shop/workload/checkout/httproute-checkout.yaml"},
		{name: "the sync file", link: "shop/workload/checkout.sync.yaml"},
		{name: "the owned directory", link: "shop/workload/checkout", dir: true},
		{name: "a parent directory", link: "shop", dir: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkout := filepath.Join(t.TempDir(), "checkout")
			if code, _, stderr := scribe(t, "render", "-f", canary, "-o", checkout); code != exitOK {
				t.Fatalf("render: %s", stderr)
			}
			p := filepath.Join(checkout, filepath.FromSlash(tc.link))
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			target := outside
			if tc.dir {
				target = filepath.Dir(outside)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := scribe(t, "diff", "-f", canary, "-d", checkout)
			if code != exitError || strings.Contains(stdout, "TOPSECRET") {
				t.Fatalf("exit %d, want %d, and the secret must not be printed\nstdout:\n%s\nstderr:\n%s", code, exitError, stdout, stderr)
			}
		})
	}
}

// TestBranchRefsHeadsIsNormalised: --branch refs/heads/x publishes to
// branch x, not refs/heads/refs/heads/x.
func TestBranchRefsHeadsIsNormalised(t *testing.T) {
	clearGitEnv(t)
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	code, stdout, stderr := scribe(t, "publish", "-f", canary, "--git", url, "--branch", "refs/heads/feature", "--cache-dir", t.TempDir())
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	refs := publishtest.Git(t, "", "--git-dir", srv.BareDir("exp"), "for-each-ref", "--format=%(refname)")
	if !strings.Contains(refs, "refs/heads/feature\n") && !strings.HasSuffix(refs, "refs/heads/feature") || strings.Contains(refs, "refs/heads/refs/") {
		t.Fatalf("refs after publishing to refs/heads/feature:\n%s", refs)
	}
	for _, bad := range []string{"refs/tags/v1", "a b", "x.lock", "-x", "@", "a/.b", "HEAD"} {
		code, _, stderr := scribe(t, "publish", "-f", canary, "--git", url, "--branch", bad, "--cache-dir", t.TempDir())
		if code != exitError || !strings.Contains(stderr, "--branch") {
			t.Errorf("--branch %q: exit %d: %s", bad, code, stderr)
		}
	}
}

// TestCollisionsIgnoreTheVersionOfAnAPIGroup: the apiserver stores one
// object per group, kind, namespace and name, whatever the version.
func TestCollisionsIgnoreTheVersionOfAnAPIGroup(t *testing.T) {
	src := func(n string) scribev1.ObjectIdentity {
		return scribev1.ObjectIdentity{APIVersion: "scribe.dev/v1alpha1", Kind: "Workload", Namespace: "ns", Name: n}
	}
	obj := func(apiVersion, kind, name string) scribev1.ObjectIdentity {
		return scribev1.ObjectIdentity{APIVersion: apiVersion, Kind: kind, Namespace: "ns", Name: name}
	}
	a := &render.Bundle{Source: src("a"), Objects: []scribev1.ObjectIdentity{obj("autoscaling/v2", "HorizontalPodAutoscaler", "x"), obj("v1", "Service", "a")}}
	b := &render.Bundle{Source: src("b"), Objects: []scribev1.ObjectIdentity{obj("autoscaling/v1", "HorizontalPodAutoscaler", "x"), obj("v1", "Service", "b"), obj("other.dev/v1", "Service", "a")}}
	got := collisions([]*render.Bundle{a, b})
	if len(got) != 1 || !strings.Contains(got[0], "HorizontalPodAutoscaler ns/x") || !strings.Contains(got[0], "Workload ns/a") || !strings.Contains(got[0], "Workload ns/b") {
		t.Fatalf("collisions = %q", got)
	}
}

// TestSignalStopsARenderQuickly runs the CLI as a process, sends SIGINT or
// SIGTERM during a render of 1000 Workloads to -o, and checks it exits
// within a bound (not a benchmark) with 130 or 143, leaving no output
// directory and no temporary directory behind.
func TestSignalStopsARenderQuickly(t *testing.T) {
	in := t.TempDir()
	writeWorkloads(t, in, 1000)
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{
		{syscall.SIGINT, 130},
		{syscall.SIGTERM, 143},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			cmd := exec.Command(os.Args[0], "render", "-f", in, "-o", out)
			cmd.Env = append(os.Environ(), envRunMain+"=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				t.Fatalf("the render of 1000 Workloads ended before the signal: %v\n%s", err, stderr.String())
			case <-time.After(time.Second):
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			select {
			case err := <-exited:
				t.Logf("wait: %v", err) // the exit code is checked below
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				err := <-exited
				t.Fatalf("still running 5 s after %s (killed: %v)", tc.sig, err)
			}
			t.Logf("exited %s after %s", time.Since(sent).Round(time.Millisecond), tc.sig)
			if got := cmd.ProcessState.ExitCode(); got != tc.code {
				t.Fatalf("exit %d, want %d\n%s", got, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "interrupted by") {
				t.Errorf("stderr does not say why it stopped:\n%s", stderr.String())
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Fatalf("left behind in %s: %v", parent, entries)
			}
		})
	}
}
