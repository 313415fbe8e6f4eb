package main

import (
	"os"
	"testing"

	"github.com/scribe-gitops/scribe/render"
)

// TestMain lets tests re-execute this test binary as the real CLI:
//   - as the bounded catalog checker, `scribe catalog-check`: under `go
//     test` the executable render.DefaultCatalogBound names is this binary;
//   - as the whole CLI (main, signals included) when envRunMain is set, for
//     the tests that drive a real process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == render.CatalogCheckCommand {
		os.Exit(render.ServeCatalogCheck(os.Stdin, os.Stderr))
	}
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}
