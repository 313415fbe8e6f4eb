package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/scribe-gitops/scribe/render"
)

// newCatalogCheckCmd is the hidden `scribe catalog-check`: the child
// process in which scribe (the CLI's --catalog, the controller's
// Repository spec.catalog) evaluates user catalogs within bounds of time
// and memory before loading them (render.CatalogBound). It reads the
// catalogs from stdin and exits 0 when they load, 3 with the CUE error on
// stderr when they do not, 4 past its memory bound.
func newCatalogCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:    render.CatalogCheckCommand,
		Short:  "Evaluate user catalogs read from stdin within a memory bound (run by scribe itself)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if code := render.ServeCatalogCheck(cmd.InOrStdin(), cmd.ErrOrStderr()); code != 0 {
				return &codeError{code: code}
			}
			return nil
		},
	}
}

// catalogEngine is the render engine with the user catalogs in dirs
// (--catalog), each evaluated first by `scribe catalog-check` within the
// default bounds: a catalog past them fails as bad input.
func catalogEngine(ctx context.Context, dirs []string) (*render.Engine, error) {
	if len(dirs) == 0 {
		return render.New()
	}
	cats := make([]render.Catalog, 0, len(dirs))
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil {
			return nil, fmt.Errorf("--catalog: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("--catalog %s: not a directory", d)
		}
		cats = append(cats, render.Catalog{Name: d, FS: os.DirFS(d)})
	}
	b, err := render.DefaultCatalogBound()
	if err != nil {
		return nil, fmt.Errorf("--catalog: %w", err)
	}
	return b.New(ctx, cats)
}
