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
	"fmt"
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
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
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
	Git    *gitsink.Git
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
	// renderSlots bounds the renders that run at once (Options.MaxRenders)
	// and shares them between namespaces; nil means no bound.
	renderSlots *renderSlots

	// order keeps each custom resource's commits before its removal
	// (removals.go).
	order publishOrder
	// unremoved are the custom resources committed and not removed, for
	// RemoveIfGone.
	unremoved committedCRs

	mu        sync.Mutex
	committed map[string]time.Time // commit → when it was pushed, until read back
	// artifacts are the per-custom-resource artifacts last pushed
	// (artifacts.go).
	artifacts pushedArtifacts
	// rootNudged is, per Repository, the commit its root applier object
	// was last asked to reconcile at.
	rootNudged map[string]string
}

// Target resolves the Repository ref names (or "default") in namespace;
// see Resolver.Target.
func (p *Publisher) Target(ctx context.Context, namespace string, ref *scribev1.LocalObjectReference, requireReady bool) (*Target, error) {
	return p.Resolver.Target(ctx, namespace, ref, requireReady)
}

// TargetForRemoval resolves the Repository for a custom resource's
// removal; see Resolver.TargetForRemoval.
func (p *Publisher) TargetForRemoval(ctx context.Context, namespace string, ref *scribev1.LocalObjectReference) (*Target, error) {
	return p.Resolver.TargetForRemoval(ctx, namespace, ref)
}

// RenderWorkload renders a Workload for the target. With summary, a
// render whose input is the one the memo last saw for this Workload is
// answered from the memo (decideRender): the bundle then has no Files
// (see renderMemo), which is all a reconcile needs unless it commits.
func (p *Publisher) RenderWorkload(ctx context.Context, t *Target, in render.WorkloadInput, summary bool) (*render.Bundle, error) {
	in.Publish = t.Input
	in.Publish.SyncName = currentSyncName(in.Workload.Status.GeneratedResources)
	cr := memoCR(scribev1.WorkloadKind, in.Workload)
	digest, keyed := workloadDigest(p.engineID(t), in)
	return p.memoized(ctx, cr, digest, keyed, !summary, func() (*render.Bundle, error) {
		return p.render(ctx, t, scribev1.WorkloadKind, in.Workload.Namespace, false, func(ctx context.Context, e *render.Engine) (*render.Bundle, error) {
			return e.RenderWorkload(ctx, in)
		})
	})
}

// RenderExperiment renders an Experiment for the target, answered from
// the memo as RenderWorkload's with summary. A large Experiment's render
// is heavy (see renderSlots).
func (p *Publisher) RenderExperiment(ctx context.Context, t *Target, in render.ExperimentInput, summary bool) (*render.Bundle, error) {
	in.Publish = t.Input
	in.Publish.SyncName = currentSyncName(in.Experiment.Status.GeneratedResources)
	if in.Resolved.GCPProject == "" {
		in.Resolved.GCPProject = p.GCPProject
	}
	if in.Resolved.Catalog == nil {
		in.Resolved.Catalog = t.CatalogSource
	}
	cr := memoCR(scribev1.ExperimentKind, in.Experiment)
	digest, keyed := experimentDigest(p.engineID(t), in)
	heavy := experimentRenderCost(&in.Experiment.Spec) > heavyRenderObjects
	return p.memoized(ctx, cr, digest, keyed, !summary, func() (*render.Bundle, error) {
		return p.render(ctx, t, scribev1.ExperimentKind, in.Experiment.Namespace, heavy, func(ctx context.Context, e *render.Engine) (*render.Bundle, error) {
			return e.RenderExperiment(ctx, in)
		})
	})
}

// memoized answers a render of cr's input digest from the memo, or runs
// it and remembers it, as decideRender says.
func (p *Publisher) memoized(ctx context.Context, cr string, digest [32]byte, keyed, needFiles bool, run func() (*render.Bundle, error)) (*render.Bundle, error) {
	last := p.memo.get(cr)
	why := decideRender(last, digest, keyed, needFiles)
	if why == renderReuse {
		return last.summary, nil
	}
	log.FromContext(ctx).V(1).Info("render", "why", string(why))
	b, err := run()
	if err == nil && keyed {
		p.memo.put(cr, digest, b)
	}
	return b, err
}

// engineID names what renders for t in a memo key: the built-in
// templates' version, or the user catalog's artifact and path; "" when
// the engine cannot be named (not memoized).
func (p *Publisher) engineID(t *Target) string {
	switch {
	case t.Engine == nil || t.Engine == p.Engine:
		return "builtin " + p.Engine.TemplateVersion()
	case t.CatalogArtifact != "":
		return "catalog " + t.CatalogArtifact + " " + t.Engine.TemplateVersion()
	}
	return ""
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
func (p *Publisher) render(ctx context.Context, t *Target, kind, namespace string, heavy bool, fn func(context.Context, *render.Engine) (*render.Bundle, error)) (*render.Bundle, error) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "render", trace.WithAttributes(attribute.String("scribe.kind", kind)))
	defer span.End()
	release := func() {}
	if p.renderSlots != nil {
		// A render is the CPU and most of the memory of a reconcile: only
		// so many run at once, however many workers wait for one, shared
		// between namespaces (see renderSlots).
		var err error
		if release, err = p.renderSlots.acquire(ctx, namespace, heavy); err != nil {
			return nil, fmt.Errorf("wait for a render slot: %w", err)
		}
	}
	start := time.Now()
	engine := t.Engine
	if engine == nil {
		engine = p.BuiltinEngine()
	}
	b, err := p.runRender(ctx, engine, release, fn)
	p.Metrics.ObserveRender(kind, time.Since(start))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.String("scribe.digest", b.Digest))
	}
	return b, err
}

// runRender runs fn and returns its bundle, or ctx's error as soon as ctx
// ends: CUE's evaluation (cue.Value.Unify and Finalize in cuelang.org/go
// v0.17) takes no context and cannot be interrupted, so a render that a
// stopping manager (or a deleted CR) no longer wants is left to finish on
// its own goroutine, its result dropped, and the reconcile returns at
// once; the manager's shutdown is not held by it. release, the render's
// slot, is called when fn returns, not before: an abandoned render still
// counts against MaxRenders while it uses the CPU.
func (p *Publisher) runRender(ctx context.Context, engine *render.Engine, release func(), fn func(context.Context, *render.Engine) (*render.Bundle, error)) (*render.Bundle, error) {
	type result struct {
		b   *render.Bundle
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer release()
		b, err := fn(ctx, engine)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("render abandoned: %w", ctx.Err())
	}
}

// BuiltinEngine is the engine of the built-in templates.
func (p *Publisher) BuiltinEngine() *render.Engine { return p.Engine }

// tracerName names Scribe's spans; the provider is set up by `scribe
// controller` when OTEL_EXPORTER_OTLP_ENDPOINT is set (a no-op otherwise).
const tracerName = "github.com/scribe-gitops/scribe/controller"

// Publish writes the change of the custom resource uid and asks the
// applier to reconcile now. The custom resource's publishes are made one
// at a time, and none after its removal (see removals.go): a write that
// comes after is refused with ReasonDeleting. written is the custom
// resource as the API server answered the reconcile's own last write of
// it (zero: none), which may spare the uncached read (writeWitnesses).
func (p *Publisher) Publish(ctx context.Context, t *Target, uid types.UID, c publish.Change, sync scribev1.ObjectIdentity, written LiveObject) (publish.Result, error) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "publish", trace.WithAttributes(
		attribute.String("scribe.object", publish.ObjectRef(c.Source)), attribute.Bool("scribe.delete", c.Delete)))
	defer span.End()
	unlock := p.order.lock(uid)
	defer unlock()
	if err := p.mayPublish(ctx, uid, c, written); err != nil {
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
	if ck := committedKey(c.Source.Kind, c.Source.Namespace, c.Source.Name); c.Delete {
		p.unremoved.forget(ck)
	} else if uid != "" && t.Repo != nil {
		p.unremoved.remember(ck, committedCR{uid: uid, repo: t.Repo.Name})
	}
	sink := SinkGit
	if t.OCI != nil {
		sink = SinkOCI
	}
	p.Metrics.ObservePublish(c.Source.Kind, sink, time.Since(start), res.Changed)
	// The custom resource's own artifact follows its publish, also one
	// that found its content committed already unless this process
	// pushed that content (pushArtifact): such a publish may be the retry
	// of a push that failed after its commit landed. Flux is asked either
	// way: the commit is on the branch.
	pushed, pushErr := p.pushArtifact(ctx, t, sync, c, res)
	switch {
	case res.Changed:
		p.markCommitted(res.Commit)
		p.nudgeAfterPush(ctx, t, sync, res)
	case pushed:
		p.Nudge(ctx, t, sync, false)
	}
	if pushErr != nil {
		span.RecordError(pushErr)
		span.SetStatus(codes.Error, pushErr.Error())
		return publish.Result{}, pushErr
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
	perCR := t.Input.Applier.Kind == scribev1.ApplierArgoCD || t.Input.Applier.FluxSource != nil || t.Input.Applier.FluxArtifact != nil
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
	if p.NoNudge || t.NoNudge {
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
		if t.GitOpts != nil && len(applied) == 64 {
			// An artifact's digest (sha256), not a commit (sha1): ours
			// when it is the last artifact pushed for the custom resource
			// (see pushedArtifacts; never once spec.git.artifacts is
			// gone).
			return t.Artifacts != nil && p.artifacts.carries(src, applied), nil
		}
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
func (p *Publisher) forgeFor(ctx context.Context, t *Target) (gitsink.PullRequestOptions, error) {
	pr := t.Repo.Spec.Git.PullRequest
	api, err := forge.APIURL(pr.Provider, t.Repo.Spec.Git.URL, pr.APIURL)
	if err != nil {
		return gitsink.PullRequestOptions{}, &reasonError{reason: string(publish.ReasonInvalid), err: fmt.Errorf("spec.git.pullRequest: %w", err)}
	}
	s, err := p.Resolver.Secret(ctx, t.Repo.Namespace, pr.SecretRef.Name, api, "spec.git.pullRequest.secretRef")
	if err != nil {
		return gitsink.PullRequestOptions{}, err
	}
	c, err := forge.New(forge.Options{Provider: pr.Provider, RepoURL: t.Repo.Spec.Git.URL, APIURL: pr.APIURL, Token: string(s["token"]), HTTPClient: p.Resolver.ForgeHTTPClient()})
	if err != nil {
		return gitsink.PullRequestOptions{}, &reasonError{reason: string(publish.ReasonInvalid), err: err}
	}
	return gitsink.PullRequestOptions{Base: pr.Base, Forge: c, Weights: routeWeightChange}, nil
}

// Propose opens or updates the pull request for the change.
func (p *Publisher) Propose(ctx context.Context, t *Target, c publish.Change, evidence string) (gitsink.Proposal, error) {
	opts, err := p.forgeFor(ctx, t)
	if err != nil {
		return gitsink.Proposal{}, err
	}
	return p.Git.Propose(ctx, *t.GitOpts, opts, c, evidence)
}

// CloseProposal closes the open pull request of src (nil: none was open),
// with note, after a commit reached the branch it targets without it.
func (p *Publisher) CloseProposal(ctx context.Context, t *Target, src scribev1.ObjectIdentity, note string) (*forge.PullRequest, error) {
	opts, err := p.forgeFor(ctx, t)
	if err != nil {
		return nil, err
	}
	return p.Git.CloseProposal(ctx, *t.GitOpts, opts, src, note)
}

// ProposalStatus reads whether the pull request of src (head commit head)
// was merged, and nudges the applier when it was.
func (p *Publisher) ProposalStatus(ctx context.Context, t *Target, src scribev1.ObjectIdentity, head string) (gitsink.Proposal, error) {
	opts, err := p.forgeFor(ctx, t)
	if err != nil {
		return gitsink.Proposal{}, err
	}
	return p.Git.ProposalStatus(ctx, *t.GitOpts, opts, src, head)
}
