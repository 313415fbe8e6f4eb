package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/catalog"
)

// CatalogRepoName is the component catalog repository on the git server.
// It holds Scribe's catalog/ directory as a platform team publishes it
// (README: catalog/README.md), with the team's own entries.cue from
// testdata/catalog.
const CatalogRepoName = "acme/catalog"

// CatalogSource is the Flux GitRepository (in flux-system) that Scribe
// reads the catalog from: Repository spec.catalog names it.
const CatalogSource = "catalog"

// catalogRef is the spec.catalog of the loop's Repositories.
func catalogRef() *scribev1.CatalogSource {
	return &scribev1.CatalogSource{Kind: "GitRepository", Name: CatalogSource, Namespace: "flux-system", Path: "."}
}

// createCatalog publishes Scribe's catalog/ directory (catalog.FS: what the
// binary's built-in entries point at) to the catalog repository, with the
// files of testdata/catalog over it, in one commit per file, and creates
// the Flux GitRepository that serves it. The catalog is reached directly,
// not through GitProxy, so an outage of the experiments repository leaves
// it up.
func (s *Stack) createCatalog(ctx context.Context, t testing.TB) error {
	url := s.Git.InitRepo(t, CatalogRepoName, "main")
	files := map[string][]byte{}
	err := fs.WalkDir(catalog.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(catalog.FS, path)
		files[path] = b
		return err
	})
	if err != nil {
		return fmt.Errorf("read Scribe's catalog: %w", err)
	}
	root := filepath.Join("testdata", "catalog")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		return fmt.Errorf("read the team's catalog files: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := s.Git.CommitOnServer(CatalogRepoName, "main", name, string(files[name])); err != nil {
			return fmt.Errorf("push the catalog: %w", err)
		}
	}
	gr := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: CatalogSource, Namespace: "flux-system"},
		Spec: sourcev1.GitRepositorySpec{
			URL:       url,
			Interval:  metav1.Duration{Duration: time.Minute},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
		},
	}
	if err := s.Client.Create(ctx, gr); err != nil {
		return fmt.Errorf("create catalog GitRepository: %w", err)
	}
	return nil
}
