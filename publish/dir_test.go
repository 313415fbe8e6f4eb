package publish_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/scribe-gitops/scribe/publish"
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
