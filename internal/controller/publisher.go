// Package controller holds Scribe's reconcilers: they render custom
// resources, publish them through publish/, and move phases and canary
// steps only on health read back from the applier (controller/health).
package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/forge"
	"github.com/scribe-gitops/scribe/internal/publish/ocisink"
	"github.com/scribe-gitops/scribe/render"
)

// Reasons of Ready=False that the controller sets itself.
const (
	ReasonRepositoryNotFound = "RepositoryNotFound"
	ReasonRepositoryNotReady = "RepositoryNotReady"
	ReasonSecretNotFound     = "SecretNotFound"
	ReasonApplyPending       = "ApplyPending"
	ReasonApplyFailed        = "ApplyFailed"
	ReasonSucceeded          = "Succeeded"
	ReasonProgressing        = "Progressing"
	ReasonRolledBack         = "RolledBack"
	ReasonPruning            = "Pruning"

	// DefaultRepositoryName is used when a CR names no Repository.
	DefaultRepositoryName = "default"

	// RequestedAtAnnotation asks a Flux source to reconcile now.
	RequestedAtAnnotation = "reconcile.fluxcd.io/requestedAt"
	// ArgoRefreshAnnotation asks Argo CD to refresh an Application now.
	ArgoRefreshAnnotation = "argocd.argoproj.io/refresh"
)

// ArgoApplicationGVK is the Argo CD Application kind (no Go module here).
var argoApplicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// reasonError carries the condition reason for an error.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// reasonOf picks the condition reason of err.
func reasonOf(err error) string {
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	var ie *render.InputError
	if errors.As(err, &ie) {
		return scribev1.RenderFailedReason
	}
	return string(publish.ReasonOf(err))
}

// Publisher turns custom resources into commits: it resolves the
// Repository, renders, publishes, asks the applier to reconcile now and reads
// the applier's verdict back.
type Publisher struct {
	Client client.Client
	// Reader reads Secrets directly from the API server, so the controller
	// does not cache every Secret of the cluster.
	Reader client.Reader
	Engine *render.Engine
	Git    *publish.Git
	// GCPProject for gke and talos clusters.
	GCPProject string
	// Metrics, optional.
	Metrics *Metrics
	// NoNudge disables the reconcile request after a push.
	NoNudge bool
	// NoCrossNamespaceRefs refuses a Repository's spec.catalog in another
	// namespace than the Repository's.
	NoCrossNamespaceRefs bool

	catalogs catalogs

	mu        sync.Mutex
	oci       map[string]*ocisink.Sink
	committed map[string]time.Time // commit → when it was pushed, until read back
}

// Target is a resolved Repository: where a CR's bundle goes.
type Target struct {
	Repo    *scribev1.Repository
	Sink    publish.Sink
	GitOpts *publish.GitOptions
	OCI     *ocisink.Sink
	Input   render.Publish
	// Engine renders for this Repository; nil means the Publisher's
	// built-in one (see EngineFor for a Repository with a user catalog).
	Engine *render.Engine
}

// Target resolves the Repository ref names (or "default") in namespace.
// It fails with RepositoryNotFound or RepositoryNotReady.
func (p *Publisher) Target(ctx context.Context, namespace string, ref *scribev1.LocalObjectReference, requireReady bool) (*Target, error) {
	name := DefaultRepositoryName
	if ref != nil && ref.Name != "" {
		name = ref.Name
	}
	repo := &scribev1.Repository{}
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, repo); err != nil {
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
	return p.targetFor(ctx, repo)
}

func (p *Publisher) targetFor(ctx context.Context, repo *scribev1.Repository) (*Target, error) {
	t := &Target{Repo: repo}
	applier := repo.Spec.Applier
	t.Input = render.DefaultPublish()
	if applier.Kind != "" {
		t.Input.Applier.Kind = string(applier.Kind)
	}
	if applier.Namespace != "" {
		t.Input.Applier.Namespace = applier.Namespace
	}
	if applier.Name != "" {
		t.Input.Applier.Name = applier.Name
	}
	switch {
	case repo.Spec.Git != nil:
		g := repo.Spec.Git
		opts := publish.GitOptions{URL: g.URL, Branch: g.Branch, Path: g.Path, MessageTemplate: g.CommitTemplate, SyncIndex: true,
			Identity: fmt.Sprintf("%s/%s@%d", repo.Namespace, repo.Name, repo.Generation)}
		if opts.Branch == "" {
			opts.Branch = "main"
		}
		if opts.Path == "" {
			opts.Path = "."
		}
		if g.Author != nil {
			opts.Author = publish.Signature{Name: g.Author.Name, Email: g.Author.Email}
		}
		var data map[string][]byte
		if g.SecretRef != nil {
			s, rv, err := p.secretWithVersion(ctx, repo.Namespace, g.SecretRef.Name)
			if err != nil {
				return nil, err
			}
			data = s
			opts.Identity += " secret@" + rv
		}
		auth, err := publish.GitAuth(g.URL, data)
		if err != nil {
			return nil, &reasonError{reason: string(publish.ReasonAuthentication), err: err}
		}
		opts.Auth = auth
		if g.Signing != nil {
			s, rv, err := p.secretWithVersion(ctx, repo.Namespace, g.Signing.SecretRef.Name)
			if err != nil {
				return nil, err
			}
			opts.Identity += " signing@" + rv
			signer, err := publish.SignerFromSecret(g.Signing.Format, s)
			if err != nil {
				return nil, &reasonError{reason: "SigningKeyInvalid", err: err}
			}
			opts.Signer = signer
		}
		sink, err := p.Git.Sink(opts)
		if err != nil {
			return nil, &reasonError{reason: string(publish.ReasonInvalid), err: err}
		}
		t.Sink, t.GitOpts = sink, &opts
		t.Input.Path = opts.Path
		t.Input.Applier.SourceKind = "GitRepository"
		t.Input.Applier.RepoURL = g.URL
		t.Input.Applier.Revision = opts.Branch
	case repo.Spec.OCI != nil:
		o := repo.Spec.OCI
		var cfg []byte
		if o.SecretRef != nil {
			s, err := p.secret(ctx, repo.Namespace, o.SecretRef.Name)
			if err != nil {
				return nil, err
			}
			cfg = s[corev1.DockerConfigJsonKey]
		}
		sink, err := p.ociSink(ocisink.Options{URL: o.URL, DockerConfigJSON: cfg, SyncIndex: true, Insecure: strings.HasPrefix(strings.TrimPrefix(o.URL, "oci://"), "127.0.0.1") || strings.HasPrefix(strings.TrimPrefix(o.URL, "oci://"), "localhost")})
		if err != nil {
			return nil, &reasonError{reason: string(publish.ReasonInvalid), err: err}
		}
		t.Sink, t.OCI = sink, sink
		t.Input.Path = "."
		t.Input.Applier.SourceKind = "OCIRepository"
	default:
		return nil, &reasonError{reason: string(publish.ReasonInvalid), err: fmt.Errorf("repository %s/%s has neither git nor oci", repo.Namespace, repo.Name)}
	}
	return t, nil
}

func (p *Publisher) ociSink(opts ocisink.Options) (*ocisink.Sink, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := opts.URL + "\x00" + string(opts.DockerConfigJSON)
	if s, ok := p.oci[key]; ok {
		return s, nil
	}
	s, err := ocisink.New(opts)
	if err != nil {
		return nil, err
	}
	if p.oci == nil {
		p.oci = map[string]*ocisink.Sink{}
	}
	p.oci[key] = s
	return s, nil
}

func (p *Publisher) secret(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	data, _, err := p.secretWithVersion(ctx, namespace, name)
	return data, err
}

// secretWithVersion reads a Secret's data and resource version.
func (p *Publisher) secretWithVersion(ctx context.Context, namespace, name string) (map[string][]byte, string, error) {
	s := &corev1.Secret{}
	if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", &reasonError{reason: ReasonSecretNotFound, err: fmt.Errorf("secret %s/%s not found", namespace, name)}
		}
		return nil, "", fmt.Errorf("get secret %s/%s: %w", namespace, name, err)
	}
	return s.Data, s.Namespace + "/" + s.Name + "@" + s.ResourceVersion, nil
}

// Render renders obj for the target.
func (p *Publisher) Render(ctx context.Context, t *Target, obj map[string]any, resolved render.Resolved) (*render.Bundle, error) {
	if resolved.GCPProject == "" {
		resolved.GCPProject = p.GCPProject
	}
	kind, _ := obj["kind"].(string)
	ctx, span := otel.Tracer(tracerName).Start(ctx, "render", trace.WithAttributes(attribute.String("scribe.kind", kind)))
	defer span.End()
	start := time.Now()
	engine := t.Engine
	if engine == nil {
		engine = p.Engine
	}
	b, err := engine.Render(ctx, render.Input{Object: obj, Publish: t.Input, Resolved: resolved})
	p.Metrics.ObserveRender(kind, time.Since(start))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.String("scribe.digest", b.Digest))
	}
	return b, err
}

// tracerName names Scribe's spans; the provider is set up by `scribe
// controller` when OTEL_EXPORTER_OTLP_ENDPOINT is set (a no-op otherwise).
const tracerName = "github.com/scribe-gitops/scribe/internal/controller"

// Publish writes the change and asks the applier to reconcile now.
func (p *Publisher) Publish(ctx context.Context, t *Target, c publish.Change, sync scribev1.ObjectIdentity) (publish.Result, error) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "publish", trace.WithAttributes(
		attribute.String("scribe.object", publish.ObjectRef(c.Source)), attribute.Bool("scribe.delete", c.Delete)))
	defer span.End()
	start := time.Now()
	res, err := t.Sink.Publish(ctx, c)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return res, err
	}
	span.SetAttributes(attribute.String("scribe.revision", res.Revision), attribute.Bool("scribe.changed", res.Changed))
	sink := SinkGit
	if t.OCI != nil {
		sink = SinkOCI
	}
	p.Metrics.ObservePublish(c.Source.Kind, sink, time.Since(start), res.Changed)
	if res.Changed {
		p.markCommitted(res.Commit)
		p.Nudge(ctx, t, sync)
	}
	return res, nil
}

func (p *Publisher) markCommitted(commit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.committed == nil {
		p.committed = map[string]time.Time{}
	}
	if len(p.committed) > 10000 {
		p.committed = map[string]time.Time{} // bounded: old entries are never read back
	}
	p.committed[commit] = time.Now()
}

// ObserveApplied records the time from Scribe's push of commit to the
// applier reporting it applied and healthy, once per commit.
func (p *Publisher) ObserveApplied(kind, commit string) {
	p.mu.Lock()
	at, ok := p.committed[commit]
	delete(p.committed, commit)
	p.mu.Unlock()
	if ok {
		p.Metrics.ObserveCommitToApplied(kind, at, time.Now())
	}
}

// Nudge asks the applier to reconcile now instead of at its next poll: for
// Flux the source (GitRepository or OCIRepository) only, since annotating the
// Kustomization too races with the new artifact; for Argo CD the CR's
// Application. Failures are not fatal: the applier polls anyway.
func (p *Publisher) Nudge(ctx context.Context, t *Target, sync scribev1.ObjectIdentity) {
	if p.NoNudge {
		return
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	u := &unstructured.Unstructured{}
	var key types.NamespacedName
	var patch string
	switch t.Input.Applier.Kind {
	case "ArgoCD":
		u.SetGroupVersionKind(argoApplicationGVK)
		key = types.NamespacedName{Namespace: sync.Namespace, Name: sync.Name}
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:"normal"}}}`, ArgoRefreshAnnotation)
	default:
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: t.Input.Applier.SourceKind})
		key = types.NamespacedName{Namespace: t.Input.Applier.Namespace, Name: t.Input.Applier.Name}
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, RequestedAtAnnotation, now)
	}
	u.SetNamespace(key.Namespace)
	u.SetName(key.Name)
	_ = p.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// Applied reads the applier's verdict on commit for the CR whose sync
// object is sync.
func (p *Publisher) Applied(ctx context.Context, t *Target, src, sync scribev1.ObjectIdentity, commit string) (v health.Verdict, err error) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "read-back", trace.WithAttributes(
		attribute.String("scribe.object", publish.ObjectRef(src)), attribute.String("scribe.revision", commit)))
	defer func() {
		span.SetAttributes(attribute.String("scribe.verdict", string(v.State)), attribute.String("scribe.reason", v.Reason))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	anc := p.ancestry(t, src)
	if t.Input.Applier.Kind == "ArgoCD" {
		app := &unstructured.Unstructured{}
		app.SetGroupVersionKind(argoApplicationGVK)
		if err := p.Client.Get(ctx, types.NamespacedName{Namespace: sync.Namespace, Name: sync.Name}, app); err != nil {
			if apierrors.IsNotFound(err) {
				return health.Verdict{State: health.Pending, Reason: "NotObserved", Message: fmt.Sprintf("Application %s/%s does not exist yet", sync.Namespace, sync.Name)}, nil
			}
			return health.Verdict{}, err
		}
		return health.ArgoApplication(ctx, app, commit, anc)
	}
	ks := &kustomizev1.Kustomization{}
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: sync.Namespace, Name: sync.Name}, ks); err != nil {
		if apierrors.IsNotFound(err) {
			return health.Verdict{State: health.Pending, Reason: "NotObserved", Message: fmt.Sprintf("Kustomization %s/%s does not exist yet", sync.Namespace, sync.Name)}, nil
		}
		return health.Verdict{}, err
	}
	return health.FluxKustomization(ctx, ks, commit, anc)
}

// ancestry answers "does applied carry our commit's paths" from the Git cache.
func (p *Publisher) ancestry(t *Target, src scribev1.ObjectIdentity) health.Ancestry {
	return func(ctx context.Context, ours, applied string) (bool, error) {
		if t.GitOpts == nil {
			return ours == applied, nil
		}
		return p.Git.Descends(ctx, *t.GitOpts, src, ours, applied)
	}
}

// SyncGone reports whether the applier object of a deleted CR is gone, the
// applier having pruned it.
func (p *Publisher) SyncGone(ctx context.Context, t *Target, sync scribev1.ObjectIdentity) (bool, error) {
	var obj client.Object
	if t.Input.Applier.Kind == "ArgoCD" {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(argoApplicationGVK)
		obj = u
	} else {
		obj = &kustomizev1.Kustomization{}
	}
	err := p.Client.Get(ctx, types.NamespacedName{Namespace: sync.Namespace, Name: sync.Name}, obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// PullRequests reports whether changes to t go through pull requests.
func (t *Target) PullRequests() bool {
	return t.GitOpts != nil && t.Repo.Spec.Git.PullRequest != nil
}

// forgeFor builds the forge client of the Repository's pullRequest spec;
// the token is the "token" key of its Secret.
func (p *Publisher) forgeFor(ctx context.Context, t *Target) (publish.PullRequestOptions, error) {
	pr := t.Repo.Spec.Git.PullRequest
	s, err := p.secret(ctx, t.Repo.Namespace, pr.SecretRef.Name)
	if err != nil {
		return publish.PullRequestOptions{}, err
	}
	c, err := forge.New(forge.Options{Provider: pr.Provider, RepoURL: t.Repo.Spec.Git.URL, APIURL: pr.APIURL, Token: string(s["token"])})
	if err != nil {
		return publish.PullRequestOptions{}, &reasonError{reason: string(publish.ReasonInvalid), err: err}
	}
	return publish.PullRequestOptions{Base: pr.Base, Forge: c}, nil
}

// Propose opens or updates the pull request for the change.
func (p *Publisher) Propose(ctx context.Context, t *Target, c publish.Change, evidence string) (publish.Proposal, error) {
	opts, err := p.forgeFor(ctx, t)
	if err != nil {
		return publish.Proposal{}, err
	}
	return p.Git.Propose(ctx, *t.GitOpts, opts, c, evidence)
}

// ProposalStatus reads whether the pull request of src (head commit head)
// was merged, and nudges the applier when it was.
func (p *Publisher) ProposalStatus(ctx context.Context, t *Target, src scribev1.ObjectIdentity, head string) (publish.Proposal, error) {
	opts, err := p.forgeFor(ctx, t)
	if err != nil {
		return publish.Proposal{}, err
	}
	return p.Git.ProposalStatus(ctx, *t.GitOpts, opts, src, head)
}
