package render

import (
	"fmt"
	"maps"
	"path"
	"strings"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/credurl"
	"github.com/scribe-gitops/scribe/render/contract"
)

// CatalogSource is where the catalog is published: the Flux source a
// Repository's spec.catalog names and the directory in it. Catalog entries
// whose source is `type: "catalog"` (Scribe's built-in app, config and
// workflow entries) are delivered from Path/<entry path> in that source: a
// Flux Kustomization references the source itself; an Argo CD Application,
// which cannot read a Flux source, fetches URL at Revision.
type CatalogSource struct {
	// Kind of the Flux source: GitRepository or OCIRepository.
	Kind string `json:"kind"`
	// Name and Namespace of the Flux source.
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Path of the catalog directory in the source's artifact (spec.catalog.path).
	Path string `json:"path,omitempty"`
	// URL the source fetches (its spec.url), for Argo CD.
	URL string `json:"url,omitempty"`
	// Revision of URL Argo CD tracks: the source's branch, tag or commit
	// (GitRepository) or tag (OCIRepository).
	Revision string `json:"revision,omitempty"`
}

// catalogSourceType is the source type of entries kept in the published catalog.
const catalogSourceType = "catalog"

// placeCatalogSource rewrites a resolved component whose entry's source is
// `type: "catalog"` into a reference to where the catalog is published
// (src), for the templates: sourceRef (the Flux source), path (joined under
// src.Path), url and revision (Argo CD). Without src, or for Argo CD
// without a URL, it is an error at namePath naming what to configure.
// The entry map is shared by renders: it is copied, never changed.
func placeCatalogSource(r *contract.Resolved, src *CatalogSource, applier scribev1.ApplierKind, namePath string) *FieldError {
	s, _ := r.Entry["source"].(map[string]any)
	if s == nil || s["type"] != catalogSourceType {
		return nil
	}
	rel, _ := s["path"].(string)
	if src == nil || src.Kind == "" || src.Name == "" {
		return &FieldError{Path: namePath, Message: fmt.Sprintf(
			"component %q is delivered from the published catalog (path %s), and no catalog source is configured: set the Repository's spec.catalog to the Flux GitRepository or OCIRepository where the platform team publishes Scribe's catalog/ directory (scribe render: --catalog-source KIND/NAMESPACE/NAME)",
			r.Name, rel)}
	}
	if applier == scribev1.ApplierArgoCD && (src.URL == "" || src.Revision == "") {
		return &FieldError{Path: namePath, Message: fmt.Sprintf(
			"component %q is delivered from the published catalog %s %s/%s, whose URL and revision Argo CD needs are unknown (scribe render: --catalog-source-url and --catalog-source-revision)",
			r.Name, src.Kind, src.Namespace, src.Name)}
	}
	placed := map[string]any{
		"type":      catalogSourceType,
		"path":      "./" + strings.TrimPrefix(path.Join("/", src.Path, rel), "/"),
		"sourceRef": map[string]any{"kind": src.Kind, "name": src.Name, "namespace": src.Namespace},
	}
	if src.URL != "" {
		// Written into Argo CD's Application: never with credentials.
		if err := credurl.Check(src.URL); err != nil {
			return &FieldError{Path: namePath, Message: fmt.Sprintf("component %q: the published catalog's URL: %v", r.Name, err)}
		}
		placed["url"] = src.URL
	}
	if src.Revision != "" {
		placed["revision"] = src.Revision
	}
	entry := maps.Clone(r.Entry)
	entry["source"] = placed
	r.Entry = entry
	return nil
}
