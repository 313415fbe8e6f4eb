package controller

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// userCatalog overrides the built-in demo-services with the team's own copy.
const userCatalog = `package catalog

entries: "demo-services": {
	kind:      "app"
	override:  true
	source: {type: "git", url: "https://git.example.com/platform/catalog", ref: branch: "main", path: "./apps/demo-services"}
	#Params: {}
}
`

// artifact is a Flux artifact: a tar.gz of files, and its sha256 digest.
func artifact(t testing.TB, files map[string]string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), "sha256:" + hex.EncodeToString(sum[:])
}

// artifactServer serves artifacts by path, as source-controller's storage
// server does, and counts requests.
func artifactServer(t *testing.T, blobs map[string][]byte) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		b, ok := blobs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// renderedSourceURL renders a hub Experiment with demo-services and returns
// the URL of the component's rendered GitRepository.
func renderedSourceURL(t *testing.T, e *render.Engine) string {
	t.Helper()
	obj := map[string]any{
		"apiVersion": scribev1.GroupVersion.String(), "kind": scribev1.ExperimentKind,
		"metadata": map[string]any{"name": "tutorial", "namespace": "lab", "generation": int64(1)},
		"spec": map[string]any{"targets": []any{map[string]any{
			"name": "app", "cluster": map[string]any{"type": "hub"},
			"components": []any{map[string]any{"app": "demo-services"}},
		}}},
	}
	b, err := e.Render(context.Background(), render.Input{Object: obj, Publish: render.DefaultPublish()})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range b.Files {
		if strings.Contains(f.Path, "gitrepository-tutorial-app-demo-services") {
			for _, line := range strings.Split(string(f.Data), "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "url:") {
					return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "url:"))
				}
			}
		}
	}
	t.Fatalf("no GitRepository for demo-services in %d files", len(b.Files))
	return ""
}

func TestCatalogLoad(t *testing.T) {
	good, goodDigest := artifact(t, map[string]string{"catalog/entries.cue": userCatalog, "apps/demo-services/kustomization.yaml": "resources: []\n",
		"catalog/apps/web/kustomization.yaml": "resources: [cm.yaml]\n"})
	bad, badDigest := artifact(t, map[string]string{"catalog/entries.cue": "package catalog\n\nentries: x: {kind: \"app\", source: {type: \"ftp\"}}\n"})
	huge, hugeDigest := artifact(t, map[string]string{"catalog/entries.cue": "package catalog\n\nimport \"list\"\n\nentries: {}\nx: list.Range(0, 5e7, 1)\n"})
	shadow, shadowDigest := artifact(t, map[string]string{"catalog/entries.cue": strings.Replace(userCatalog, "override:  true\n", "", 1)})
	srv, requests := artifactServer(t, map[string][]byte{"/good.tar.gz": good, "/bad.tar.gz": bad, "/huge.tar.gz": huge, "/shadow.tar.gz": shadow})
	// The checker is this test binary (see TestMain), bounded tighter than
	// the default in memory so the runaway case ends sooner; its time bound
	// is generous, so that on a loaded machine the runaway still meets the
	// memory bound first.
	bound := render.CatalogBound{Timeout: 90 * time.Second, Memory: 512 << 20}

	tests := []struct {
		name, url, digest, dir string
		reason                 string // "" means loaded
		message                string
	}{
		{name: "a catalog in the artifact overrides the built-in entry", url: srv.URL + "/good.tar.gz", digest: goodDigest, dir: "./catalog"},
		{name: "an artifact whose digest does not match is not ready", url: srv.URL + "/good.tar.gz", digest: badDigest, dir: "./catalog",
			reason: ReasonCatalogNotReady, message: "failed to verify archive"},
		{name: "an artifact the server no longer has is not ready", url: srv.URL + "/gone.tar.gz", digest: goodDigest, dir: "./catalog",
			reason: ReasonCatalogNotReady, message: "not found on the source server"},
		{name: "a path missing from the artifact is invalid", url: srv.URL + "/good.tar.gz", digest: goodDigest, dir: "./catalogs",
			reason: ReasonCatalogInvalid, message: `path "./catalogs" is not a directory`},
		{name: "a catalog entry that breaks the entry schema is invalid", url: srv.URL + "/bad.tar.gz", digest: badDigest, dir: "./catalog",
			reason: ReasonCatalogInvalid, message: `./catalog/entries.cue:3:`},
		{name: "a catalog past the memory bound is invalid, saying which bound", url: srv.URL + "/huge.tar.gz", digest: hugeDigest, dir: "./catalog",
			reason: ReasonCatalogInvalid, message: "memory limit"},
		{name: "an entry shadowing a built-in one without override is invalid", url: srv.URL + "/shadow.tar.gz", digest: shadowDigest, dir: "./catalog",
			reason: ReasonCatalogInvalid, message: "add `override: true`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &catalogs{dir: t.TempDir(), bound: bound}
			e, files, err := c.load(context.Background(), tt.url, tt.digest, tt.dir)
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				// The manifests under the catalog's path are kept for
				// building its components; its CUE is the engine's.
				if _, err := fs.Stat(files, "apps/web/kustomization.yaml"); err != nil {
					t.Errorf("the catalog's manifests lack apps/web/kustomization.yaml: %v", err)
				}
				if _, err := fs.Stat(files, "entries.cue"); err == nil {
					t.Error("the catalog's manifests hold its CUE")
				}
				if got := renderedSourceURL(t, e); got != "https://git.example.com/platform/catalog" {
					t.Fatalf("demo-services renders from %q, not the user catalog's source", got)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			if got := reasonOf(err); got != tt.reason || !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("error %s: %v; want reason %s containing %q", got, err, tt.reason, tt.message)
			}
		})
	}

	t.Run("an invalid artifact is evaluated once, and its failure remembered", func(t *testing.T) {
		c := &catalogs{dir: t.TempDir(), bound: bound}
		before := requests.Load()
		_, _, err1 := c.load(context.Background(), srv.URL+"/huge.tar.gz", hugeDigest, "./catalog")
		start := time.Now()
		_, _, err2 := c.load(context.Background(), srv.URL+"/huge.tar.gz", hugeDigest, "./catalog")
		if reasonOf(err1) != ReasonCatalogInvalid || err2 == nil || err2.Error() != err1.Error() || requests.Load()-before != 1 {
			t.Fatalf("errors %v / %v after %d downloads; want the same CatalogInvalid from one download", err1, err2, requests.Load()-before)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("the second load took %s: evaluated again", took)
		}
	})

	t.Run("a checker that cannot run is retried, not invalid", func(t *testing.T) {
		c := &catalogs{dir: t.TempDir(), bound: render.CatalogBound{Command: []string{"/bin/false"}}}
		_, _, err := c.load(context.Background(), srv.URL+"/good.tar.gz", goodDigest, "./catalog")
		if err == nil || reasonOf(err) == ReasonCatalogInvalid || !strings.Contains(err.Error(), "checker failed") {
			t.Fatalf("got %v (reason %q); want a plain checker error", err, reasonOf(err))
		}
		if _, cached := c.engines[goodDigest+"\x00./catalog"]; cached {
			t.Error("the checker's failure was remembered as the catalog's")
		}
	})

	t.Run("an artifact is downloaded once and its engine reused", func(t *testing.T) {
		c := &catalogs{dir: t.TempDir()}
		before := requests.Load()
		e1, _, err := c.load(context.Background(), srv.URL+"/good.tar.gz", goodDigest, "./catalog")
		if err != nil {
			t.Fatal(err)
		}
		e2, _, err := c.load(context.Background(), srv.URL+"/good.tar.gz", goodDigest, "./catalog")
		if err != nil {
			t.Fatal(err)
		}
		if e1 != e2 || requests.Load()-before != 1 {
			t.Fatalf("engines equal %v, %d downloads; want the same engine from one download", e1 == e2, requests.Load()-before)
		}
	})
}

func TestEngineForReadsTheFluxSource(t *testing.T) {
	good, digest := artifact(t, map[string]string{"catalog/entries.cue": userCatalog})
	srv, _ := artifactServer(t, map[string][]byte{"/good.tar.gz": good})
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	withArtifact := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "catalog", Namespace: "flux-system"},
		Status:     sourcev1.GitRepositoryStatus{Artifact: &meta.Artifact{URL: srv.URL + "/good.tar.gz", Digest: digest, Revision: "main@sha1:0123"}},
	}
	noArtifact := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "cloning", Namespace: "flux-system"},
		Status: sourcev1.GitRepositoryStatus{Conditions: []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: "GitOperationFailed", Message: "failed to checkout: authentication required"}}},
	}
	p := &Publisher{
		Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(withArtifact, noArtifact).WithStatusSubresource(withArtifact, noArtifact).Build(),
	}
	p.catalogs.dir = t.TempDir()
	if p.Engine, err = render.New(); err != nil {
		t.Fatal(err)
	}
	// The platform grants its catalog: only then may it override a
	// built-in entry, as userCatalog's demo-services does.
	platform := Grant{CatalogSources: []scribev1.CatalogSourceReference{{Kind: "GitRepository", Namespace: "flux-system", Name: "catalog"}}}
	repo := func(cs *scribev1.CatalogSource) *Target {
		return &Target{Repo: &scribev1.Repository{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "lab"}, Spec: scribev1.RepositorySpec{Catalog: cs}}, Grant: platform}
	}
	ungranted := repo(&scribev1.CatalogSource{Kind: "GitRepository", Name: "catalog", Namespace: "flux-system", Path: "./catalog"})
	ungranted.Grant = Grant{}
	if _, err := p.EngineFor(context.Background(), ungranted); reasonOf(err) != ReasonNotPermitted || !strings.Contains(err.Error(), "spec.catalog") || !strings.Contains(err.Error(), "demo-services") {
		t.Fatalf("a catalog the platform did not grant overriding demo-services: %v; want NotPermitted at spec.catalog", err)
	}

	if e, err := p.EngineFor(context.Background(), repo(nil)); err != nil || e != p.Engine {
		t.Fatalf("without spec.catalog: %v, built-in engine %v", err, e == p.Engine)
	}
	e, err := p.EngineFor(context.Background(), repo(&scribev1.CatalogSource{Kind: "GitRepository", Name: "catalog", Namespace: "flux-system", Path: "./catalog"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := renderedSourceURL(t, e); got != "https://git.example.com/platform/catalog" {
		t.Fatalf("demo-services renders from %q", got)
	}
	p.NoCrossNamespaceRefs = true
	if _, err := p.EngineFor(context.Background(), repo(&scribev1.CatalogSource{Kind: "GitRepository", Name: "catalog", Namespace: "flux-system"})); err == nil ||
		reasonOf(err) != ReasonCatalogInvalid || !strings.Contains(err.Error(), "cross-namespace references are disabled") {
		t.Errorf("cross-namespace catalog with --no-cross-namespace-refs: %v", err)
	}
	p.NoCrossNamespaceRefs = false
	for _, tt := range []struct {
		cs      *scribev1.CatalogSource
		message string
	}{
		{&scribev1.CatalogSource{Kind: "GitRepository", Name: "cloning", Namespace: "flux-system"}, "has no artifact yet; failed to checkout: authentication required"},
		{&scribev1.CatalogSource{Kind: "GitRepository", Name: "catalog"}, "catalog source GitRepository lab/catalog not found"},
	} {
		_, err := p.EngineFor(context.Background(), repo(tt.cs))
		if err == nil || reasonOf(err) != ReasonCatalogNotReady || !strings.Contains(err.Error(), tt.message) {
			t.Errorf("%s/%s: %v (reason %s); want CatalogNotReady containing %q", tt.cs.Namespace, tt.cs.Name, err, reasonOf(err), tt.message)
		}
	}
}

// BenchmarkCatalogLoad measures what a new catalog artifact costs the
// controller once: download, digest check, untar and a render engine with
// the user catalog. Later renders reuse the engine.
func BenchmarkCatalogLoad(b *testing.B) {
	blob, digest := artifact(b, map[string]string{"catalog/entries.cue": userCatalog})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(blob) }))
	defer srv.Close()
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		c := &catalogs{dir: dir}
		if _, _, err := c.load(context.Background(), srv.URL+"/a.tar.gz", digest, "./catalog"); err != nil {
			b.Fatal(err)
		}
	}
}
