package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func tenantRepo(mut func(*scribev1.RepositorySpec)) *scribev1.Repository {
	r := &scribev1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "default"},
		Spec: scribev1.RepositorySpec{Applier: scribev1.ApplierSpec{Kind: scribev1.ApplierFlux, Namespace: "flux-system", Name: "scribe"}}}
	if mut != nil {
		mut(&r.Spec)
	}
	return r
}

func policy(name string, spec scribev1.TenantPolicySpec) scribev1.TenantPolicy {
	return scribev1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

// TestDecideGrantTakesWhatWidensATenantFromThePolicyOnly: a Repository may
// narrow its namespace's TenantPolicy, never widen it; without a policy
// it gets its own namespace and the controller's applier namespaces.
func TestDecideGrantTakesWhatWidensATenantFromThePolicyOnly(t *testing.T) {
	teamA := policy("team-a", scribev1.TenantPolicySpec{
		DestinationNamespaces: []string{"team-a-shared", "team-a-db"},
		ClusterResources:      []scribev1.GroupKind{{Group: "", Kind: "Namespace"}},
		Applier:               &scribev1.TenantApplier{ServiceAccountName: "team-a-applier"},
		CatalogSources:        []scribev1.CatalogSourceReference{{Kind: "GitRepository", Namespace: "flux-system", Name: "platform-catalog"}},
	})
	defaults := DefaultApplierNamespaces()
	cases := []struct {
		name     string
		repo     *scribev1.Repository
		policies []scribev1.TenantPolicy
		want     Grant
		reason   string
		field    string
	}{
		{name: "no policy, nothing asked: own namespace only", repo: tenantRepo(nil), want: Grant{}},
		{name: "no policy: allowedNamespaces widen nothing and are refused", repo: tenantRepo(func(s *scribev1.RepositorySpec) { s.AllowedNamespaces = []string{"kube-system"} }),
			reason: ReasonNotPermitted, field: "spec.allowedNamespaces[0]"},
		{name: "no policy: a service account the tenant picks is refused", repo: tenantRepo(func(s *scribev1.RepositorySpec) { s.Applier.ServiceAccountName = "kustomize-controller" }),
			reason: ReasonNotPermitted, field: "spec.applier.serviceAccountName"},
		{name: "no policy: sync objects only in the controller's applier namespaces", repo: tenantRepo(func(s *scribev1.RepositorySpec) { s.Applier.Namespace = "kube-system" }),
			reason: ReasonNotPermitted, field: "spec.applier.namespace"},
		{name: "sync objects in the tenant's own namespace are always allowed", repo: tenantRepo(func(s *scribev1.RepositorySpec) { s.Applier.Namespace = "team-a" }), want: Grant{}},
		{name: "no policy: a catalog in another namespace is refused", repo: tenantRepo(func(s *scribev1.RepositorySpec) {
			s.Catalog = &scribev1.CatalogSource{Kind: "GitRepository", Namespace: "team-b", Name: "private"}
		}), reason: ReasonNotPermitted, field: "spec.catalog"},
		{name: "a catalog in the own namespace needs no grant", repo: tenantRepo(func(s *scribev1.RepositorySpec) {
			s.Catalog = &scribev1.CatalogSource{Kind: "GitRepository", Namespace: "team-a", Name: "mine"}
		}), want: Grant{}},
		{name: "the policy's account applies, whatever the Repository leaves out", repo: tenantRepo(nil), policies: []scribev1.TenantPolicy{teamA},
			want: Grant{Policy: "team-a", ServiceAccountName: "team-a-applier", ClusterResources: teamA.Spec.ClusterResources, CatalogSources: teamA.Spec.CatalogSources}},
		{name: "the Repository may restate the policy's account", repo: tenantRepo(func(s *scribev1.RepositorySpec) { s.Applier.ServiceAccountName = "team-a-applier" }), policies: []scribev1.TenantPolicy{teamA},
			want: Grant{Policy: "team-a", ServiceAccountName: "team-a-applier", ClusterResources: teamA.Spec.ClusterResources, CatalogSources: teamA.Spec.CatalogSources}},
		{name: "but not name another", repo: tenantRepo(func(s *scribev1.RepositorySpec) { s.Applier.ServiceAccountName = "team-b-applier" }), policies: []scribev1.TenantPolicy{teamA},
			reason: ReasonNotPermitted, field: "spec.applier.serviceAccountName"},
		{name: "allowedNamespaces narrow the policy's destinations", repo: tenantRepo(func(s *scribev1.RepositorySpec) { s.AllowedNamespaces = []string{"team-a-db"} }), policies: []scribev1.TenantPolicy{teamA},
			want: Grant{Policy: "team-a", AllowedNamespaces: []string{"team-a-db"}, ServiceAccountName: "team-a-applier", ClusterResources: teamA.Spec.ClusterResources, CatalogSources: teamA.Spec.CatalogSources}},
		{name: "and cannot add kube-system", repo: tenantRepo(func(s *scribev1.RepositorySpec) { s.AllowedNamespaces = []string{"team-a-db", "kube-system"} }), policies: []scribev1.TenantPolicy{teamA},
			reason: ReasonNotPermitted, field: "spec.allowedNamespaces[1]"},
		{name: "a granted catalog source elsewhere", repo: tenantRepo(func(s *scribev1.RepositorySpec) {
			s.Catalog = &scribev1.CatalogSource{Kind: "GitRepository", Namespace: "flux-system", Name: "platform-catalog"}
		}), policies: []scribev1.TenantPolicy{teamA},
			want: Grant{Policy: "team-a", ServiceAccountName: "team-a-applier", ClusterResources: teamA.Spec.ClusterResources, CatalogSources: teamA.Spec.CatalogSources}},
		{name: "the same name as another kind is not granted", repo: tenantRepo(func(s *scribev1.RepositorySpec) {
			s.Catalog = &scribev1.CatalogSource{Kind: "OCIRepository", Namespace: "flux-system", Name: "platform-catalog"}
		}), policies: []scribev1.TenantPolicy{teamA}, reason: ReasonNotPermitted, field: "spec.catalog"},
		{name: "the policy's applier namespaces replace the controller's", repo: tenantRepo(nil), policies: []scribev1.TenantPolicy{policy("p", scribev1.TenantPolicySpec{Applier: &scribev1.TenantApplier{Namespaces: []string{"tenants-flux"}}})},
			reason: ReasonNotPermitted, field: "spec.applier.namespace"},
		{name: "two policies selecting one namespace", repo: tenantRepo(nil), policies: []scribev1.TenantPolicy{teamA, policy("other", scribev1.TenantPolicySpec{})},
			reason: ReasonPolicyConflict, field: "other, team-a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecideGrant(c.repo, c.policies, defaults)
			if c.reason != "" {
				if err == nil {
					t.Fatalf("want %s, got grant %+v", c.reason, got)
				}
				if r := reasonOf(err); r != c.reason {
					t.Errorf("reason %s, want %s (%v)", r, c.reason, err)
				}
				if !strings.Contains(err.Error(), c.field) {
					t.Errorf("error %q does not name %s", err, c.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalGrant(got, c.want) {
				t.Errorf("grant %+v, want %+v", got, c.want)
			}
		})
	}
}

func equalGrant(a, b Grant) bool {
	return a.Policy == b.Policy && a.ServiceAccountName == b.ServiceAccountName &&
		strings.Join(a.AllowedNamespaces, ",") == strings.Join(b.AllowedNamespaces, ",") &&
		len(a.ClusterResources) == len(b.ClusterResources) && len(a.CatalogSources) == len(b.CatalogSources)
}

// TestCheckBoundSendsASecretOnlyWhereItIsBound: a Secret in a tenant's
// namespace reaches only the URLs its annotation binds it to.
func TestCheckBoundSendsASecretOnlyWhereItIsBound(t *testing.T) {
	secret := func(ann string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "git"}, Data: map[string][]byte{"password": []byte("hunter2")}}
		if ann != "-" {
			s.Annotations = map[string]string{scribev1.AllowedURLsAnnotation: ann}
		}
		return s
	}
	cases := []struct {
		name, ann, url string
		ok             bool
	}{
		{"not bound at all", "-", "https://git.example.com/team-a/app.git", false},
		{"bound to the remote's owner", "https://git.example.com/team-a/", "https://git.example.com/team-a/app.git", true},
		{"one of several prefixes", "https://api.github.com/, https://git.example.com/team-a", "https://git.example.com/team-a/app.git", true},
		{"prefixes on lines", "https://api.github.com/\nhttps://git.example.com/team-a\n", "https://git.example.com/team-a/app.git", true},
		{"a URL the tenant chose", "https://git.example.com/team-a/", "https://attacker.example.net/team-a/app.git", false},
		{"a sibling owner", "https://git.example.com/team-a", "https://git.example.com/team-ab/app.git", false},
		{"empty annotation", "", "https://git.example.com/team-a/app.git", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckBound(secret(c.ann), c.url, "spec.git.secretRef")
			if c.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("want CredentialNotBound")
			}
			if reasonOf(err) != ReasonCredentialNotBound || !strings.Contains(err.Error(), "spec.git.secretRef") || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q: want CredentialNotBound naming the field and no secret data", err)
			}
		})
	}
}
