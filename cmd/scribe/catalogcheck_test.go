package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scribe-gitops/scribe/render"
)

// TestCatalogEngineBoundsUserCatalogs: --catalog directories go through the
// bounded checker: the four-line catalog fails with the memory (or
// time) bound named, well within a generous limit, and a normal catalog
// loads.
func TestCatalogEngineBoundsUserCatalogs(t *testing.T) {
	write := func(src string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "entries.cue"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	hostile := write("package catalog\nimport \"list\"\nentries: {}\nx: list.Range(0, 5e7, 1)\n")
	start := time.Now()
	_, err := catalogEngine(context.Background(), []string{hostile})
	var ce *render.CatalogError
	if !errors.As(err, &ce) || (ce.Reason != render.CatalogMemoryLimit && ce.Reason != render.CatalogTimeout) {
		t.Fatalf("got %v, want a CatalogError past the memory or time bound", err)
	}
	if !strings.Contains(err.Error(), hostile) {
		t.Errorf("error does not name the catalog directory: %v", err)
	}
	if took := time.Since(start); took > 45*time.Second {
		t.Errorf("the check took %s", took)
	}

	good := write(`package catalog
entries: "team-cache": {kind: "app", source: {type: "oci", url: "oci://registry.example.com/team/cache", tag: "1.2.3"}, #Params: {}}
`)
	e, err := catalogEngine(context.Background(), []string{good})
	if err != nil {
		t.Fatalf("a normal catalog: %v", err)
	}
	if got := strings.Join(e.CatalogEntries(), " "); !strings.Contains(got, "app/team-cache") {
		t.Errorf("entries %s lack app/team-cache", got)
	}
}
