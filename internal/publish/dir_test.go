package publish_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
	"github.com/scribe-gitops/scribe/render"
)

func TestWriteDirReplacesTheDirectoryAtomically(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "repo")
	first := &render.Bundle{Files: []render.File{{Path: "ns/workload/a/x.yaml", Data: []byte("a: 1\n")}, {Path: "stale.yaml", Data: []byte("old\n")}}}
	if err := publish.WriteDir(out, []*render.Bundle{first}); err != nil {
		t.Fatal(err)
	}
	second := &render.Bundle{Files: []render.File{{Path: "ns/workload/a/x.yaml", Data: []byte("a: 2\n")}}}
	if err := publish.WriteDir(out, []*render.Bundle{second}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(out, "ns/workload/a/x.yaml")); err != nil || string(data) != "a: 2\n" {
		t.Fatalf("x.yaml = %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(out, "stale.yaml")); !os.IsNotExist(err) {
		t.Fatal("a file of the previous tree survived")
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Fatalf("temporary directories left behind: %v", entries)
	}
}

func TestWriteDirRefusesPathsOutsideAndLeavesTheOldTree(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "repo")
	good := &render.Bundle{Files: []render.File{{Path: "keep.yaml", Data: []byte("k: v\n")}}}
	if err := publish.WriteDir(out, []*render.Bundle{good}); err != nil {
		t.Fatal(err)
	}
	bad := &render.Bundle{Files: []render.File{{Path: "ok.yaml", Data: []byte("x\n")}, {Path: "../escape.yaml", Data: []byte("x\n")}}}
	if err := publish.WriteDir(out, []*render.Bundle{bad}); err == nil {
		t.Fatal("a path escaping the output directory was accepted")
	}
	if data, err := os.ReadFile(filepath.Join(out, "keep.yaml")); err != nil || string(data) != "k: v\n" {
		t.Fatalf("the previous tree was changed: %q, %v", data, err)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Fatalf("temporary directories left behind: %v", entries)
	}
}

func TestDirSinkReplacesOnlyOwnedPaths(t *testing.T) {
	root := t.TempDir()
	d := publish.Dir{Root: root, Path: "deploy"}
	foreign := filepath.Join(root, "deploy/ns/workload/NOTES.md")
	if err := os.MkdirAll(filepath.Dir(foreign), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(foreign, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, b := testBundle("ns", "a", "one"), testBundle("ns", "b", "one")
	res, err := d.Publish(ctx, publish.ChangeFor(a), publish.ChangeFor(b))
	if err != nil || !res.Changed {
		t.Fatalf("first publish = %+v, %v", res, err)
	}
	// Same content: unchanged, same revision.
	again, err := d.Publish(ctx, publish.ChangeFor(a), publish.ChangeFor(b))
	if err != nil || again.Changed || again.Revision != res.Revision {
		t.Fatalf("second publish = %+v, %v", again, err)
	}
	// A smaller render of a: its stale file goes, b and the foreign file stay.
	a2 := testBundle("ns", "a", "two")
	a2.Files = a2.Files[1:]
	if _, err := d.Publish(ctx, publish.ChangeFor(a2)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy/ns/workload/a/.scribe.json")); !os.IsNotExist(err) {
		t.Error("stale file survived")
	}
	for _, p := range []string{"deploy/ns/workload/b/kustomization.yaml", "deploy/ns/workload/b.sync.yaml", "deploy/ns/workload/NOTES.md"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := d.Publish(ctx, publish.DeleteFor(a.Source, 2)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"deploy/ns/workload/a", "deploy/ns/workload/a.sync.yaml"} {
		if _, err := os.Stat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("%s survived the delete", p)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(root, "deploy/ns/workload"))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary leftover %s", e.Name())
		}
	}
}

// TestCheckOutputDir: WriteOutputDir replaces a directory only when it is
// new, empty, or holds nothing but Scribe's marker and the files it lists;
// everything else is a NotOwnedError naming the directory, and is left as
// it was.
func TestCheckOutputDir(t *testing.T) {
	bundle := &render.Bundle{Files: []render.File{{Path: "ns/workload/a/x.yaml", Data: []byte("a: 1\n")}}}
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, dir string)
		reason string // empty: accepted
	}{
		{name: "a new directory", setup: func(*testing.T, string) {}},
		{name: "an empty directory", setup: func(t *testing.T, dir string) { mkdir(t, dir) }},
		{name: "a directory Scribe wrote", setup: func(t *testing.T, dir string) {
			if err := publish.WriteOutputDir(context.Background(), dir, []*render.Bundle{bundle}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a directory Scribe wrote, plus a foreign file", reason: "it holds ns/NOTES.md, which Scribe did not write", setup: func(t *testing.T, dir string) {
			if err := publish.WriteOutputDir(context.Background(), dir, []*render.Bundle{bundle}); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "ns", "NOTES.md"))
		}},
		{name: "a checkout", reason: "it holds .git", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, ".git"))
			write(t, filepath.Join(dir, publish.OutputMarker))
		}},
		{name: "someone's files", reason: "no " + publish.OutputMarker, setup: func(t *testing.T, dir string) { write(t, filepath.Join(dir, "README.md")) }},
		{name: "a regular file", reason: "not a directory", setup: func(t *testing.T, dir string) { write(t, dir) }},
		{name: "a symbolic link", reason: "symbolic link", setup: func(t *testing.T, dir string) {
			target := t.TempDir()
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a marker that is not Scribe's JSON", reason: "unreadable", setup: func(t *testing.T, dir string) { write(t, filepath.Join(dir, publish.OutputMarker)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			tc.setup(t, dir)
			before := snapshot(t, dir)
			err := publish.WriteOutputDir(context.Background(), dir, []*render.Bundle{bundle})
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if data, err := os.ReadFile(filepath.Join(dir, "ns/workload/a/x.yaml")); err != nil || string(data) != "a: 1\n" {
					t.Fatalf("x.yaml = %q, %v", data, err)
				}
				return
			}
			var notOwned *publish.NotOwnedError
			if !errors.As(err, &notOwned) || notOwned.Dir != dir || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %v, want a NotOwnedError for %s with %q", err, dir, tc.reason)
			}
			if after := snapshot(t, dir); after != before {
				t.Fatalf("the refused directory changed:\n%s\nto:\n%s", before, after)
			}
		})
	}
}

// TestWriteOutputDirStopsWithTheContext: a cancelled write leaves nothing.
func TestWriteOutputDirStopsWithTheContext(t *testing.T) {
	parent := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := &render.Bundle{Files: []render.File{{Path: "a.yaml", Data: []byte("a: 1\n")}}}
	if err := publish.WriteOutputDir(ctx, filepath.Join(parent, "out"), []*render.Bundle{b}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p string) {
	t.Helper()
	mkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot lists every path under p (or p itself) with its mode and content.
func snapshot(t *testing.T, p string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %s", q, info.Mode())
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(q)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDirSinkStaysInsideRoot: a symbolic link in the tree that leads out of
// Root (here the namespace directory) makes the publish fail; nothing is
// written, replaced or deleted outside Root.
func TestDirSinkStaysInsideRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "workload", "a", "keep.txt"))
	mkdir(t, filepath.Join(root, "deploy"))
	if err := os.Symlink(outside, filepath.Join(root, "deploy", "ns")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, outside)
	d := publish.Dir{Root: root, Path: "deploy"}
	a := testBundle("ns", "a", "one")
	if _, err := d.Publish(context.Background(), publish.ChangeFor(a)); err == nil {
		t.Fatal("a publish through a symbolic link out of Root succeeded")
	}
	if _, err := d.Publish(context.Background(), publish.DeleteFor(a.Source, 2)); err == nil {
		t.Fatal("a delete through a symbolic link out of Root succeeded")
	}
	if after := snapshot(t, outside); after != before {
		t.Fatalf("outside Root changed:\n%s\nto:\n%s", before, after)
	}
}

// testBundle is a Workload's bundle of one ConfigMap holding content.
func testBundle(ns, name, content string) *render.Bundle {
	return publishtest.Bundle(ns, name, content)
}
