package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

// WorkloadReconciler renders Workloads, walks canary steps and rolls back,
// moving only on health read back from the applier and the Deployments.
type WorkloadReconciler struct {
	Publisher *Publisher
	Events    events.EventRecorder
	Checks    *Checker
	// Poll is how often health is read while a step waits to be applied.
	Poll time.Duration
	// WatchedPoll replaces Poll while a step waits on an applier whose
	// objects are watched (see SetupWithManager): their changes, and the
	// Deployments', start a reconcile at once, so the poll is only a
	// safety net. Zero: Poll.
	WatchedPoll time.Duration
	// watched are the appliers whose objects SetupWithManager watches.
	watched map[scribev1.ApplierKind]bool
}

// +kubebuilder:rbac:groups=scribe.dev,resources=workloads,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=scribe.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=scribe.dev,resources=workloads/finalizers,verbs=update
// +kubebuilder:rbac:groups=scribe.dev,resources=pipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the reconciler.
func (r *WorkloadReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int, pred predicate.Predicate) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&scribev1.Workload{}, finalizerPredicates(pred)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency})
	// Read-back is watched where the API allows, so a step moves as soon as
	// the applier or a Deployment reports, not at the next poll: the per-CR
	// Kustomization carries render's scribe.dev/{kind,namespace,name}
	// labels, the Deployments scribe.dev/workload. Kinds whose CRDs are not
	// installed (Flux on an Argo CD cluster) are polled only.
	b = b.Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[WorkloadLabel]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	}))
	r.watched = map[scribev1.ApplierKind]bool{}
	if kustomizationsInstalled(mgr) {
		b = b.Watches(&kustomizev1.Kustomization{}, handler.EnqueueRequestsFromMapFunc(syncOwner(scribev1.WorkloadKind)))
		r.watched[scribev1.ApplierFlux] = true
	}
	// Argo CD Applications are watched as metadata only (an Application's
	// status is large, and every change bumps its resourceVersion).
	if m, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "argoproj.io", Kind: "Application"}); err == nil {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(m.GroupVersionKind)
		b = b.WatchesMetadata(obj, handler.EnqueueRequestsFromMapFunc(syncOwner(scribev1.WorkloadKind)))
		r.watched[scribev1.ApplierArgoCD] = true
	}
	b = watchPipelineWrites(b, pred)
	b = watchRoutes(mgr, b)
	b = watchRepositoryChanges(b, mgr.GetClient(), func() client.ObjectList { return &scribev1.WorkloadList{} }, pred)
	return b.Complete(r)
}

// syncOwner maps an applier object labelled by render back to its CR.
func syncOwner(kind string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		if l["scribe.dev/kind"] != kind || l["scribe.dev/name"] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l["scribe.dev/namespace"], Name: l["scribe.dev/name"]}}}
	}
}

// Reconcile moves one Workload one step closer to its desired state.
func (r *WorkloadReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return lifecycle[*scribev1.Workload]{
		kind: scribev1.WorkloadKind, finalize: r.finalize, gone: r.gone, reconcile: r.reconcile,
		suspended: func(o *scribev1.Workload) bool { return o.Spec.Suspend }, saved: r.Publisher.Metrics.Observe,
	}.run(ctx, r.Publisher.Client, req, &scribev1.Workload{})
}

// gone removes what was committed of a Workload that went without its
// finalize (RemoveIfGone).
func (r *WorkloadReconciler) gone(ctx context.Context, key types.NamespacedName) (ctrl.Result, error) {
	return r.Publisher.RemoveIfGone(ctx, scribev1.WorkloadKind, key)
}

// reconcile resolves the Workload's Repository and walks the rollout.
func (r *WorkloadReconciler) reconcile(ctx context.Context, w *scribev1.Workload, patcher *statusPatcher) (ctrl.Result, error) {
	gate, err := r.pipelineGate(ctx, w)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !gate.Publish {
		// Held back, its generation not observed: its Pipeline reads it as
		// not having acted on its spec.
		r.holdBack(w, gate)
		return ctrl.Result{}, nil
	}
	releaseHold(w)
	w.Status.ObservedGeneration = w.Generation
	if w.Status.Phase == "" {
		w.Status.Phase = scribev1.WorkloadPending
		w.Status.Step = -1
	}
	t, err := r.Publisher.Target(ctx, w.Namespace, w.Spec.RepositoryRef, true)
	if err != nil {
		return r.fail(w, err)
	}
	if err := checkPullRequests(w, t); err != nil {
		return r.fail(w, err)
	}
	return r.progress(ctx, w, patcher, t, gate.TrustPromotion)
}

// fail records err in the Workload's conditions by the shared table.
func (r *WorkloadReconciler) fail(w *scribev1.Workload, err error) (ctrl.Result, error) {
	return fail(w, err)
}

// progress walks the rollout: DecideRollout (rollout.go) decides, and
// progress carries out each action it asks for, records what it saw and
// asks again, until the decision is to wait.
// Promotion evidence goes into its commits and pull requests only when
// trusted (DecidePipelineGate).
func (r *WorkloadReconciler) progress(ctx context.Context, w *scribev1.Workload, patcher *statusPatcher, t *Target, trusted bool) (ctrl.Result, error) {
	obs := RolloutObservations{Name: w.Name, Namespace: w.Namespace, Poll: r.Poll, Analysis: r.Checks != nil, PullRequests: t.PullRequests(), Requests: r.requests(ctx, w),
		FirstIntent: len(w.Status.Traffic) == 0 && w.Status.StableVersion == "" && w.Status.Revision == ""}
	if r.watched[t.Applier.Kind()] {
		obs.WatchedPoll = r.WatchedPoll
	}
	src := scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: scribev1.WorkloadKind, Namespace: w.Namespace, Name: w.Name}
	var bundle *render.Bundle
	for range maxDecisions {
		st, act := DecideRollout(&w.Spec, w.Status, obs, time.Now())
		w.Status = st
		applyMarks(w, act.Marks)
		for _, ev := range act.Events {
			r.event(w, ev.Type, ev.Reason, "%s", ev.Message)
		}
		if act.SaveIntent {
			if err := patcher.Patch(ctx, w); err != nil {
				return ctrl.Result{}, fmt.Errorf("save the intent of workload %s/%s: %w", w.Namespace, w.Name, err)
			}
		}
		switch act.Kind {
		case RolloutRender:
			b, err := r.render(ctx, w, t, true)
			if err != nil {
				return r.fail(w, err)
			}
			bundle = b
			obs.Rendered = &Rendered{Digest: b.Digest, Generated: generated(t, b)}
		case RolloutConfirmIntent, RolloutCommit, RolloutPropose, RolloutReadPullRequest:
			job := deliveryJob{Target: t, Source: src, UID: w.UID, ResourceVersion: w.ResourceVersion, Written: patcher.Written(), Head: headOf(st.PullRequest),
				MergedSync: func() (scribev1.ObjectIdentity, error) {
					return r.Publisher.syncIdentity(t, st.GeneratedResources, src)
				}}
			if act.Kind == RolloutCommit || act.Kind == RolloutPropose {
				full, err := r.withFiles(ctx, w, t, bundle)
				if err != nil {
					return r.fail(w, err)
				}
				bundle = full
				job.Change, job.Sync = change(w, bundle, trusted), bundle.Sync
			}
			switch act.Kind {
			case RolloutCommit:
				to, err := r.rollbackTarget(w, t)
				if err != nil {
					return r.fail(w, err)
				}
				job.CommitTo = to
				if act.CloseProposal {
					job.CloseProposal = commitWhat(w)
				}
			case RolloutPropose:
				job.Evidence = promotionEvidence(w, trusted, st.Evidence)
			}
			d, err := r.Publisher.deliver(ctx, DeliveryStepKind(act.Kind), job)
			if err != nil {
				return r.fail(w, err)
			}
			switch act.Kind {
			case RolloutCommit:
				obs.Commit = d.Result.Commit
				log.FromContext(ctx).Info("published", "revision", d.Result.Revision, "changed", d.Result.Changed, "step", st.Step, "traffic", fmtTraffic(st.Traffic))
				r.reportClosedProposal(w, d)
			case RolloutConfirmIntent:
				obs.Current = d.Current
			case RolloutPropose:
				obs.Proposed = d.Proposed
			default:
				obs.PullRequest = d.PullRequest
			}
		case RolloutReadBack:
			v, err := r.Publisher.Applied(ctx, t, bundle.Source, bundle.Sync, st.Revision)
			if err != nil {
				return ctrl.Result{}, fmt.Errorf("read applier status of %s: %w", shortRev(st.Revision), err)
			}
			applied := v.State == health.Healthy || v.Reason == health.ReasonSyncedProgressing
			h := &Health{Applied: applied, Verdict: v}
			if h.Applied {
				h.Verdict = health.Aggregate(v, r.deployments(ctx, w, bundle), r.routes(ctx, bundle))
			}
			if h.Verdict.State == health.Healthy {
				r.Publisher.ObserveApplied(scribev1.WorkloadKind, st.Revision)
			}
			obs.Health = h
		case RolloutAnalyse:
			obs.Checks = r.Checks.RunRound(ctx, w, st.CanaryVersion, deploymentOf(bundle, st.CanaryVersion))
		case RolloutCallWebhooks:
			obs.Webhooks = r.callWebhooks(ctx, w, act.Webhook)
		case RolloutRollBack:
			log.FromContext(ctx).Info("rolling back", "version", st.RolledBackVersion, "reason", act.Why)
			return ctrl.Result{RequeueAfter: act.Requeue}, nil
		default:
			return ctrl.Result{RequeueAfter: act.Requeue}, nil
		}
	}
	return ctrl.Result{}, fmt.Errorf("workload %s/%s: no decision after %d observations", w.Namespace, w.Name, maxDecisions)
}

// callWebhooks asks w's webhooks of typ; without a Checker every one
// says this controller calls none (the gate then holds).
func (r *WorkloadReconciler) callWebhooks(ctx context.Context, w *scribev1.Workload, typ scribev1.WebhookType) *WebhookRound {
	if r.Checks != nil {
		return r.Checks.CallWebhooks(ctx, w, typ)
	}
	round := &WebhookRound{Type: typ}
	hooks, _ := webhooksOf(w, typ)
	for _, h := range hooks {
		round.Results = append(round.Results, WebhookResult{Name: h.Name, Message: "this controller calls no webhooks (it runs without analysis)"})
	}
	return round
}

// change is the commit of w's render: its message says why (a rollback)
// and what the previous step showed (and, trusted, the previous stage).
func change(w *scribev1.Workload, bundle *render.Bundle, trusted bool) publish.Change {
	c := publish.ChangeFor(bundle)
	c.Reason = strings.TrimSpace(w.Status.Message + "\n\n" + promotionEvidence(w, trusted, w.Status.Evidence))
	c.Summary = workloadSummary(w)
	return c
}

// withFiles returns bundle with its files, rendering again when it is a
// summary from the memo (a commit needs the files).
func (r *WorkloadReconciler) withFiles(ctx context.Context, w *scribev1.Workload, t *Target, bundle *render.Bundle) (*render.Bundle, error) {
	if bundle.Files != nil {
		return bundle, nil
	}
	return r.render(ctx, w, t, false)
}

// render renders the Workload's current intent: the versions still
// deployed (renderedVersions) and the traffic split in status. With
// summary, a render of the same input seen lately comes from the memo,
// without files.
func (r *WorkloadReconciler) render(ctx context.Context, w *scribev1.Workload, t *Target, summary bool) (*render.Bundle, error) {
	keep := renderedVersions(w, time.Now())
	in := w.DeepCopy()
	in.Spec.Versions = nil
	for _, v := range w.Spec.Versions {
		if keep[v.Name] {
			in.Spec.Versions = append(in.Spec.Versions, v)
		}
	}
	var traffic []scribev1.VersionWeight
	for _, tr := range w.Status.Traffic {
		if keep[tr.Version] {
			traffic = append(traffic, tr)
		}
	}
	return r.Publisher.RenderWorkload(ctx, t, render.WorkloadInput{Workload: in, Traffic: traffic, Stable: w.Status.StableVersion}, summary)
}

// deployments reads the rendered Deployment (as the render's read-back
// names it) of every version with traffic.
func (r *WorkloadReconciler) deployments(ctx context.Context, w *scribev1.Workload, b *render.Bundle) health.Verdict {
	var vs []health.Verdict
	for _, tr := range w.Status.Traffic {
		if tr.Version == w.Status.RolledBackVersion && tr.Weight == 0 {
			continue // the abandoned version is expected to be unhealthy
		}
		id := deploymentOf(b, tr.Version)
		if id.Name == "" {
			vs = append(vs, health.Verdict{State: health.Pending, Reason: "NotObserved", Message: "the render has no Deployment for version " + tr.Version})
			continue
		}
		d := &appsv1.Deployment{}
		if err := r.Publisher.Client.Get(ctx, types.NamespacedName{Namespace: id.Namespace, Name: id.Name}, d); err != nil {
			msg := err.Error()
			if apierrors.IsNotFound(err) {
				msg = "not created yet"
			}
			vs = append(vs, health.Verdict{State: health.Pending, Reason: "NotObserved", Message: "Deployment " + id.Name + ": " + msg})
			continue
		}
		v := health.Deployment(d)
		if v.State != health.Healthy {
			v.Message = "Deployment " + id.Name + ": " + v.Message
		}
		vs = append(vs, v)
	}
	return health.Aggregate(vs...)
}

// deploymentOf is the Deployment of version as the render's read-back
// names it (empty when the render has none).
func deploymentOf(b *render.Bundle, version string) scribev1.ObjectIdentity {
	for _, d := range b.ReadBack.Deployments {
		if d.Version == version {
			return d.Deployment.Identity()
		}
	}
	return scribev1.ObjectIdentity{}
}

// finalize commits the Workload's removal (phase Deleting records it) and
// releases the finalizer once the applier has pruned it.
func (r *WorkloadReconciler) finalize(ctx context.Context, w *scribev1.Workload) (ctrl.Result, error) {
	return r.Publisher.finalize(ctx, removal{
		obj: w, kind: scribev1.WorkloadKind, repo: w.Spec.RepositoryRef, generated: w.Status.GeneratedResources,
		committed: w.Status.Phase == scribev1.WorkloadDeleting,
		record: func(commit string) {
			w.Status.Phase = scribev1.WorkloadDeleting
			w.Status.Revision = commit
		},
		event: func(typ, reason, format string, args ...any) { r.event(w, typ, reason, format, args...) },
		poll:  r.Poll,
	})
}

func (r *WorkloadReconciler) event(obj runtime.Object, typ, reason, format string, args ...any) {
	eventf(r.Events, obj, typ, reason, format, args...)
}
