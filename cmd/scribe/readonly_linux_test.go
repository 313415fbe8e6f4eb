//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// makeReadOnly makes dir's entries impossible to remove for this process
// until the test ends: chmod 0555 for an ordinary user; for root, whom
// modes do not stop, a read-only bind mount of dir onto itself. The
// cleanup unmounts every mount below within (where a failing write may
// have moved it). The test is skipped where neither can be done.
func makeReadOnly(t *testing.T, within, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		return
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount %s: %v", dir, err)
	}
	t.Cleanup(func() {
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Errorf("read mounts: %v", err)
			return
		}
		for _, line := range strings.Split(string(data), "\n") {
			// mountinfo's fifth field is the mount point.
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], within+"/") {
				if err := unix.Unmount(f[4], unix.MNT_DETACH); err != nil {
					t.Errorf("unmount %s: %v", f[4], err)
				}
			}
		}
	})
	if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("remount %s read-only: %v", dir, err)
	}
}

// TestOutputDirThatCannotBeReplacedIsLeftAsItWas: -o onto a tree of
// Scribe's own that holds a read-only directory fails (exit 1, naming
// it) before anything is written: the old tree stays whole and nothing is
// left beside it (no new tree, no .old).
func TestOutputDirThatCannotBeReplacedIsLeftAsItWas(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	if code, _, stderr := scribe(t, "render", "-f", canary, "-o", out); code != exitOK {
		t.Fatalf("first render: exit %d: %s", code, stderr)
	}
	before := readTree(t, out)
	makeReadOnly(t, parent, filepath.Join(out, "shop", "workload", "checkout"))

	in := filepath.Join(t.TempDir(), "in.yaml")
	data, err := os.ReadFile(canary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, bytes.Replace(data, []byte("ghcr.io/"), []byte("registry.example.com/"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := scribe(t, "render", "-f", in, "-o", out)
	if code == exitOK || !strings.Contains(stderr, "cannot be replaced") || !strings.Contains(stderr, filepath.Join("shop", "workload", "checkout")) {
		t.Fatalf("render onto a read-only tree: exit %d, want a failure naming the directory:\n%s", code, stderr)
	}
	after := readTree(t, out)
	if len(after) != len(before) {
		t.Fatalf("the tree changed: %d files before, %d after", len(before), len(after))
	}
	for p, b := range before {
		if !bytes.Equal(after[p], b) {
			t.Errorf("%s changed", p)
		}
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "out" {
			t.Errorf("left beside the output: %s", e.Name())
		}
	}
}
