package controller_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/catalog"
	"github.com/scribe-gitops/scribe/controller"
)

// publishedCatalog is the Flux GitRepository, in the fixture's namespace,
// holding Scribe's catalog/ directory as a platform team publishes it.
const publishedCatalog = "scribe-catalog"

// publishCatalog plays a platform team and source-controller: Scribe's
// catalog/ directory is the artifact of the GitRepository scribe-catalog,
// served over HTTP as source-controller serves it, and the Repository's
// spec.catalog names it, so built-in components (delivered from the
// published catalog) render.
func (f *fixture) publishCatalog(t testing.TB) {
	t.Helper()
	f.publishCatalogWith(t, "")
}

// publishCatalogWith is publishCatalog with entries, when not empty, as
// the published directory's entries.cue: the platform team's own entries
// beside the built-in ones.
func (f *fixture) publishCatalogWith(t testing.TB, entries string) {
	t.Helper()
	files := map[string]string{}
	err := fs.WalkDir(catalog.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(catalog.FS, p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if entries != "" {
		files["entries.cue"] = entries
	}
	blob, digest := controller.Artifact(t, files)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(blob) }))
	t.Cleanup(srv.Close)
	src := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: publishedCatalog, Namespace: f.ns},
		Spec: sourcev1.GitRepositorySpec{URL: "https://git.example.com/platform/catalog.git", Interval: metav1.Duration{Duration: time.Minute},
			Reference: &sourcev1.GitRepositoryRef{Tag: "v0.1.0"}},
	}
	if err := f.e.c.Create(f.ctx(), src); err != nil {
		t.Fatal(err)
	}
	const revision = "v0.1.0@sha1:2222222222222222222222222222222222222222"
	src.Status.ObservedGeneration = src.Generation
	src.Status.Artifact = &meta.Artifact{Path: "gitrepository/scribe-catalog.tar.gz", URL: srv.URL + "/scribe-catalog.tar.gz", Revision: revision, Digest: digest, LastUpdateTime: metav1.Now()}
	src.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason,
		Message: "stored artifact for revision " + revision, ObservedGeneration: src.Generation, LastTransitionTime: metav1.Now()}}
	if err := f.e.c.Status().Update(f.ctx(), src); err != nil {
		t.Fatal(err)
	}
	f.repo.Spec.Catalog = &scribev1.CatalogSource{Kind: "GitRepository", Name: publishedCatalog, Path: "."}
}
