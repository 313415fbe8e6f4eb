package controller

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/credurl"
	"github.com/scribe-gitops/scribe/internal/egress"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/ocisink"
	"github.com/scribe-gitops/scribe/render"
)

// DefaultRepositoryName is used when a CR names no Repository.
const DefaultRepositoryName = "default"

// Target is a resolved Repository: where a CR's bundle goes and who
// applies it.
type Target struct {
	// NoNudge says the applier's source is not the Repository's own (a
	// removal resolved despite it): it is never asked to reconcile.
	NoNudge bool
	Repo    *scribev1.Repository
	Sink    publish.Sink
	GitOpts *gitsink.Options
	OCI     *ocisink.Sink
	// Artifacts, with spec.git.artifacts, is where each custom resource's
	// own artifact is pushed after its commit (artifacts.go).
	Artifacts *artifactTarget
	// Applier applies what is published (Flux or Argo CD).
	Applier Applier
	// Input is render's publish input: the path and the applier's fields.
	Input render.Publish
	// Engine renders for this Repository; nil means the Publisher's
	// built-in one (see EngineFor for a Repository with a user catalog).
	Engine *render.Engine
	// Grant is what the Repository's namespace's TenantPolicy lets it use.
	Grant Grant
	// CatalogSource is where the Repository's catalog is published
	// (spec.catalog and its Flux source), set by EngineFor; nil without
	// spec.catalog. Built-in entries' manifests are delivered from it.
	CatalogSource *render.CatalogSource
	// CatalogArtifact names the user catalog's engine, set by EngineFor:
	// the Flux artifact's digest and the path in it ("" without
	// spec.catalog). The render memo's key holds it.
	CatalogArtifact string
}

// PullRequests reports whether changes to t go through pull requests.
func (t *Target) PullRequests() bool {
	return t.GitOpts != nil && t.Repo.Spec.Git.PullRequest != nil
}

// Resolver turns a Repository into a Target: it reads the Repository and
// its Secrets, builds the Git or OCI sink, and picks the Applier.
type Resolver struct {
	// Client reads Repositories (from the cache) and is the appliers'
	// client.
	Client client.Client
	// Reader reads Secrets directly from the API server, so the controller
	// does not cache every Secret of the cluster.
	Reader client.Reader
	// Git builds Git sinks over the shared cache.
	Git *gitsink.Git
	// Watched are the namespaces the manager's cache holds
	// (--watch-namespaces); empty means all.
	Watched []string
	// ApplierNamespaces are where a Repository of a namespace that no
	// TenantPolicy selects may put its sync objects (--applier-namespaces);
	// nil means DefaultApplierNamespaces.
	ApplierNamespaces []string
	// Egress is where a Repository's registry (spec.oci, spec.git.artifacts)
	// and forge API (spec.git.pullRequest) may be reached; the zero Policy
	// reaches public addresses only.
	Egress egress.Policy

	mu  sync.Mutex
	oci map[string]*ocisink.Sink // by URL and credentials
	// transport is Egress's transport, made once (tenantTransport).
	transport http.RoundTripper
}

// tenantTransport is the transport of the requests to a registry or a
// forge a Repository names: connections only where Egress allows.
func (r *Resolver) tenantTransport() http.RoundTripper {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.transport == nil {
		r.transport = r.Egress.Transport()
	}
	return r.transport
}

// forgeTimeout bounds one exchange with a forge's API.
const forgeTimeout = 30 * time.Second

// ForgeHTTPClient is the client of the forge API a Repository names.
func (r *Resolver) ForgeHTTPClient() *http.Client {
	return &http.Client{Transport: r.tenantTransport(), Timeout: forgeTimeout}
}

// Target resolves the Repository ref names (or "default") in namespace.
// It fails with RepositoryNotFound, or RepositoryNotReady when
// requireReady and the Repository's access check has not passed at its
// generation.
func (r *Resolver) Target(ctx context.Context, namespace string, ref *scribev1.LocalObjectReference, requireReady bool) (*Target, error) {
	return r.target(ctx, namespace, ref, requireReady, false)
}

// TargetForRemoval resolves the Repository ref names (or "default") in
// namespace for a removal: as Target without requireReady, except that a
// tenancy refusal (NotPermitted, PolicyConflict) does not stop it
// (forRemoval).
func (r *Resolver) TargetForRemoval(ctx context.Context, namespace string, ref *scribev1.LocalObjectReference) (*Target, error) {
	return r.target(ctx, namespace, ref, false, true)
}

func (r *Resolver) target(ctx context.Context, namespace string, ref *scribev1.LocalObjectReference, requireReady, removal bool) (*Target, error) {
	name := DefaultRepositoryName
	if ref != nil && ref.Name != "" {
		name = ref.Name
	}
	repo := &scribev1.Repository{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, repo); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &reasonError{reason: ReasonRepositoryNotFound, err: fmt.Errorf("repository %s/%s not found", namespace, name)}
		}
		return nil, fmt.Errorf("get repository %s/%s: %w", namespace, name, err)
	}
	if requireReady {
		ready := false
		msg := "not checked yet"
		for _, c := range repo.Status.Conditions {
			if c.Type == scribev1.ReadyCondition {
				ready = c.Status == metav1.ConditionTrue && repo.Status.ObservedGeneration == repo.Generation
				msg = c.Message
			}
		}
		if !ready {
			return nil, &reasonError{reason: ReasonRepositoryNotReady, err: fmt.Errorf("repository %s/%s is not ready: %s", namespace, name, msg)}
		}
	}
	return r.forRepo(ctx, repo, removal)
}

// For resolves repo, whatever its status.
func (r *Resolver) For(ctx context.Context, repo *scribev1.Repository) (*Target, error) {
	return r.forRepo(ctx, repo, false)
}

// forRepo resolves repo; removal says the target only takes a custom
// resource's files away (see grantFor).
func (r *Resolver) forRepo(ctx context.Context, repo *scribev1.Repository, removal bool) (*Target, error) {
	t := &Target{Repo: repo}
	in := render.DefaultPublish()
	if k := repo.Spec.Applier.Kind; k != "" {
		in.Applier.Kind = k
	}
	if ns := repo.Spec.Applier.Namespace; ns != "" {
		in.Applier.Namespace = ns
	}
	if name := repo.Spec.Applier.Name; name != "" {
		in.Applier.Name = name
	}
	// Scribe reads the applier's objects there (its source, the per-CR
	// Kustomizations, the root Application) through the cache.
	if len(r.Watched) > 0 && !slices.Contains(r.Watched, in.Applier.Namespace) {
		return nil, &reasonError{reason: ReasonNamespaceNotWatched, err: fmt.Errorf(
			"spec.applier.namespace %q is not among the namespaces this controller watches (--watch-namespaces %s): add it, since Scribe reads the applier's objects there",
			in.Applier.Namespace, strings.Join(r.Watched, ","))}
	}
	// What widens a tenant's commits comes from the platform's
	// TenantPolicy, narrowed by the Repository.
	grant, err := grantFor(removal, func() (Grant, error) { return r.grant(ctx, repo) })
	if err != nil {
		return nil, err
	}
	t.Grant = grant
	// Flux's multi-tenancy lockdown: the rendered Kustomizations and
	// HelmReleases apply as the policy's service account (Argo CD has
	// none).
	if in.Applier.Kind == scribev1.ApplierFlux {
		in.Applier.ServiceAccountName = grant.ServiceAccountName
	}
	in.AllowedNamespaces = grant.AllowedNamespaces
	in.ClusterResources = grant.ClusterResources
	in.SourceRepos = grant.SourceRepos
	switch {
	case repo.Spec.Git != nil:
		err = r.gitSink(ctx, repo, t, &in)
	case repo.Spec.OCI != nil:
		err = r.ociSinkFor(ctx, repo, t, &in)
	default:
		err = &reasonError{reason: string(publish.ReasonInvalid), err: fmt.Errorf("repository %s/%s has neither git nor oci", repo.Namespace, repo.Name)}
	}
	if err != nil {
		return nil, err
	}
	remote := ""
	switch {
	case repo.Spec.Git != nil:
		remote = repo.Spec.Git.URL
	case repo.Spec.OCI != nil:
		remote = repo.Spec.OCI.URL
	}
	if err := r.checkOwnSource(ctx, repo, in.Applier, remote); err != nil {
		// A removal still takes the files away, and asks nothing of a
		// source that is not the Repository's own.
		if !removal || !isTenancyRefusal(err) {
			return nil, err
		}
		t.NoNudge = true
	}
	t.Input = in
	t.Applier = newApplier(r.Client, in.Applier)
	return t, nil
}

// gitSink builds the Git sink of repo into t and fills in the Git fields
// of render's input.
func (r *Resolver) gitSink(ctx context.Context, repo *scribev1.Repository, t *Target, in *render.Publish) error {
	g := repo.Spec.Git
	// The CRD refuses credentials in the URL; one stored before it did is
	// Invalid here, before a Secret is read or anything is rendered.
	if err := credurl.Check(g.URL); err != nil {
		return &reasonError{reason: string(publish.ReasonInvalid), err: fmt.Errorf("repository %s/%s: spec.git.url: %w: put them in spec.git.secretRef", repo.Namespace, repo.Name, err)}
	}
	opts := gitsink.Options{URL: g.URL, Branch: g.Branch, Path: g.Path, MessageTemplate: g.CommitTemplate, MessageTemplateName: "spec.git.commitTemplate", SyncIndex: true,
		Identity: fmt.Sprintf("%s/%s@%d", repo.Namespace, repo.Name, repo.Generation)}
	if opts.Branch == "" {
		opts.Branch = "main"
	}
	if opts.Path == "" {
		opts.Path = "."
	}
	if g.Author != nil {
		opts.Author = gitsink.Signature{Name: g.Author.Name, Email: g.Author.Email}
	}
	var data map[string][]byte
	if g.SecretRef != nil {
		s, rv, err := r.secretWithVersion(ctx, repo.Namespace, g.SecretRef.Name, g.URL, "spec.git.secretRef")
		if err != nil {
			return err
		}
		data = s
		opts.Identity += " secret@" + rv
	}
	auth, err := gitsink.AuthFromSecret(g.URL, data)
	if err != nil {
		return &reasonError{reason: string(publish.ReasonAuthentication), err: err}
	}
	opts.Auth = auth
	if g.Signing != nil {
		s, rv, err := r.secretWithVersion(ctx, repo.Namespace, g.Signing.SecretRef.Name, g.URL, "spec.git.signing.secretRef")
		if err != nil {
			return err
		}
		opts.Identity += " signing@" + rv
		signer, err := gitsink.SignerFromSecret(g.Signing.Format, s)
		if err != nil {
			return &reasonError{reason: ReasonSigningKeyInvalid, err: err}
		}
		opts.Signer = signer
	}
	sink, err := r.Git.Sink(opts)
	if err != nil {
		return &reasonError{reason: string(publish.ReasonInvalid), err: err}
	}
	t.Sink, t.GitOpts = sink, &opts
	in.Path = opts.Path
	in.Applier.SourceKind = "GitRepository"
	in.Applier.RepoURL = g.URL
	in.Applier.Revision = opts.Branch
	if in.Applier.Kind == scribev1.ApplierFlux {
		fs, err := r.fluxSource(ctx, in.Applier.Namespace, in.Applier.Name)
		if err != nil {
			return err
		}
		// Whether it fetches the Repository's own remote: checkOwnSource.
		in.Applier.FluxSource = fs
	}
	return r.artifactsFor(ctx, repo, t, in)
}

// fluxSource reads the Flux GitRepository a Repository names: each custom
// resource's own GitRepository copies how Flux reaches the repository
// (URL, credentials, proxy, provider, timeout) from it. A missing one
// fails with SourceNotFound: Flux could apply nothing without it.
func (r *Resolver) fluxSource(ctx context.Context, namespace, name string) (*render.FluxGitSource, error) {
	src := &sourcev1.GitRepository{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, src); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &reasonError{reason: ReasonSourceNotFound, err: fmt.Errorf("flux GitRepository %s/%s (spec.applier.name) not found: Flux reaches the repository through it", namespace, name)}
		}
		return nil, fmt.Errorf("get flux GitRepository %s/%s: %w", namespace, name, err)
	}
	fs := &render.FluxGitSource{URL: src.Spec.URL, Provider: src.Spec.Provider}
	if src.Spec.SecretRef != nil {
		fs.SecretRef = src.Spec.SecretRef.Name
	}
	if src.Spec.ProxySecretRef != nil {
		fs.ProxySecretRef = src.Spec.ProxySecretRef.Name
	}
	if src.Spec.Timeout != nil {
		fs.Timeout = src.Spec.Timeout.Duration.String()
	}
	return fs, nil
}

// ociSinkFor builds (or reuses) the OCI sink of repo into t and fills in
// the OCI fields of render's input.
func (r *Resolver) ociSinkFor(ctx context.Context, repo *scribev1.Repository, t *Target, in *render.Publish) error {
	o := repo.Spec.OCI
	if in.Applier.Kind == scribev1.ApplierArgoCD {
		// Scribe's OCI artifact is Flux's (a tarball layer of media type
		// application/vnd.cncf.flux.content.v1.tar+gzip), which Argo CD's OCI
		// sources do not read.
		return &reasonError{reason: string(publish.ReasonInvalid), err: fmt.Errorf(
			"repository %s/%s: spec.oci cannot be applied by spec.applier.kind ArgoCD: Scribe's OCI artifact is a Flux artifact; use spec.git with Argo CD, or spec.applier.kind Flux with spec.oci",
			repo.Namespace, repo.Name)}
	}
	var cfg []byte
	if o.SecretRef != nil {
		s, err := r.Secret(ctx, repo.Namespace, o.SecretRef.Name, o.URL, "spec.oci.secretRef")
		if err != nil {
			return err
		}
		cfg = s[corev1.DockerConfigJsonKey]
	}
	sink, err := r.ociSink(ocisink.Options{URL: o.URL, DockerConfigJSON: cfg, SyncIndex: true, Insecure: loopbackRegistry(o.URL), Transport: r.tenantTransport()})
	if err != nil {
		return &reasonError{reason: string(publish.ReasonInvalid), err: err}
	}
	t.Sink, t.OCI = sink, sink
	in.Path = "."
	in.Applier.SourceKind = "OCIRepository"
	return nil
}

// loopbackRegistry reports whether an oci:// URL names a registry on
// loopback (exactly localhost, or a loopback IP address, with or without a
// port): the only one Scribe (and, for spec.git.artifacts, Flux) may reach
// over plain HTTP, so that a tenant cannot send a registry credential in
// the clear. A name that merely starts like one (127.0.0.1.attacker.example,
// localhost.attacker.example) is not loopback.
func loopbackRegistry(ociURL string) bool {
	rest, ok := strings.CutPrefix(ociURL, "oci://")
	if !ok {
		return false
	}
	host, _, _ := strings.Cut(rest, "/")
	return loopbackHost(host)
}

// loopbackHost reports whether hostport (host or host:port, an IPv6
// address in brackets) is exactly localhost or a loopback IP address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		host = hostport[1 : len(hostport)-1]
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// ociSink returns the sink of opts, built once per URL and credentials.
func (r *Resolver) ociSink(opts ocisink.Options) (*ocisink.Sink, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := opts.URL + "\x00" + string(opts.DockerConfigJSON)
	if s, ok := r.oci[key]; ok {
		return s, nil
	}
	s, err := ocisink.New(opts)
	if err != nil {
		return nil, fmt.Errorf("oci sink %s: %w", credurl.Redact(opts.URL), err)
	}
	if r.oci == nil {
		r.oci = map[string]*ocisink.Sink{}
	}
	r.oci[key] = s
	return s, nil
}

// Secret reads the data of a Secret bound to url (CheckBound), which the
// Repository field names; a missing Secret fails with SecretNotFound, an
// unbound one with CredentialNotBound.
func (r *Resolver) Secret(ctx context.Context, namespace, name, url, field string) (map[string][]byte, error) {
	data, _, err := r.secretWithVersion(ctx, namespace, name, url, field)
	return data, err
}

// secretWithVersion is Secret, also returning the resource version.
func (r *Resolver) secretWithVersion(ctx context.Context, namespace, name, url, field string) (map[string][]byte, string, error) {
	s := &corev1.Secret{}
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", &reasonError{reason: ReasonSecretNotFound, err: fmt.Errorf("secret %s/%s not found", namespace, name)}
		}
		return nil, "", fmt.Errorf("get secret %s/%s: %w", namespace, name, err)
	}
	if err := CheckBound(s, url, field); err != nil {
		return nil, "", err
	}
	return s.Data, s.Namespace + "/" + s.Name + "@" + s.ResourceVersion, nil
}
