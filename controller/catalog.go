package controller

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	"github.com/fluxcd/pkg/http/fetch"
	"github.com/fluxcd/pkg/tar"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// Reasons for a Repository's user catalog (spec.catalog).
const (
	// ReasonCatalogNotReady: the Flux source is missing, has no artifact
	// yet, or its artifact could not be downloaded. Retried.
	ReasonCatalogNotReady = "CatalogNotReady"
	// ReasonCatalogInvalid: the artifact's CUE is not a valid catalog, or
	// its evaluation exceeded the bound of time or memory
	// (render.CatalogBound; the message says which). Only a new artifact
	// can fix it.
	ReasonCatalogInvalid = "CatalogInvalid"
)

const (
	// catalogMaxBytes bounds the download and the extracted size of a
	// catalog artifact: a catalog is a handful of CUE files.
	catalogMaxBytes = 64 << 20
	// catalogEngines is how many catalog artifacts keep a loaded engine.
	catalogEngines = 4
)

// catalogs loads and caches the render engines of user catalogs, one per
// (artifact digest, path). A catalog is evaluated first in a child process
// bounded in time and memory; an invalid one is remembered too, so a
// hostile artifact is evaluated once, not at every reconcile.
type catalogs struct {
	// dir is where artifacts are extracted while an engine loads them.
	dir string
	// hostOverride replaces the host of artifact URLs (as kustomize-controller's
	// SOURCE_CONTROLLER_LOCALHOST does), for a controller outside the cluster.
	hostOverride string
	// bound runs the catalog checker; a zero bound runs this executable's
	// `catalog-check` with the default limits (render.DefaultCatalogBound).
	bound render.CatalogBound

	mu      sync.Mutex // held while loading, so one artifact is fetched once
	engines map[string]loadedCatalog
	order   []string // keys, oldest first
}

// loadedCatalog is the engine of a catalog artifact, or why it has none.
type loadedCatalog struct {
	engine *render.Engine
	// files are the artifact's manifests under the catalog's path, which
	// Scribe builds its catalog components from (render.CatalogSource.Files).
	files fs.FS
	err   error // a *reasonError with ReasonCatalogInvalid
	// until, when set, is when the verdict expires: a timeout may be the
	// node's load rather than the catalog, so it is tried again later.
	until time.Time
}

// catalogTimeoutRetry is how long a catalog that timed out stays invalid
// before it is evaluated again (a CUE or memory failure stays until the
// artifact changes).
const catalogTimeoutRetry = 5 * time.Minute

// EngineFor returns the render engine for t: the built-in one, or, when the
// Repository has spec.catalog, one that also holds the user's catalog from
// the Flux source's current artifact. It sets t.CatalogSource, where the
// catalog is published.
func (p *Publisher) EngineFor(ctx context.Context, t *Target) (*render.Engine, error) {
	e, _, err := p.catalogFor(ctx, t)
	return e, err
}

// catalogSource is where the catalog of spec.catalog cs is published:
// the Flux source src (in namespace ns) and, for Argo CD, the URL and
// revision it fetches.
func catalogSource(cs *scribev1.CatalogSource, ns string, src *unstructured.Unstructured) *render.CatalogSource {
	loc := &render.CatalogSource{Kind: cs.Kind, Name: cs.Name, Namespace: ns, Path: cs.Path}
	loc.URL, _, _ = unstructured.NestedString(src.Object, "spec", "url")
	// The most specific reference wins, as in Flux.
	for _, k := range []string{"commit", "digest", "name", "tag", "semver", "branch"} {
		if v, _, _ := unstructured.NestedString(src.Object, "spec", "ref", k); v != "" {
			loc.Revision = v
			break
		}
	}
	if loc.Revision == "" && cs.Kind == "GitRepository" {
		loc.Revision = "HEAD"
	}
	if loc.Revision == "" {
		loc.Revision = "latest" // an OCIRepository without ref follows latest
	}
	return loc
}

// catalogFor is EngineFor, also saying which artifact the catalog came from
// (nil without spec.catalog).
func (p *Publisher) catalogFor(ctx context.Context, t *Target) (*render.Engine, *scribev1.CatalogStatus, error) {
	cs := t.Repo.Spec.Catalog
	if cs == nil {
		return p.BuiltinEngine(), nil, nil
	}
	ns := cs.Namespace
	if ns == "" {
		ns = t.Repo.Namespace
	}
	if p.NoCrossNamespaceRefs && ns != t.Repo.Namespace {
		// As Flux's --no-cross-namespace-refs: a tenant reads only its own
		// namespace's sources.
		return nil, nil, &reasonError{reason: ReasonCatalogInvalid, err: fmt.Errorf(
			"catalog source %s %s/%s is in another namespace than Repository %s/%s, and cross-namespace references are disabled",
			cs.Kind, ns, cs.Name, t.Repo.Namespace, t.Repo.Name)}
	}
	src := &unstructured.Unstructured{}
	src.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	src.SetKind(cs.Kind)
	ref := fmt.Sprintf("%s %s/%s", cs.Kind, ns, cs.Name)
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: cs.Name}, src); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, &reasonError{reason: ReasonCatalogNotReady, err: fmt.Errorf("catalog source %s not found", ref)}
		}
		return nil, nil, fmt.Errorf("get catalog source %s: %w", ref, err)
	}
	t.CatalogSource = catalogSource(cs, ns, src)
	t.CatalogSource.Tenant = tenantCatalog(t.Grant, cs.Kind, ns, cs.Name)
	url, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "url")
	digest, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "digest")
	revision, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "revision")
	if url == "" || digest == "" {
		return nil, nil, &reasonError{reason: ReasonCatalogNotReady, err: fmt.Errorf("catalog source %s has no artifact yet%s", ref, readyMessage(src))}
	}
	dir := cs.Path
	if dir == "" {
		dir = "."
	}
	e, files, err := p.catalogs.load(ctx, url, digest, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("catalog %s at %s: %w", ref, revision, err)
	}
	if t.CatalogSource.Tenant {
		if err := refuseBuiltinOverrides(t.Repo, ref, e.BuiltinOverrides()); err != nil {
			return nil, nil, err
		}
	}
	t.CatalogSource.Files = files
	t.CatalogArtifact = digest + " " + dir
	if t.CatalogSource.Tenant {
		// The same artifact renders otherwise when the platform vouches
		// for it.
		t.CatalogArtifact += " tenant"
	}
	return e, &scribev1.CatalogStatus{Revision: revision, Digest: digest, Entries: e.CatalogEntries()}, nil
}

// readyMessage is "; " and the Ready condition's message of a Flux object,
// or "".
func readyMessage(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == scribev1.ReadyCondition {
			if msg, _ := m["message"].(string); msg != "" {
				return "; " + msg
			}
		}
	}
	return ""
}

// load returns the engine for the artifact at url with digest, reading the
// catalog from dir inside it, and the artifact's manifests under dir.
func (c *catalogs) load(ctx context.Context, url, digest, dir string) (*render.Engine, fs.FS, error) {
	key := digest + "\x00" + dir
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.engines[key]; ok && (l.until.IsZero() || time.Now().Before(l.until)) {
		return l.engine, l.files, l.err
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("catalog dir: %w", err)
	}
	tmp, err := os.MkdirTemp(c.dir, "artifact-")
	if err != nil {
		return nil, nil, fmt.Errorf("catalog dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	f := fetch.New(
		fetch.WithRetries(2),
		fetch.WithMaxDownloadSize(catalogMaxBytes),
		fetch.WithUntar(tar.WithMaxUntarSize(catalogMaxBytes)),
		fetch.WithHostnameOverwrite(c.hostOverride),
		fetch.WithLogger(log.FromContext(ctx)),
	)
	if err := f.FetchWithContext(ctx, url, digest, tmp); err != nil {
		if errors.Is(err, fetch.ErrFileNotFound) {
			err = fmt.Errorf("artifact %s not found on the source server", digest)
		}
		return nil, nil, &reasonError{reason: ReasonCatalogNotReady, err: fmt.Errorf("download: %w", err)}
	}
	// Like Flux's securejoin: the path is resolved inside the artifact.
	root := filepath.Join(tmp, filepath.Clean(filepath.Join("/", filepath.FromSlash(dir))))
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, nil, &reasonError{reason: ReasonCatalogInvalid, err: fmt.Errorf("path %q is not a directory in the artifact", dir)}
	}
	// Errors name the catalog's files by their path in the source.
	name := "./" + strings.TrimPrefix(path.Clean("/"+dir), "/")
	e, err := c.engine(ctx, name, root)
	var invalid *reasonError
	if err != nil && !errors.As(err, &invalid) {
		return nil, nil, err // not the catalog's fault: retried
	}
	var files fs.FS
	if err == nil {
		if files, err = manifestFiles(root); err != nil {
			e, err = nil, &reasonError{reason: ReasonCatalogInvalid, err: err}
		}
	}
	if c.engines == nil {
		c.engines = map[string]loadedCatalog{}
	}
	l := loadedCatalog{engine: e, files: files, err: err}
	if ce := (*render.CatalogError)(nil); errors.As(err, &ce) && ce.Reason == render.CatalogTimeout {
		l.until = time.Now().Add(catalogTimeoutRetry)
	}
	if _, again := c.engines[key]; !again {
		c.order = append(c.order, key)
	}
	c.engines[key] = l
	for len(c.order) > catalogEngines {
		delete(c.engines, c.order[0])
		c.order = c.order[1:]
	}
	return e, files, err
}

// catalogManifestBytes bounds the manifests kept from a catalog artifact.
const catalogManifestBytes = 16 << 20

// manifestFiles reads the files under root that Scribe may build catalog
// components from (everything but the CUE, which the engine holds), at
// most catalogManifestBytes in all, into memory: the artifact's directory
// is removed once loaded. A link or other non-regular file is refused, as
// it may lead outside the artifact.
func manifestFiles(root string) (fs.FS, error) {
	files := fstest.MapFS{}
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, ".cue") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s in the catalog is not a regular file", filepath.ToSlash(rel))
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if total += int64(len(data)); total > catalogManifestBytes {
			return fmt.Errorf("the catalog's manifests exceed %d MiB", catalogManifestBytes>>20)
		}
		files[filepath.ToSlash(rel)] = &fstest.MapFile{Data: data, Mode: 0o444}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the catalog's manifests: %w", err)
	}
	return files, nil
}

// engine loads the catalog in root (named name) through the bounded
// checker. A catalog that is invalid or exceeds the bound fails with
// ReasonCatalogInvalid, saying why (CUE error, timeout, memory limit); a
// checker that could not run, or a cancelled ctx, is a plain error.
func (c *catalogs) engine(ctx context.Context, name, root string) (*render.Engine, error) {
	b := c.bound
	if len(b.Command) == 0 {
		d, err := render.DefaultCatalogBound()
		if err != nil {
			return nil, err
		}
		d.Timeout, d.Memory = b.Timeout, b.Memory
		b = d
	}
	e, err := b.New(ctx, []render.Catalog{{Name: name, FS: os.DirFS(root)}})
	var ce *render.CatalogError
	switch {
	case err == nil:
		return e, nil
	case ctx.Err() != nil:
		return nil, err
	case errors.As(err, &ce) && ce.Reason == render.CatalogCheckerFailed:
		return nil, fmt.Errorf("check catalog %s: %w", name, err)
	}
	return nil, &reasonError{reason: ReasonCatalogInvalid, err: err}
}
