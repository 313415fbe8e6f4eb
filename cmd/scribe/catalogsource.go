package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/scribe-gitops/scribe/render"
)

// catalogSourceFlags say where the catalog is published (what a
// Repository's spec.catalog names for the controller): the Flux source the
// built-in entries' manifests are delivered from.
type catalogSourceFlags struct {
	// ref is KIND/NAMESPACE/NAME.
	ref      string
	path     string
	url      string
	revision string
	// dir is a local copy of the published catalog directory; "" means
	// the catalog shipped in this binary.
	dir string
}

// defaultCatalogSource is the Flux source an offline render assumes the
// catalog is published in, as --source-name assumes flux-system/scribe
// for the repository itself.
const defaultCatalogSource = "GitRepository/flux-system/scribe-catalog"

func (c *catalogSourceFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&c.ref, "catalog-source", defaultCatalogSource, "KIND/NAMESPACE/NAME of the Flux GitRepository or OCIRepository where Scribe's catalog/ directory is published (a Repository's spec.catalog), which the built-in app, config and workflow entries are delivered from; \"\" for none")
	fl.StringVar(&c.path, "catalog-source-path", ".", "directory of the published catalog in that source's artifact (spec.catalog.path)")
	fl.StringVar(&c.dir, "catalog-source-dir", "", "local copy of the published catalog directory (what --catalog-source serves at --catalog-source-path), whose manifests Scribe builds the app, config and workflow components from; default: the catalog shipped in this binary")
	fl.StringVar(&c.url, "catalog-source-url", "", "URL that source fetches")
	fl.StringVar(&c.revision, "catalog-source-revision", "", "tag, branch or commit of --catalog-source-url")
	const built = "no longer needed: Scribe builds the catalog's components itself and commits them with the Experiment"
	_ = fl.MarkDeprecated("catalog-source-url", built)
	_ = fl.MarkDeprecated("catalog-source-revision", built)
}

// source is the render's catalog source, or nil without --catalog-source.
func (c *catalogSourceFlags) source() (*render.CatalogSource, error) {
	if c.ref == "" {
		if c.url != "" || c.revision != "" || c.path != "." || c.dir != "" {
			return nil, fmt.Errorf("--catalog-source-path, --catalog-source-dir, --catalog-source-url and --catalog-source-revision need --catalog-source")
		}
		return nil, nil
	}
	parts := strings.Split(c.ref, "/")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return nil, fmt.Errorf("--catalog-source must be KIND/NAMESPACE/NAME, not %q", c.ref)
	}
	if parts[0] != "GitRepository" && parts[0] != "OCIRepository" {
		return nil, fmt.Errorf("--catalog-source: kind must be GitRepository or OCIRepository, not %q", parts[0])
	}
	if strings.HasPrefix(c.path, "/") || strings.Contains("/"+c.path+"/", "/../") {
		return nil, fmt.Errorf("--catalog-source-path must be a path inside the artifact (./dir), not %q", c.path)
	}
	src := &render.CatalogSource{Kind: parts[0], Namespace: parts[1], Name: parts[2], Path: c.path, URL: c.url, Revision: c.revision}
	if c.dir != "" {
		if fi, err := os.Stat(c.dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--catalog-source-dir %q is not a directory", c.dir)
		}
		src.Files = os.DirFS(c.dir)
	}
	return src, nil
}
