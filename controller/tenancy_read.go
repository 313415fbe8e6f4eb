package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
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

// RemoteURLsAnnotation, on an applier source (a Flux GitRepository or
// OCIRepository, an Argo CD Application), lists the remotes Scribe pushes
// to (a Repository's spec.git.url or spec.oci.url, separated by commas or
// new lines) that the source fetches by another URL: an ssh URL for an
// https remote, an in-cluster Service's name. Whoever writes the source
// (the platform, in flux-system or argocd) vouches that they are the same
// repository.
const RemoteURLsAnnotation = "scribe.dev/remote-urls"

// checkOwnSource refuses a Repository whose spec.applier.name names a
// source that does not fetch the Repository's own repository: the same
// scheme, host, port and path (credurl.SameRemote), or a remote the
// source's RemoteURLsAnnotation lists. Scribe nudges that object after
// every push and copies how it reaches the remote (its URL and
// secretRef) into each custom resource's own GitRepository, so another
// team's source (or the platform's root one), even of a repository with
// the same path on another server, would make Flux fetch that team's
// repository with that team's credentials for the tenant. A missing
// source is left to the applier (nothing to nudge or copy; the Flux Git
// case has failed with SourceNotFound already).
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
		// The typed GitRepository fluxSource has read, from the cache.
		src := &sourcev1.GitRepository{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: in.Namespace, Name: in.Name}, src); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("get Flux GitRepository %s/%s: %w", in.Namespace, in.Name, err)
		}
		return ownSource(repo, "Flux GitRepository", in.Namespace, in.Name, []string{src.Spec.URL}, remoteURLs(src.Annotations), remote)
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
	return ownSource(repo, what, in.Namespace, in.Name, urls, remoteURLs(u.GetAnnotations()), remote)
}

// remoteURLs reads a source's RemoteURLsAnnotation.
func remoteURLs(annotations map[string]string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(annotations[RemoteURLsAnnotation], func(r rune) bool { return r == ',' || r == '\n' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ownSource decides whether a source fetching urls, and vouching for the
// remotes aliases (RemoteURLsAnnotation), is the Repository's own: one of
// them reaches the remote (same scheme, host, port and path).
func ownSource(repo *scribev1.Repository, what, namespace, name string, urls, aliases []string, remote string) error {
	for _, u := range append(slices.Clone(urls), aliases...) {
		if credurl.SameRemote(u, remote) {
			return nil
		}
	}
	shown := redactAll(urls)
	return &reasonError{reason: ReasonNotPermitted, err: fmt.Errorf(
		"repository %s/%s: spec.applier.name: %s %s/%s fetches %s, not this Repository's remote %s (the same scheme, host, port and path): a Repository may name only the applier source of its own remote; a source that reaches it by another URL lists it in its %s annotation",
		repo.Namespace, repo.Name, what, namespace, name, orNone(shown), credurl.Redact(remote), RemoteURLsAnnotation)}
}
