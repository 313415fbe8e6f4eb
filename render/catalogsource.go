package render

import (
	"fmt"
	"io/fs"

	"github.com/scribe-gitops/scribe/render/contract"
)

// CatalogSource is where the catalog is published: the Flux source a
// Repository's spec.catalog names and the directory in it. Catalog entries
// whose source is `type: "catalog"` (Scribe's built-in app, config and
// workflow entries) are kept at Path/<entry path> in that source: Scribe
// builds them itself (see hydrateComponent) from Files, and commits the
// objects in the Experiment's own directory.
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
	// Revision of URL: the source's branch, tag or commit (GitRepository)
	// or tag (OCIRepository).
	Revision string `json:"revision,omitempty"`
	// Files are the published catalog's files, rooted at Path (the
	// controller reads them from the source's artifact). nil means the
	// catalog shipped in this binary (catalog.FS), which a platform team
	// publishes unchanged.
	Files fs.FS `json:"-"`
	// Tenant: the source is one the tenant chose (not among its
	// TenantPolicy's spec.catalogSources). Built-in entries are then built
	// from the catalog shipped in this binary, not from Files, and the
	// objects of its own entries are confined to the tenant's namespaces
	// and granted cluster-scoped kinds (see BuiltinOverrides and
	// ConfineTenantObjects).
	Tenant bool `json:"tenant,omitempty"`
}

// catalogSourceType is the source type of entries kept in the published catalog.
const catalogSourceType = "catalog"

// checkCatalogSource refuses a resolved component whose entry's source is
// `type: "catalog"` when no published catalog is configured (src): the
// error is at namePath and names what to configure.
func checkCatalogSource(r *contract.Resolved, src *CatalogSource, namePath string) *FieldError {
	s, _ := r.Entry["source"].(map[string]any)
	if s == nil || s["type"] != catalogSourceType {
		return nil
	}
	rel, _ := s["path"].(string)
	if src == nil || src.Kind == "" || src.Name == "" {
		return &FieldError{Path: namePath, Message: fmt.Sprintf(
			"component %q is kept in the published catalog (path %s), and no catalog source is configured: set the Repository's spec.catalog to the Flux GitRepository or OCIRepository where the platform team publishes Scribe's catalog/ directory (scribe render: --catalog-source KIND/NAMESPACE/NAME)",
			r.Name, rel)}
	}
	return nil
}
