// Package controller holds Scribe's reconcilers: they render custom
// resources, publish them through internal/publish, and move phases and
// canary steps only on health read back from the applier
// (internal/health).
//
// Every reconciler has one shape (reconcile.go) and answers errors by one
// table (errors.go). A Resolver turns a custom resource's Repository into
// a Target, which carries its sink and its Applier (Flux or Argo CD); the
// Publisher renders, publishes, nudges and reads back through them.
package controller

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/forge"
	"github.com/scribe-gitops/scribe/render"
)

// Publisher turns custom resources into commits: it renders (with the
// Repository's catalog), publishes to the Target's sink, asks the Target's
// Applier to reconcile now, reads the applier's verdict back, runs pull
// requests and records the metrics of each. Its Resolver finds the Target.
type Publisher struct {
	Client client.Client
	// Reader reads objects directly from the API server, so the controller
	// does not cache every Secret of the cluster.
	Reader client.Reader
	// Resolver finds a CR's Repository and makes it a Target.
	Resolver *Resolver
	// Engine is the built-in render engine, shared by every render: its
	// memory does not grow with the renders it makes.
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
	memo     renderMemo
	// renderSlots is a semaphore: one slot per render allowed at once
	// (see Options.MaxRenders); nil means no bound.
	renderSlots chan struct{}

	// order keeps each custom resource's commits before its removal
	// (removals.go).
	order publishOrder

	mu        sync.Mutex
	committed map[string]time.Time // commit → when it was pushed, until read back
	// rootNudged is, per Repository, the commit its root applier object
	// was last asked to reconcile at.
	rootNudged map[string]string
}

// Target resolves the Repository ref names (or "default") in namespace;
// see Resolver.Target.
func (p *Publisher) Target(ctx context.Context, namespace string, ref *scribev1.LocalObjectReference, requireReady bool) (*Target, error) {
	return p.Resolver.Target(ctx, namespace, ref, requireReady)
}

// RenderWorkload renders a Workload for the target. With summary, the
// render of an input seen lately may be answered from the memo: the bundle
// then has no Files (see renderMemo), which is all a reconcile needs
// unless it commits.
func (p *Publisher) RenderWorkload(ctx context.Context, t *Target, in render.WorkloadInput, summary bool) (*render.Bundle, error) {
	in.Publish = t.Input
	in.Publish.SyncName = currentSyncName(in.Workload.Status.GeneratedResources)
	memo := t.Engine == nil // the built-in engine: always the same templates
	var key [32]byte
	if memo {
		key, memo = workloadKey(in)
	}
	if memo && summary {
		if b := p.memo.get(key); b != nil {
			return b, nil
		}
	}
	b, err := p.render(ctx, t, scribev1.WorkloadKind, func(ctx context.Context, e *render.Engine) (*render.Bundle, error) {
		return e.RenderWorkload(ctx, in)
	})
	if err == nil && memo {
		p.memo.put(key, b)
	}
	return b, err
}

// RenderExperiment renders an Experiment for the target.
func (p *Publisher) RenderExperiment(ctx context.Context, t *Target, in render.ExperimentInput) (*render.Bundle, error) {
	in.Publish = t.Input
	in.Publish.SyncName = currentSyncName(in.Experiment.Status.GeneratedResources)
	if in.Resolved.GCPProject == "" {
		in.Resolved.GCPProject = p.GCPProject
	}
	if in.Resolved.Catalog == nil {
		in.Resolved.Catalog = t.CatalogSource
	}
	return p.render(ctx, t, scribev1.ExperimentKind, func(ctx context.Context, e *render.Engine) (*render.Bundle, error) {
		return e.RenderExperiment(ctx, in)
	})
}

// currentSyncName is the name of the sync object a custom resource's
// status records (the first generated object), for the templates' naming
// migration: they keep it only when it is the name earlier releases gave
// this very custom resource.
func currentSyncName(g *scribev1.GeneratedResources) string {
	if g == nil || len(g.Objects) == 0 {
		return ""
	}
	switch o := g.Objects[0]; o.Kind {
	case "Kustomization", "Application":
		return o.Name
	}
	return ""
}

// render runs one render with the target's engine, traced and measured.
func (p *Publisher) render(ctx context.Context, t *Target, kind string, fn func(context.Context, *render.Engine) (*render.Bundle, error)) (*render.Bundle, error) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "render", trace.WithAttributes(attribute.String("scribe.kind", kind)))
	defer span.End()
	if p.renderSlots != nil {
		// A render is the CPU and most of the memory of a reconcile: only
		// so many run at once, however many workers wait for one.
		select {
		case p.renderSlots <- struct{}{}:
			defer func() { <-p.renderSlots }()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// A worker that waited while the manager stopped does not render.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	engine := t.Engine
	if engine == nil {
		engine = p.BuiltinEngine()
	}
	b, err := fn(ctx, engine)
	p.Metrics.ObserveRender(kind, time.Since(start))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.String("scribe.digest", b.Digest))
	}
	return b, err
}

// BuiltinEngine is the engine of the built-in templates.
func (p *Publisher) BuiltinEngine() *render.Engine { return p.Engine }

// tracerName names Scribe's spans; the provider is set up by `scribe
// controller` when OTEL_EXPORTER_OTLP_ENDPOINT is set (a no-op otherwise).
const tracerName = "github.com/scribe-gitops/scribe/controller"

// Publish writes the change of the custom resource uid and asks the
// applier to reconcile now. The custom resource's publishes are made one
// at a time, and none after its removal (see removals.go): a write that
// comes after is refused with ReasonDeleting.
func (p *Publisher) Publish(ctx context.Context, t *Target, uid types.UID, c publish.Change, sync scribev1.ObjectIdentity) (publish.Result, error) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "publish", trace.WithAttributes(
		attribute.String("scribe.object", publish.ObjectRef(c.Source)), attribute.Bool("scribe.delete", c.Delete)))
	defer span.End()
	unlock := p.order.lock(uid)
	defer unlock()
	if err := p.mayPublish(ctx, uid, c); err != nil {
		span.RecordError(err)
		return publish.Result{}, err
	}
	if c.Delete {
		// Whatever becomes of this push, nothing but a removal is
		// published for a custom resource being deleted.
		p.order.markRemoved(uid, time.Now())
	}
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
		p.nudgeAfterPush(ctx, t, sync, res)
	}
	return res, nil
}

// nudgeAfterPush asks the applier to reconcile the pushed commit. The
// applier's root object (the Repository's source, or the root Argo CD
// Application) is asked once per commit, however many CRs the commit
// carries: a burst of 1000 new CRs batched into a few commits patches it a
// few times, not 1000. Each CR's own applier object (its GitRepository or
// Application, when it has one) is still asked for each CR.
func (p *Publisher) nudgeAfterPush(ctx context.Context, t *Target, sync scribev1.ObjectIdentity, res publish.Result) {
	perCR := t.Input.Applier.Kind == scribev1.ApplierArgoCD || t.Input.Applier.FluxSource != nil
	root := res.SyncChanged || !perCR
	if root && !p.claimRootNudge(t, res.Commit) {
		root = false
	}
	switch {
	case perCR:
		p.Nudge(ctx, t, sync, root)
	case root:
		p.Nudge(ctx, t, sync, true)
	}
}

// claimRootNudge reports whether the caller is the first to nudge t's
// root applier object for commit.
func (p *Publisher) claimRootNudge(t *Target, commit string) bool {
	key := t.Repo.Namespace + "/" + t.Repo.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rootNudged == nil {
		p.rootNudged = map[string]string{}
	}
	if len(p.rootNudged) > 10000 {
		p.rootNudged = map[string]string{} // bounded, as committed
	}
	if p.rootNudged[key] == commit {
		return false
	}
	p.rootNudged[key] = commit
	return true
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

// Nudge asks the Target's applier to reconcile sync now instead of at its
// next poll (see Applier.Nudge). Failures are not fatal: the applier polls
// anyway.
func (p *Publisher) Nudge(ctx context.Context, t *Target, sync scribev1.ObjectIdentity, syncChanged bool) {
	if p.NoNudge {
		return
	}
	if err := t.Applier.Nudge(ctx, sync, syncChanged); err != nil {
		log.FromContext(ctx).V(1).Info("nudge failed; the applier will notice at its poll", "error", err.Error())
	}
}

// Applied reads the applier's verdict on commit for the CR whose sync
// object is sync.
func (p *Publisher) Applied(ctx context.Context, t *Target, src, sync scribev1.ObjectIdentity, commit string) (v health.Verdict, err error) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "read-back", trace.WithAttributes(
		attribute.String("scribe.object", publish.ObjectRef(src)), attribute.String("scribe.revision", commit),
		attribute.String("scribe.applier", string(t.Applier.Kind()))))
	defer func() {
		span.SetAttributes(attribute.String("scribe.verdict", string(v.State)), attribute.String("scribe.reason", v.Reason))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	return t.Applier.Applied(ctx, sync, src, t.Input.Path, commit, p.ancestry(t, src))
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
	return t.Applier.Gone(ctx, sync)
}

// forgeFor builds the forge client of the Repository's pullRequest spec;
// the token is the "token" key of its Secret.
func (p *Publisher) forgeFor(ctx context.Context, t *Target) (publish.PullRequestOptions, error) {
	pr := t.Repo.Spec.Git.PullRequest
	s, err := p.Resolver.Secret(ctx, t.Repo.Namespace, pr.SecretRef.Name)
	if err != nil {
		return publish.PullRequestOptions{}, err
	}
	c, err := forge.New(forge.Options{Provider: pr.Provider, RepoURL: t.Repo.Spec.Git.URL, APIURL: pr.APIURL, Token: string(s["token"])})
	if err != nil {
		return publish.PullRequestOptions{}, &reasonError{reason: string(publish.ReasonInvalid), err: err}
	}
	return publish.PullRequestOptions{Base: pr.Base, Forge: c, Weights: routeWeightChange}, nil
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
