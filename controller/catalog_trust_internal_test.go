package controller

import (
	"errors"
	"strings"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// TestCatalogTrustTenantCatalogMayNotOverrideBuiltinEntries: a catalog
// source is the platform's only when the namespace's TenantPolicy grants
// it (spec.catalogSources); any other, the tenant's own namespace's
// included, is the tenant's, and a tenant's catalog that names an entry
// as a built-in one (demo-services, to install into demo) is refused at
// spec.catalog, stalled.
func TestCatalogTrustTenantCatalogMayNotOverrideBuiltinEntries(t *testing.T) {
	platform := scribev1.CatalogSourceReference{Kind: "GitRepository", Namespace: "flux-system", Name: "platform-catalog"}
	g := Grant{CatalogSources: []scribev1.CatalogSourceReference{platform}}
	for _, c := range []struct {
		name            string
		kind, ns, src   string
		grant           Grant
		wantTenantOwned bool
	}{
		{name: "the granted platform catalog", kind: "GitRepository", ns: "flux-system", src: "platform-catalog", grant: g},
		{name: "a source of the tenant's own namespace", kind: "GitRepository", ns: "team-a", src: "mine", grant: g, wantTenantOwned: true},
		{name: "the platform's source under another kind", kind: "OCIRepository", ns: "flux-system", src: "platform-catalog", grant: g, wantTenantOwned: true},
		{name: "no policy", kind: "GitRepository", ns: "team-a", src: "mine", wantTenantOwned: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := tenantCatalog(c.grant, c.kind, c.ns, c.src); got != c.wantTenantOwned {
				t.Fatalf("tenantCatalog = %v, want %v", got, c.wantTenantOwned)
			}
		})
	}
	repo := tenantRepo(nil)
	if err := refuseBuiltinOverrides(repo, "GitRepository team-a/mine", nil); err != nil {
		t.Fatalf("a tenant catalog of its own entries is refused: %v", err)
	}
	err := refuseBuiltinOverrides(repo, "GitRepository team-a/mine", []string{"agent-eval", "demo-services"})
	var re *reasonError
	if !errors.As(err, &re) || re.reason != ReasonNotPermitted || !classify(err).Stalled {
		t.Fatalf("err = %v, want NotPermitted, stalled", err)
	}
	for _, w := range []string{"spec.catalog", "demo-services", "agent-eval", "team-a/mine"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}
