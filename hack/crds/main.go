// Command crds prints the paths of the upstream CRD files of the named
// projects (every project when none is named), one per line, found by the
// same resolver the tests use (internal/crds): the offline mirror in
// SCRIBE_CRDS_DIR first, else the pinned module in the Go module cache.
// hack/gen-schemas.sh (`make schemas`) reads its output.
//
//	go run ./hack/crds [project...]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/scribe-gitops/scribe/internal/crds"
)

func main() {
	flag.Usage = func() {
		_, _ = fmt.Fprintf(flag.CommandLine.Output(), "usage: crds [project...]\nprojects: %s\n", strings.Join(crds.Names(), " "))
	}
	flag.Parse()
	r, err := crds.FromEnv()
	if err == nil {
		err = run(context.Background(), os.Stdout, r, flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crds:", err)
		os.Exit(1)
	}
}

// run writes the CRD files of projects (all when empty) to w. Nothing is
// written when one of them cannot be found.
func run(ctx context.Context, w io.Writer, r crds.Resolver, projects []string) error {
	if len(projects) == 0 {
		projects = crds.Names()
	}
	files, err := r.Files(ctx, projects...)
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return nil
}
