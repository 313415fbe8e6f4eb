package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
}

// +kubebuilder:rbac:groups=scribe.dev,resources=workloads,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=scribe.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=scribe.dev,resources=workloads/finalizers,verbs=update
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
		if name := o.GetLabels()["scribe.dev/workload"]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	}))
	if kustomizationsInstalled(mgr) {
		b = b.Watches(&kustomizev1.Kustomization{}, handler.EnqueueRequestsFromMapFunc(syncOwner(scribev1.WorkloadKind)))
	}
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
	return lifecycle[*scribev1.Workload]{kind: scribev1.WorkloadKind, finalize: r.finalize, reconcile: r.reconcile}.
		run(ctx, r.Publisher.Client, req, &scribev1.Workload{})
}

// reconcile resolves the Workload's Repository and walks the rollout.
func (r *WorkloadReconciler) reconcile(ctx context.Context, w *scribev1.Workload, patcher *patch.SerialPatcher) (ctrl.Result, error) {
	w.Status.ObservedGeneration = w.Generation
	if w.Status.Phase == "" {
		w.Status.Phase = scribev1.WorkloadPending
		w.Status.Step = -1
	}
	t, err := r.Publisher.Target(ctx, w.Namespace, w.Spec.RepositoryRef, true)
	if err != nil {
		return r.fail(w, err)
	}
	return r.progress(ctx, w, patcher, t)
}

// fail records err in the Workload's conditions by the shared table.
func (r *WorkloadReconciler) fail(w *scribev1.Workload, err error) (ctrl.Result, error) {
	return fail(w, err)
}

// progress is the rollout state machine. Status is the source of truth: a
// step's intent (step, traffic) is saved before its commit is pushed, and
// the commit is recorded after, so a controller restarted anywhere publishes
// the same step again (a no-op in Git) and never skips or repeats one.
func (r *WorkloadReconciler) progress(ctx context.Context, w *scribev1.Workload, patcher *patch.SerialPatcher, t *Target) (ctrl.Result, error) {
	st := &w.Status
	newest := w.Spec.Versions[len(w.Spec.Versions)-1].Name
	if st.StableVersion != "" && !hasVersion(w, st.StableVersion) {
		st.StableVersion = "" // the stable version was removed from spec
	}
	switch {
	case st.StableVersion == "":
		// First rollout: the newest version takes all traffic.
		if len(st.Traffic) != 1 || st.Traffic[0].Version != newest || st.CanaryVersion != newest {
			st.CanaryVersion, st.Step = newest, 0
			r.setTraffic(w, []scribev1.VersionWeight{{Version: newest, Weight: 100}})
		}
	case newest == st.StableVersion || newest == st.RolledBackVersion:
		want := []scribev1.VersionWeight{{Version: st.StableVersion, Weight: 100}}
		if st.CanaryVersion != "" || !sameTraffic(st.Traffic, want) {
			st.CanaryVersion, st.Step = "", -1
			r.setTraffic(w, want)
		}
	case st.CanaryVersion != newest:
		// A new version: start its rollout at the first step.
		st.CanaryVersion, st.Step, st.RolledBackVersion = newest, 0, ""
		r.setTraffic(w, stepTraffic(w, 0))
		r.event(w, corev1.EventTypeNormal, "RolloutStarted", "rolling out %s: step 1 of %d, weight %d", newest, len(steps(w)), steps(w)[0].Weight)
	}

	// Commit the current intent (no-op in Git when already there).
	bundle, err := r.render(ctx, w, t)
	if err != nil {
		return r.fail(w, err)
	}
	if st.Revision == "" || st.Digest != bundle.Digest {
		if st.Digest != bundle.Digest {
			// New content at the same step (the spec changed): its health
			// and pause start again.
			st.PullRequest = nil
			st.StepHealthyAt, st.LastAnalysisAt = nil, nil
		}
		st.Revision, st.Digest = "", bundle.Digest
		if err := patcher.Patch(ctx, w, patch.WithOwnedConditions{Conditions: ownedConditions()}, patch.WithFieldOwner(fieldOwner)); err != nil {
			return ctrl.Result{}, err
		}
		change := publish.ChangeFor(bundle)
		change.Reason = strings.TrimSpace(st.Message + "\n\n" + st.Evidence)
		if promotesByPullRequest(w) && t.PullRequests() {
			done, res, err := r.propose(ctx, w, t, change)
			if err != nil || !done {
				return res, err
			}
		} else {
			res, err := r.Publisher.Publish(ctx, t, change, bundle.Sync)
			if err != nil {
				return r.fail(w, err)
			}
			st.Revision = res.Commit
			log.FromContext(ctx).Info("published", "revision", res.Revision, "changed", res.Changed, "step", st.Step, "traffic", fmtTraffic(st.Traffic))
		}
		st.GeneratedResources = generated(t, bundle)
	}

	verdict, err := r.Publisher.Applied(ctx, t, bundle.Source, bundle.Sync, st.Revision)
	if err != nil {
		return ctrl.Result{}, err
	}
	applied := verdict.State == health.Healthy
	if applied {
		verdict = health.Aggregate(verdict, r.deployments(ctx, w, bundle))
	}
	if applied && verdict.State == health.Pending && st.CanaryVersion != "" && st.StableVersion != "" {
		// The applier applied the step but the new version is not healthy
		// (yet): the analysis runs anyway, so a version that never becomes
		// available fails its checks and is rolled back after threshold
		// rounds instead of holding the rollout forever.
		if res, done, err := r.analyse(ctx, w, patcher, t); done || err != nil {
			return res, err
		}
	}
	switch verdict.State {
	case health.Failed:
		if st.CanaryVersion != "" && st.StableVersion != "" {
			return r.rollback(ctx, w, patcher, t, fmt.Sprintf("step %d of %s failed: %s", st.Step+1, st.CanaryVersion, verdict.Message))
		}
		st.Phase = scribev1.WorkloadFailed
		conditions.MarkFalse(w, scribev1.ReadyCondition, ReasonApplyFailed, "%s", verdict.Message)
		conditions.Delete(w, scribev1.ReconcilingCondition)
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	case health.Pending:
		if st.Phase != scribev1.WorkloadRolledBack {
			st.Phase = scribev1.WorkloadProgressing
		}
		conditions.MarkReconciling(w, ReasonApplyPending, "waiting for %s: %s", shortRev(st.Revision), verdict.Message)
		conditions.MarkFalse(w, scribev1.ReadyCondition, ReasonApplyPending, "waiting for %s to be applied and healthy: %s", shortRev(st.Revision), verdict.Message)
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}

	// Applied and healthy.
	r.Publisher.ObserveApplied(scribev1.WorkloadKind, st.Revision)
	now := metav1.Now()
	if st.CanaryVersion == "" {
		if st.Phase != scribev1.WorkloadRolledBack {
			st.Phase = scribev1.WorkloadHealthy
		}
		conditions.MarkTrue(w, scribev1.ReadyCondition, ReasonSucceeded, "%s applied and healthy at %s", fmtTraffic(st.Traffic), shortRev(st.Revision))
		conditions.Delete(w, scribev1.ReconcilingCondition)
		conditions.Delete(w, scribev1.StalledCondition)
		if wait, pending := decommissionDue(w, time.Now()); pending {
			// Drained versions are still deployed: come back when they go.
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{}, nil
	}
	if st.StepHealthyAt == nil {
		st.StepHealthyAt = &now
		r.event(w, corev1.EventTypeNormal, "StepHealthy", "%s applied and healthy at %s", fmtTraffic(st.Traffic), shortRev(st.Revision))
	}
	if st.StableVersion != "" {
		if res, done, err := r.analyse(ctx, w, patcher, t); done || err != nil {
			return res, err
		}
	}
	wait := pause(w, st.Step) - time.Since(st.StepHealthyAt.Time)
	if wait > 0 {
		conditions.MarkReconciling(w, ReasonProgressing, "step %d of %s healthy; holding for %s", st.Step+1, st.CanaryVersion, wait.Round(time.Second))
		return ctrl.Result{RequeueAfter: minDuration(wait, r.analysisInterval(w))}, nil
	}
	evidence := stepEvidence(w)
	if st.StableVersion == "" || int(st.Step) >= len(steps(w))-1 {
		// The last step held: the new version is stable.
		promoted := st.CanaryVersion
		st.StableVersion, st.CanaryVersion, st.Step = promoted, "", -1
		st.DrainStartedAt = &now
		st.Phase = scribev1.WorkloadProgressing // Healthy once the promotion is applied
		r.setTraffic(w, []scribev1.VersionWeight{{Version: promoted, Weight: 100}})
		st.Evidence = evidence
		r.event(w, corev1.EventTypeNormal, "Promoted", "%s is stable", promoted)
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	st.Step++
	r.setTraffic(w, stepTraffic(w, int(st.Step)))
	st.Evidence = evidence
	r.event(w, corev1.EventTypeNormal, "StepAdvanced", "step %d of %d: %s", st.Step+1, len(steps(w)), fmtTraffic(st.Traffic))
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// analyse runs the checks when due; done means the reconcile is over (a
// rollback happened or the next round is scheduled).
func (r *WorkloadReconciler) analyse(ctx context.Context, w *scribev1.Workload, patcher *patch.SerialPatcher, t *Target) (ctrl.Result, bool, error) {
	st := &w.Status
	a := w.Spec.Rollout
	if a == nil || a.Analysis == nil || len(a.Analysis.Checks) == 0 || r.Checks == nil {
		return ctrl.Result{}, false, nil
	}
	interval := r.analysisInterval(w)
	if st.LastAnalysisAt != nil && time.Since(st.LastAnalysisAt.Time) < interval {
		return ctrl.Result{}, false, nil
	}
	now := metav1.Now()
	st.LastAnalysisAt = &now
	results := r.Checks.Run(ctx, w, st.CanaryVersion)
	st.Checks = results
	var failed []string
	for _, c := range results {
		if !c.Passed {
			failed = append(failed, c.Name+": "+c.Message)
		}
	}
	if len(failed) == 0 {
		return ctrl.Result{}, false, nil
	}
	st.FailedChecks++
	threshold := a.Analysis.Threshold
	if threshold <= 0 {
		threshold = 3
	}
	r.event(w, corev1.EventTypeWarning, "CheckFailed", "round %d of %d failed: %s", st.FailedChecks, threshold, strings.Join(failed, "; "))
	if st.FailedChecks >= threshold {
		res, err := r.rollback(ctx, w, patcher, t, fmt.Sprintf("%d failed analysis rounds of %s at step %d: %s", st.FailedChecks, st.CanaryVersion, st.Step+1, strings.Join(failed, "; ")))
		return res, true, err
	}
	return ctrl.Result{RequeueAfter: interval}, true, nil
}

// propose moves the current intent through its pull request: open or
// update it, then wait for its merge. done is true once the change is on
// the base branch, with st.Revision the commit that carries it.
func (r *WorkloadReconciler) propose(ctx context.Context, w *scribev1.Workload, t *Target, change publish.Change) (bool, ctrl.Result, error) {
	st := &w.Status
	if st.PullRequest == nil {
		prop, err := r.Publisher.Propose(ctx, t, change, st.Evidence)
		if err != nil {
			res, ferr := r.fail(w, err)
			return false, res, ferr
		}
		if prop.UpToDate {
			head, err := r.Publisher.Git.CheckAccess(ctx, baseOpts(t))
			if err != nil {
				res, ferr := r.fail(w, err)
				return false, res, ferr
			}
			st.Revision = head
			return true, ctrl.Result{}, nil
		}
		st.PullRequest = &scribev1.PullRequestStatus{Number: prop.PullRequest.Number, URL: prop.PullRequest.URL, Head: prop.Head, State: string(prop.PullRequest.State)}
		r.event(w, corev1.EventTypeNormal, "PullRequestOpened", "proposed %s in %s", fmtTraffic(st.Traffic), prop.PullRequest.URL)
	}
	src := scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: scribev1.WorkloadKind, Namespace: w.Namespace, Name: w.Name}
	prop, err := r.Publisher.ProposalStatus(ctx, t, src, st.PullRequest.Head)
	if err != nil {
		res, ferr := r.fail(w, err)
		return false, res, ferr
	}
	st.PullRequest.State = string(prop.PullRequest.State)
	switch {
	case prop.Merged:
		st.PullRequest.State = "merged"
		rev := prop.MergeCommit
		if rev == "" {
			head, err := r.Publisher.Git.CheckAccess(ctx, baseOpts(t))
			if err != nil {
				res, ferr := r.fail(w, err)
				return false, res, ferr
			}
			rev = head
		}
		st.Revision = rev
		r.event(w, corev1.EventTypeNormal, "PullRequestMerged", "pull request #%d merged as %s (recognised by %s)", st.PullRequest.Number, shortRev(rev), prop.MergedBy)
		r.Publisher.Nudge(ctx, t, syncIdentity(t, w.Status.GeneratedResources, src))
		return true, ctrl.Result{}, nil
	case prop.PullRequest.State == "closed":
		conditions.MarkFalse(w, scribev1.ReadyCondition, "PullRequestClosed", "pull request #%d was closed without merging: %s stays where it is", st.PullRequest.Number, fmtTraffic(st.Traffic))
		conditions.MarkStalled(w, "PullRequestClosed", "pull request #%d was closed without merging", st.PullRequest.Number)
		return false, ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	conditions.MarkReconciling(w, "AwaitingMerge", "waiting for pull request #%d to be merged", st.PullRequest.Number)
	conditions.MarkFalse(w, scribev1.ReadyCondition, "AwaitingMerge", "%s proposed in %s; waiting for the merge", fmtTraffic(st.Traffic), st.PullRequest.URL)
	return false, ctrl.Result{RequeueAfter: r.Poll}, nil
}

// baseOpts are the Git options for the branch pull requests target.
func baseOpts(t *Target) publish.GitOptions {
	o := *t.GitOpts
	if b := t.Repo.Spec.Git.PullRequest.Base; b != "" {
		o.Branch = b
	}
	return o
}

func promotesByPullRequest(w *scribev1.Workload) bool {
	return w.Spec.Rollout != nil && w.Spec.Rollout.Promotion == "pullRequest"
}

// rollback commits all traffic back to the stable version, once.
func (r *WorkloadReconciler) rollback(ctx context.Context, w *scribev1.Workload, patcher *patch.SerialPatcher, t *Target, why string) (ctrl.Result, error) {
	st := &w.Status
	failed := st.CanaryVersion
	st.RolledBackVersion, st.CanaryVersion, st.Step = failed, "", -1
	now := metav1.Now()
	st.DrainStartedAt = &now
	st.Phase = scribev1.WorkloadRolledBack
	st.Message = "rollback of " + failed + ": " + why
	// The failed version keeps its Deployment (at weight 0) until it is
	// decommissioned, so the traffic names only the stable version.
	r.setTraffic(w, []scribev1.VersionWeight{{Version: st.StableVersion, Weight: 100}})
	conditions.MarkFalse(w, scribev1.ReadyCondition, ReasonRolledBack, "%s", st.Message)
	r.event(w, corev1.EventTypeWarning, "RolledBack", "%s", st.Message)
	log.FromContext(ctx).Info("rolling back", "version", failed, "reason", why)
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// setTraffic records a new intent: its commit is still to be made.
func (r *WorkloadReconciler) setTraffic(w *scribev1.Workload, tr []scribev1.VersionWeight) {
	st := &w.Status
	st.Traffic = tr
	st.Revision = ""
	st.StepHealthyAt, st.LastAnalysisAt = nil, nil
	st.FailedChecks = 0
	st.Checks = nil
	st.Evidence = ""
	st.PullRequest = nil
	if st.Phase != scribev1.WorkloadRolledBack || st.CanaryVersion != "" {
		st.Message = ""
	}
}

// gracePeriod is how long a drained version stays deployed.
func gracePeriod(w *scribev1.Workload) time.Duration {
	if d := w.Spec.Decommission; d != nil && d.GracePeriod != nil {
		return d.GracePeriod.Duration
	}
	return 10 * time.Minute
}

// renderedVersions are the versions the render keeps: the stable one, the
// one rolling out, and every other version until its drain has lasted the
// grace period. A version removed from the output is decommissioned: the
// applier prunes its Deployment.
func renderedVersions(w *scribev1.Workload, now time.Time) map[string]bool {
	st := &w.Status
	keep := map[string]bool{}
	drained := st.DrainStartedAt != nil && now.Sub(st.DrainStartedAt.Time) >= gracePeriod(w) && st.StableVersion != ""
	for _, v := range w.Spec.Versions {
		if !drained || v.Name == st.StableVersion || v.Name == st.CanaryVersion {
			keep[v.Name] = true
		}
	}
	newest := w.Spec.Versions[len(w.Spec.Versions)-1].Name
	if newest != st.RolledBackVersion {
		keep[newest] = true // a version about to roll out
	}
	return keep
}

// decommissionDue says how long until drained versions leave the output,
// and whether any are still rendered.
func decommissionDue(w *scribev1.Workload, now time.Time) (time.Duration, bool) {
	st := &w.Status
	if st.DrainStartedAt == nil || st.StableVersion == "" {
		return 0, false
	}
	if len(renderedVersions(w, now)) <= 1 {
		return 0, false
	}
	wait := gracePeriod(w) - now.Sub(st.DrainStartedAt.Time)
	if wait < 0 {
		wait = time.Millisecond // due now: the next pass renders without them
	}
	return wait, true
}

// stepEvidence describes the step that just held, for the next step's
// pull request and commit.
func stepEvidence(w *scribev1.Workload) string {
	st := &w.Status
	var b strings.Builder
	fmt.Fprintf(&b, "Step %d (%s) was applied at %s", st.Step+1, fmtTraffic(st.Traffic), shortRev(st.Revision))
	if st.StepHealthyAt != nil {
		fmt.Fprintf(&b, " and healthy from %s to %s", st.StepHealthyAt.UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339))
	}
	b.WriteString(".")
	for _, c := range st.Checks {
		mark := "passed"
		if !c.Passed {
			mark = "FAILED"
		}
		fmt.Fprintf(&b, "\n- check %s %s: %s", c.Name, mark, c.Message)
	}
	return b.String()
}

func (r *WorkloadReconciler) render(ctx context.Context, w *scribev1.Workload, t *Target) (*render.Bundle, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
	if err != nil {
		return nil, fmt.Errorf("convert workload: %w", err)
	}
	u["apiVersion"], u["kind"] = scribev1.GroupVersion.String(), scribev1.WorkloadKind
	keep := renderedVersions(w, time.Now())
	if spec, ok := u["spec"].(map[string]any); ok {
		if vs, ok := spec["versions"].([]any); ok {
			var kept []any
			for _, v := range vs {
				if m, ok := v.(map[string]any); ok && keep[fmt.Sprint(m["name"])] {
					kept = append(kept, v)
				}
			}
			spec["versions"] = kept
		}
	}
	if st, ok := u["status"].(map[string]any); ok {
		if tr, ok := st["traffic"].([]any); ok {
			var kept []any
			for _, e := range tr {
				if m, ok := e.(map[string]any); ok && keep[fmt.Sprint(m["version"])] {
					kept = append(kept, e)
				}
			}
			st["traffic"] = kept
		}
	}
	status := map[string]any{}
	if st, ok := u["status"].(map[string]any); ok {
		for _, k := range []string{"traffic", "stableVersion"} {
			if v, ok := st[k]; ok {
				status[k] = v
			}
		}
	}
	u["status"] = status
	md, _ := u["metadata"].(map[string]any)
	meta := map[string]any{"name": md["name"], "namespace": md["namespace"]}
	for _, k := range []string{"labels", "generation"} {
		if v, ok := md[k]; ok && v != nil {
			meta[k] = v
		}
	}
	u["metadata"] = meta
	return r.Publisher.Render(ctx, t, u, render.Resolved{})
}

// deployments reads the rendered Deployments of every version with traffic.
func (r *WorkloadReconciler) deployments(ctx context.Context, w *scribev1.Workload, b *render.Bundle) health.Verdict {
	var vs []health.Verdict
	for _, tr := range w.Status.Traffic {
		if tr.Version == w.Status.RolledBackVersion && tr.Weight == 0 {
			continue // the abandoned version is expected to be unhealthy
		}
		name := deploymentName(w, tr.Version)
		d := &appsv1.Deployment{}
		if err := r.Publisher.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: name}, d); err != nil {
			msg := err.Error()
			if apierrors.IsNotFound(err) {
				msg = "not created yet"
			}
			vs = append(vs, health.Verdict{State: health.Pending, Reason: "NotObserved", Message: "Deployment " + name + ": " + msg})
			continue
		}
		v := health.Deployment(d)
		if v.State != health.Healthy {
			v.Message = "Deployment " + name + ": " + v.Message
		}
		vs = append(vs, v)
	}
	_ = b
	return health.Aggregate(vs...)
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

func (r *WorkloadReconciler) analysisInterval(w *scribev1.Workload) time.Duration {
	if a := w.Spec.Rollout; a != nil && a.Analysis != nil && a.Analysis.Interval != nil && a.Analysis.Interval.Duration > 0 {
		return a.Analysis.Interval.Duration
	}
	return 30 * time.Second
}

// steps are the rollout's steps as weights of the new version: canary uses
// spec.rollout.steps; blueGreen runs the new version dark (weight 0), then
// switches; rolling switches at once.
func steps(w *scribev1.Workload) []scribev1.RolloutStep {
	ro := w.Spec.Rollout
	if ro == nil {
		return []scribev1.RolloutStep{{Weight: 100}}
	}
	switch ro.Strategy {
	case "blueGreen":
		var p *metav1.Duration
		if len(ro.Steps) > 0 {
			p = ro.Steps[0].Pause
		}
		return []scribev1.RolloutStep{{Weight: 0, Pause: p}, {Weight: 100}}
	case "rolling":
		return []scribev1.RolloutStep{{Weight: 100}}
	}
	if len(ro.Steps) == 0 {
		return []scribev1.RolloutStep{{Weight: 100}}
	}
	return ro.Steps
}

func stepTraffic(w *scribev1.Workload, i int) []scribev1.VersionWeight {
	s := steps(w)[i]
	if w.Spec.Rollout != nil && w.Spec.Rollout.Strategy == "rolling" {
		return []scribev1.VersionWeight{{Version: w.Status.CanaryVersion, Weight: 100}}
	}
	return []scribev1.VersionWeight{{Version: w.Status.StableVersion, Weight: 100 - s.Weight}, {Version: w.Status.CanaryVersion, Weight: s.Weight}}
}

func pause(w *scribev1.Workload, step int32) time.Duration {
	s := steps(w)
	if step < 0 || int(step) >= len(s) || s[step].Pause == nil {
		return 0
	}
	return s[step].Pause.Duration
}

func hasVersion(w *scribev1.Workload, v string) bool {
	for _, x := range w.Spec.Versions {
		if x.Name == v {
			return true
		}
	}
	return false
}

func sameTraffic(a, b []scribev1.VersionWeight) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func fmtTraffic(tr []scribev1.VersionWeight) string {
	parts := make([]string, 0, len(tr))
	for _, t := range tr {
		parts = append(parts, fmt.Sprintf("%s=%d%%", t.Version, t.Weight))
	}
	return strings.Join(parts, ",")
}

func deploymentName(w *scribev1.Workload, version string) string {
	base := w.Name
	if w.Spec.Service.Name != "" {
		base = w.Spec.Service.Name
	}
	return base + "-" + version
}

func shortRev(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// generated records where the bundle went and what it holds.
func generated(t *Target, b *render.Bundle) *scribev1.GeneratedResources {
	g := &scribev1.GeneratedResources{Objects: append([]scribev1.ObjectIdentity{b.Sync}, b.Objects...)}
	p := t.Input.Path
	if p == "" || p == "." {
		g.Path = b.Dir
	} else {
		g.Path = p + "/" + b.Dir
	}
	return g
}
