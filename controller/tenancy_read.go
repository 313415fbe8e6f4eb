package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/credurl"
	"github.com/scribe-gitops/scribe/render"
)

// +kubebuilder:rbac:groups=scribe.dev,resources=tenantpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// grant reads the TenantPolicies that select repo's namespace and decides
// what repo may use (DecideGrant). A policy whose selector cannot be
// evaluated fails every namespace it may select closed (SelectPolicies):
// neither the defaults nor a hidden conflict. The Namespace is read as
// metadata only, from the same informer the tenancy watch uses.
func (r *Resolver) grant(ctx context.Context, repo *scribev1.Repository) (Grant, error) {
	ns := namespaceMetadata()
	// A namespace already gone (the Repository is being deleted with it)
	// has no labels: only a policy that selects every namespace applies.
	if err := r.Client.Get(ctx, types.NamespacedName{Name: repo.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
		return Grant{}, fmt.Errorf("get namespace %s for its TenantPolicy: %w", repo.Namespace, err)
	}
	policies := &scribev1.TenantPolicyList{}
	if err := r.Client.List(ctx, policies); err != nil {
		return Grant{}, fmt.Errorf("list TenantPolicies: %w", err)
	}
	selected, err := SelectPolicies(repo.Namespace, ns.Labels, policies.Items)
	if err != nil {
		return Grant{}, err
	}
	return DecideGrant(repo, selected, r.applierNamespaces())
}

// applierNamespaces are the namespaces sync objects may live in when no
// TenantPolicy says: the controller's --applier-namespaces.
func (r *Resolver) applierNamespaces() []string {
	if r.ApplierNamespaces != nil {
		return r.ApplierNamespaces
	}
	return DefaultApplierNamespaces()
}

// DefaultApplierNamespaces are where Flux and Argo CD install themselves.
func DefaultApplierNamespaces() []string { return []string{"flux-system", "argocd"} }

// checkOwnSource refuses a Repository whose spec.applier.name names a
// source that does not fetch the Repository's own repository (the same
// path; the host may differ, as a source often reaches the server by an
// in-cluster name): Scribe nudges
// that object after every push and copies how it reaches the remote (its
// URL and secretRef) into each custom resource's own GitRepository, so
// another team's source (or the platform's root one) would make Flux
// fetch that team's repository with that team's credentials for the
// tenant. The GitRepository of the Flux Git case is read by fluxSource;
// this reads the OCIRepository or the root Application. A missing one
// is left to the applier (nothing to nudge or copy).
func (r *Resolver) checkOwnSource(ctx context.Context, repo *scribev1.Repository, in render.Applier, remote string) error {
	u := &unstructured.Unstructured{}
	var paths [][]string
	var what string
	switch {
	case in.Kind == scribev1.ApplierArgoCD:
		u.SetGroupVersionKind(argoApplicationGVK())
		paths = [][]string{{"spec", "source", "repoURL"}}
		what = "Argo CD Application"
	case in.SourceKind == "OCIRepository":
		u.SetGroupVersionKind(fluxSource("OCIRepository", "", "").GroupVersionKind())
		paths = [][]string{{"spec", "url"}}
		what = "Flux OCIRepository"
	default:
		return nil
	}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: in.Namespace, Name: in.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get %s %s/%s: %w", what, in.Namespace, in.Name, err)
	}
	var urls []string
	for _, p := range paths {
		if s, ok, _ := unstructured.NestedString(u.Object, p...); ok {
			urls = append(urls, s)
		}
	}
	if in.Kind == scribev1.ApplierArgoCD {
		sources, _, _ := unstructured.NestedSlice(u.Object, "spec", "sources")
		for _, s := range sources {
			if m, ok := s.(map[string]any); ok {
				if url, ok := m["repoURL"].(string); ok {
					urls = append(urls, url)
				}
			}
		}
	}
	return ownSource(repo, what, in.Namespace, in.Name, urls, remote)
}

// ownSource decides whether a source fetching urls is the Repository's
// own (one of them names the remote).
func ownSource(repo *scribev1.Repository, what, namespace, name string, urls []string, remote string) error {
	for _, u := range urls {
		if credurl.SameRepository(u, remote) {
			return nil
		}
	}
	shown := redactAll(urls)
	return &reasonError{reason: ReasonNotPermitted, err: fmt.Errorf(
		"repository %s/%s: spec.applier.name: %s %s/%s fetches %s, not this Repository's remote %s: a Repository may name only the applier source of its own remote",
		repo.Namespace, repo.Name, what, namespace, name, orNone(shown), credurl.Redact(remote))}
}
