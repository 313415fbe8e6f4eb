package controller

import (
	"fmt"
	"slices"
	"strings"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// Reasons of the tenancy decision.
const (
	// ReasonNotPermitted: a Repository asks for more than its namespace's
	// TenantPolicy grants (or, without one, more than its own namespace).
	ReasonNotPermitted = "NotPermitted"
	// ReasonPolicyConflict: two TenantPolicies select the namespace.
	ReasonPolicyConflict = "PolicyConflict"
	// ReasonCredentialNotBound: a Secret would be sent to a URL it is not
	// bound to (its scribe.dev/allowed-urls annotation).
	ReasonCredentialNotBound = "CredentialNotBound"
)

// Grant is what a tenant's Repository may use: its namespace's
// TenantPolicy, narrowed by the Repository.
type Grant struct {
	// Policy is the TenantPolicy's name, "" when none selects the namespace.
	Policy string
	// AllowedNamespaces are the namespaces besides a custom resource's own
	// that its deliveries may install into.
	AllowedNamespaces []string
	// ClusterResources are the cluster-scoped kinds an Experiment's Argo CD
	// AppProject allows.
	ClusterResources []scribev1.GroupKind
	// ServiceAccountName is the account Flux applies the tenant's objects
	// as, "" for Flux's own default.
	ServiceAccountName string
	// CatalogSources are the sources outside the namespace a catalog may
	// be read from.
	CatalogSources []scribev1.CatalogSourceReference
	// SourceRepos are the URL prefixes a user catalog entry's source may
	// be fetched from under Argo CD.
	SourceRepos []string
}

// DecideGrant is the tenancy decision: what the Repository repo may use,
// given the TenantPolicies that select its namespace (selected) and the
// namespaces the controller lets sync objects live in when no policy
// says (defaultApplierNamespaces). Whatever widens what a tenant's
// commits can do comes from the policy; the Repository may narrow it
// (spec.allowedNamespaces names some of the policy's destinations) and
// restate it (spec.applier.serviceAccountName equal to the policy's),
// never widen it. The error names the Repository field and the policy.
func DecideGrant(repo *scribev1.Repository, selected []scribev1.TenantPolicy, defaultApplierNamespaces []string) (Grant, error) {
	ns := repo.Namespace
	if len(selected) > 1 {
		names := make([]string, len(selected))
		for i, p := range selected {
			names[i] = p.Name
		}
		slices.Sort(names)
		return Grant{}, &reasonError{reason: ReasonPolicyConflict, err: fmt.Errorf(
			"namespace %s is selected by more than one TenantPolicy (%s): the platform must make their spec.namespaceSelector disjoint",
			ns, strings.Join(names, ", "))}
	}
	var spec scribev1.TenantPolicySpec
	g := Grant{}
	by := fmt.Sprintf("no TenantPolicy selects namespace %s", ns)
	if len(selected) == 1 {
		spec = selected[0].Spec
		g.Policy = selected[0].Name
		by = fmt.Sprintf("TenantPolicy %s", g.Policy)
	}
	notPermitted := func(format string, args ...any) (Grant, error) {
		return Grant{}, &reasonError{reason: ReasonNotPermitted, err: fmt.Errorf("repository %s/%s: %s", ns, repo.Name, fmt.Sprintf(format, args...))}
	}

	for i, n := range repo.Spec.AllowedNamespaces {
		if n != ns && !slices.Contains(spec.DestinationNamespaces, n) {
			return notPermitted("spec.allowedNamespaces[%d]: namespace %q is not granted (%s; the platform grants destinations in a TenantPolicy's spec.destinationNamespaces)", i, n, by)
		}
		if n != ns {
			g.AllowedNamespaces = append(g.AllowedNamespaces, n)
		}
	}

	applierNamespaces := defaultApplierNamespaces
	if spec.Applier != nil && len(spec.Applier.Namespaces) > 0 {
		applierNamespaces = spec.Applier.Namespaces
	}
	if an := repo.Spec.Applier.Namespace; an != "" && an != ns && !slices.Contains(applierNamespaces, an) {
		return notPermitted("spec.applier.namespace: sync objects may not live in namespace %q (%s allows %s)", an, by, orNone(applierNamespaces))
	}

	if spec.Applier != nil {
		g.ServiceAccountName = spec.Applier.ServiceAccountName
	}
	if sa := repo.Spec.Applier.ServiceAccountName; sa != "" && sa != g.ServiceAccountName {
		return notPermitted("spec.applier.serviceAccountName: %q is not the account the platform lets this namespace apply as (%s names %s): the account Flux applies with is set in a TenantPolicy's spec.applier.serviceAccountName",
			sa, by, orNone([]string{g.ServiceAccountName}))
	}

	if cs := repo.Spec.Catalog; cs != nil && cs.Namespace != "" && cs.Namespace != ns {
		ref := scribev1.CatalogSourceReference{Kind: cs.Kind, Namespace: cs.Namespace, Name: cs.Name}
		if !slices.Contains(spec.CatalogSources, ref) {
			return notPermitted("spec.catalog: %s %s/%s is in another namespace and not among the catalog sources granted (%s; see a TenantPolicy's spec.catalogSources)", cs.Kind, cs.Namespace, cs.Name, by)
		}
	}
	g.ClusterResources = spec.ClusterResources
	g.SourceRepos = spec.SourceRepos
	g.CatalogSources = spec.CatalogSources
	return g, nil
}

// orNone lists names for a message, "none" for none.
func orNone(names []string) string {
	var set []string
	for _, n := range names {
		if n != "" {
			set = append(set, n)
		}
	}
	if len(set) == 0 {
		return "none"
	}
	return strings.Join(set, ", ")
}
