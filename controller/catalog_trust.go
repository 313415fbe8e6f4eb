package controller

import (
	"fmt"
	"slices"
	"strings"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// tenantCatalog reports whether the Flux source kind namespace/name that a
// Repository's spec.catalog names is one the tenant chose rather than one
// the platform granted (its TenantPolicy's spec.catalogSources). A source
// in the tenant's own namespace needs no grant, so the tenant can point it
// anywhere: what it holds is the tenant's input, never the platform's
// catalog (see render.CatalogSource.Tenant).
func tenantCatalog(g Grant, kind, namespace, name string) bool {
	return !slices.Contains(g.CatalogSources, scribev1.CatalogSourceReference{Kind: kind, Namespace: namespace, Name: name})
}

// refuseBuiltinOverrides refuses a catalog the tenant chose (ref) whose
// entries take the names of built-in entries (overrides): with a
// built-in entry's name, a tenant's entry would be trusted as the
// built-in one (its namespace, such as demo or testkube, and what
// Scribe's own catalog delivers there). Only a catalog the platform
// grants may override a built-in entry.
func refuseBuiltinOverrides(repo *scribev1.Repository, ref string, overrides []string) error {
	if len(overrides) == 0 {
		return nil
	}
	return &reasonError{reason: ReasonNotPermitted, err: fmt.Errorf(
		"repository %s/%s: spec.catalog: %s, a catalog source the platform did not grant (a TenantPolicy's spec.catalogSources), has entries named as built-in entries (%s): a tenant's catalog may not replace a built-in entry; rename them",
		repo.Namespace, repo.Name, ref, strings.Join(overrides, ", "))}
}
