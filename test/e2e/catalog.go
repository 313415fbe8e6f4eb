package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// CatalogRepoName is the component catalog repository on the git server.
// It holds the catalog's CUE (catalog/) and the components' manifests
// (apps/), as a platform team's catalog repository would.
const CatalogRepoName = "acme/catalog"

// CatalogSource is the Flux GitRepository (in flux-system) that Scribe
// reads the catalog from: Repository spec.catalog names it.
const CatalogSource = "catalog"

// catalogRef is the spec.catalog of the loop's Repositories.
func catalogRef() *scribev1.CatalogSource {
	return &scribev1.CatalogSource{Kind: "GitRepository", Name: CatalogSource, Namespace: "flux-system", Path: "./catalog"}
}

// createCatalog pushes testdata/catalog to the catalog repository (the
// CUE's CATALOG_URL replaced by the repository's URL) and creates the Flux
// GitRepository that serves it. The catalog is reached directly, not
// through GitProxy, so an outage of the experiments repository leaves it up.
func (s *Stack) createCatalog(ctx context.Context, t testing.TB) error {
	url := s.Git.InitRepo(t, CatalogRepoName, "main")
	root := filepath.Join("testdata", "catalog")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		content := strings.ReplaceAll(string(b), "CATALOG_URL", url)
		_, err = s.Git.CommitOnServer(CatalogRepoName, "main", filepath.ToSlash(rel), content)
		return err
	})
	if err != nil {
		return fmt.Errorf("push the catalog: %w", err)
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
