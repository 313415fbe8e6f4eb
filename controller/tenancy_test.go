package controller_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// tenantClient is a client acting as user, who may do anything with
// Scribe's kinds, Flux sources and ConfigMaps in namespace ns and nothing
// else (no Secrets, nothing cluster-scoped): a tenant as platform teams
// set them up.
func tenantClient(t *testing.T, f *fixture, user string) client.Client {
	t.Helper()
	ctx := f.ctx()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: f.ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"scribe.dev"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{APIGroups: []string{"source.toolkit.fluxcd.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: f.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := f.e.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(f.e.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: f.e.c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant creates the platform's TenantPolicy "tenant-<ns>" selecting the
// fixture's namespace with spec (its selector set here), deleted when the
// test ends.
func (f *fixture) grant(t *testing.T, spec scribev1.TenantPolicySpec) *scribev1.TenantPolicy {
	t.Helper()
	spec.NamespaceSelector = metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: f.ns}}
	policy := &scribev1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + f.ns}, Spec: spec}
	if err := f.e.c.Create(f.ctx(), policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.e.c.Delete(context.Background(), policy) })
	return policy
}

// credentialTrap is an HTTP server that records every credential sent to
// it: where a tenant would point Scribe to collect the platform's.
type credentialTrap struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newCredentialTrap(t *testing.T) *credentialTrap {
	tr := &credentialTrap{}
	tr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			tr.seen = append(tr.seen, a)
		}
		tr.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(tr.Close)
	return tr
}

func (tr *credentialTrap) credentials() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.seen...)
}

// waitRepositoryRefused waits for Repository name to be Ready=False and
// Stalled with reason, its message naming field.
func waitRepositoryRefused(t *testing.T, f *fixture, name, reason, field string) string {
	t.Helper()
	var msg string
	waitFor(t, "Repository "+name+" refused with "+reason, func() (bool, string) {
		r := &scribev1.Repository{}
		if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: name}, r); err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(r.Status.Conditions, scribev1.ReadyCondition)
		stalled := apimeta.FindStatusCondition(r.Status.Conditions, scribev1.StalledCondition)
		if ready == nil || stalled == nil {
			return false, "no Ready and Stalled conditions yet"
		}
		msg = ready.Message
		return ready.Status == metav1.ConditionFalse && ready.Reason == reason && stalled.Status == metav1.ConditionTrue &&
			strings.Contains(msg, field), ready.Reason + ": " + msg
	})
	return msg
}

// TestTenantCannotWidenItsRightsThroughItsRepository runs the real
// controller against Repositories a tenant writes (an impersonated user
// with rights on Scribe's kinds and Flux sources in its own namespace
// only): every field that would widen what the tenant's commits can do
// is refused with NotPermitted or CredentialNotBound naming the field,
// no credential reaches a URL the tenant chose, no other team's source
// is nudged, and nothing is committed for the tenant's Workload.
func TestTenantCannotWidenItsRightsThroughItsRepository(t *testing.T) {
	f := newFixture(t)
	ctx := f.ctx()
	tenant := tenantClient(t, f, "tenant-a")
	trap := newCredentialTrap(t)

	// The tenant cannot write the platform's policy.
	grab := &scribev1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: "grab-" + f.ns},
		Spec: scribev1.TenantPolicySpec{DestinationNamespaces: []string{"kube-system"}, ClusterResources: []scribev1.GroupKind{{Group: "*", Kind: "*"}}}}
	if err := tenant.Create(ctx, grab); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant created a TenantPolicy: %v; want Forbidden", err)
	}

	// The platform placed credentials in the tenant's namespace, bound to
	// the team's own remote and forge; and another team's source lives in
	// flux-system.
	platform := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-push", Namespace: f.ns,
			Annotations: map[string]string{scribev1.AllowedURLsAnnotation: f.url}},
			Data: map[string][]byte{"username": []byte("team-a"), "password": []byte("platform-git-password")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge", Namespace: f.ns,
			Annotations: map[string]string{scribev1.AllowedURLsAnnotation: "https://api.github.com/"}},
			Data: map[string][]byte{"token": []byte("platform-forge-token")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unbound", Namespace: f.ns},
			Data: map[string][]byte{"username": []byte("ops"), "password": []byte("platform-other-password")}},
		&sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-b-" + f.ns, Namespace: "flux-system"},
			Spec: sourcev1.GitRepositorySpec{URL: "https://git.example.com/team-b/private.git", Interval: metav1.Duration{Duration: time.Minute}}},
	}
	for _, o := range platform {
		if err := f.e.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := tenant.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "git-push"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant read the platform's Secret: %v; want Forbidden", err)
	}

	repo := func(name string, mut func(*scribev1.RepositorySpec)) *scribev1.Repository {
		r := f.repo.DeepCopy()
		r.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: f.ns}
		mut(&r.Spec)
		return r
	}
	cases := []struct {
		repo   *scribev1.Repository
		reason string
		field  string
	}{
		{repo("wide", func(s *scribev1.RepositorySpec) { s.AllowedNamespaces = []string{"kube-system"} }),
			controller.ReasonNotPermitted, "spec.allowedNamespaces[0]"},
		{repo("admin-account", func(s *scribev1.RepositorySpec) { s.Applier.ServiceAccountName = "kustomize-controller" }),
			controller.ReasonNotPermitted, "spec.applier.serviceAccountName"},
		{repo("kube-system-sync", func(s *scribev1.RepositorySpec) { s.Applier.Namespace = "kube-system" }),
			controller.ReasonNotPermitted, "spec.applier.namespace"},
		{repo("other-source", func(s *scribev1.RepositorySpec) { s.Applier.Name = "team-b-" + f.ns }),
			controller.ReasonNotPermitted, "spec.applier.name"},
		{repo("other-catalog", func(s *scribev1.RepositorySpec) {
			s.Catalog = &scribev1.CatalogSource{Kind: "GitRepository", Namespace: "flux-system", Name: "team-b-" + f.ns}
		}), controller.ReasonNotPermitted, "spec.catalog"},
		{repo("steal-git", func(s *scribev1.RepositorySpec) {
			s.Git.URL = trap.URL + "/team-a/app.git"
			s.Git.SecretRef = &scribev1.LocalObjectReference{Name: "git-push"}
		}), controller.ReasonCredentialNotBound, "spec.git.secretRef"},
		{repo("unbound-secret", func(s *scribev1.RepositorySpec) {
			s.Git.SecretRef = &scribev1.LocalObjectReference{Name: "unbound"}
		}), controller.ReasonCredentialNotBound, "spec.git.secretRef"},
		{repo("steal-signing", func(s *scribev1.RepositorySpec) {
			s.Git.URL = trap.URL + "/team-a/app.git"
			s.Git.Signing = &scribev1.CommitSigning{Format: "ssh", SecretRef: scribev1.LocalObjectReference{Name: "git-push"}}
		}), controller.ReasonCredentialNotBound, "spec.git.signing.secretRef"},
	}
	for _, c := range cases {
		if err := tenant.Create(ctx, c.repo); err != nil {
			t.Fatalf("the tenant creates Repository %s: %v", c.repo.Name, err)
		}
	}
	// A Repository that is otherwise the team's own, whose pull requests
	// go to a forge API the tenant chose.
	forgeRepo := repo("steal-forge", func(s *scribev1.RepositorySpec) {
		s.Git.PullRequest = &scribev1.PullRequestSpec{Provider: "github", APIURL: trap.URL + "/", SecretRef: scribev1.LocalObjectReference{Name: "forge"}}
	})
	if err := tenant.Create(ctx, forgeRepo); err != nil {
		t.Fatal(err)
	}
	// A Workload on the widened Repository, and one promoted by pull
	// request through that forge.
	w := workload(f.ns, "v1")
	w.Spec.RepositoryRef = &scribev1.LocalObjectReference{Name: "wide"}
	prw := workload(f.ns, "v1")
	prw.Name = "web-pr"
	prw.Spec.RepositoryRef = &scribev1.LocalObjectReference{Name: "steal-forge"}
	prw.Spec.Rollout.Promotion = scribev1.PromotionPullRequest
	for _, o := range []*scribev1.Workload{w, prw} {
		if err := tenant.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, f.e, f.ns)

	for _, c := range cases {
		msg := waitRepositoryRefused(t, f, c.repo.Name, c.reason, c.field)
		for _, secret := range []string{"platform-git-password", "platform-forge-token", "platform-other-password"} {
			if strings.Contains(msg, secret) {
				t.Errorf("Repository %s: the message shows a credential: %s", c.repo.Name, msg)
			}
		}
	}
	waitFor(t, "the Workload waiting on its refused Repository", func() (bool, string) {
		got := &scribev1.Workload{}
		if err := f.e.c.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(got.Status.Conditions, scribev1.ReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == controller.ReasonRepositoryNotReady, describe(got)
	})
	waitFor(t, "the pull-request Workload refused its forge token for the tenant's API URL", func() (bool, string) {
		got := &scribev1.Workload{}
		if err := f.e.c.Get(ctx, client.ObjectKeyFromObject(prw), got); err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(got.Status.Conditions, scribev1.ReadyCondition)
		return ready != nil && ready.Reason == controller.ReasonCredentialNotBound &&
			strings.Contains(ready.Message, "spec.git.pullRequest.secretRef") && !strings.Contains(ready.Message, "platform-forge-token"), describe(got)
	})
	if commits := f.scribeCommits(t, "Workload/"+f.ns+"/web"); len(commits) != 0 {
		t.Errorf("the Workload on a refused Repository was committed: %v", commits)
	}
	if seen := trap.credentials(); len(seen) != 0 {
		t.Errorf("the tenant's URL received %d credentials", len(seen))
	}
	other := &sourcev1.GitRepository{}
	if err := f.e.c.Get(ctx, types.NamespacedName{Namespace: "flux-system", Name: "team-b-" + f.ns}, other); err != nil {
		t.Fatal(err)
	}
	if _, nudged := other.Annotations[controller.RequestedAtAnnotation]; nudged {
		t.Errorf("another team's source was nudged: %v", other.Annotations)
	}
}

// TestTenantPolicyGrantsWhatTheRepositoryNarrows: once the platform's
// TenantPolicy grants a destination and an account, the same Repository
// is Ready, and a policy change reaches it without a change of its own.
func TestTenantPolicyGrantsWhatTheRepositoryNarrows(t *testing.T) {
	f := newFixture(t)
	ctx := f.ctx()
	f.repo.Spec.AllowedNamespaces = []string{"team-a-db"}
	f.repo.Spec.Applier.ServiceAccountName = "team-a-applier"
	if err := f.e.c.Create(ctx, f.repo); err != nil {
		t.Fatal(err)
	}
	startController(t, f.e, f.ns)
	waitRepositoryRefused(t, f, "default", controller.ReasonNotPermitted, "spec.allowedNamespaces[0]")

	policy := f.grant(t, scribev1.TenantPolicySpec{
		DestinationNamespaces: []string{"team-a-db", "team-a-cache"},
		Applier:               &scribev1.TenantApplier{ServiceAccountName: "team-a-applier"},
	})
	waitFor(t, "the Repository Ready once the policy grants what it asks", func() (bool, string) {
		r := &scribev1.Repository{}
		if err := f.e.c.Get(ctx, client.ObjectKeyFromObject(f.repo), r); err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(r.Status.Conditions, scribev1.ReadyCondition)
		if ready == nil {
			return false, "no Ready condition"
		}
		return ready.Status == metav1.ConditionTrue, ready.Reason + ": " + ready.Message
	})

	// A second policy selecting the namespace is a conflict, not a union.
	second := policy.DeepCopy()
	second.ObjectMeta = metav1.ObjectMeta{Name: "tenant-" + f.ns + "-again"}
	second.Spec.DestinationNamespaces = []string{"kube-system"}
	if err := f.e.c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.e.c.Delete(context.Background(), second) })
	waitRepositoryRefused(t, f, "default", controller.ReasonPolicyConflict, second.Name)
}
