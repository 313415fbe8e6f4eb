package publish_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish"
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
