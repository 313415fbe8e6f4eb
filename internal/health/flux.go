package health

import (
	"context"
	"fmt"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fluxFailureReason maps the Ready=False reasons with which kustomize-controller
// reports that a revision failed (rather than is waiting or retrying on a
// transient problem) to this package's reasons. Ready=False with any other
// reason (Progressing, ProgressingWithRetry, DependencyNotReady,
// ArtifactFailed, HealthCheckCanceled, DirectoryCreationFailed, ...) is
// Pending. Terminal configuration errors (InvalidCELExpression, AccessDenied,
// FeatureGateDisabled) come with Stalled=True and are Failed through that.
func fluxFailureReason(reason string) (string, bool) {
	switch reason {
	case meta.ReconciliationFailedReason:
		return ReasonApplyFailed, true
	case meta.BuildFailedReason:
		return ReasonBuildFailed, true
	case meta.PruneFailedReason:
		return ReasonPruneFailed, true
	case meta.HealthCheckFailedReason:
		return ReasonHealthCheckFailed, true
	}
	return "", false
}

// FluxKustomization decides whether a Flux Kustomization applied commit and
// is healthy.
//
//   - Healthy: status.observedGeneration == metadata.generation, Ready=True,
//     and status.lastAppliedOriginRevision (set when the source is an OCI
//     artifact naming the commit it was made from) is commit or (per anc)
//     a descendant or an ancestor of it with our paths the same, or
//     status.lastAppliedRevision is commit or (per anc) a descendant in
//     which our paths are unchanged. With spec.wait or healthChecks,
//     kustomize-controller only advances lastAppliedRevision after apply,
//     prune and health checks pass.
//   - Failed: Stalled=True; or status.lastAttemptedRevision is commit (or a
//     descendant per anc) and Ready=False at the current generation with a
//     failure reason (ReconciliationFailed, BuildFailed, PruneFailed,
//     HealthCheckFailed). Message is Flux's condition message verbatim.
//   - Pending otherwise, with a reason saying why: NotObserved (generation
//     not observed), RevisionNotApplied (applied revision is not ours), the
//     Ready reason while reconciling or retrying (e.g. Progressing,
//     DependencyNotReady, ArtifactFailed), NotReady (ours was applied but the
//     latest attempt, at another revision, is not Ready), Suspended,
//     Terminating, NotFound (ks is nil).
//
// commit may be a git SHA or an OCI digest ("sha256:…"); revisions compare on
// their hash part (see RevisionHash). The error is non-nil only when commit is
// empty or anc fails; the verdict is then Pending.
func FluxKustomization(ctx context.Context, ks *kustomizev1.Kustomization, commit string, anc Ancestry) (Verdict, error) {
	return flux(ctx, ks, commit, anc, false)
}

// FluxPruned decides whether a Flux Kustomization has pruned the objects that
// a deletion commit removed from Git: Healthy (Reason Pruned) once
// status.lastAppliedRevision is commit or (per anc) a descendant with our
// paths unchanged, because kustomize-controller prunes before it records a
// revision as applied. Failed when spec.prune is false (Reason PruneDisabled:
// Flux never deletes the objects), on Stalled=True, or when the attempt at
// commit failed as in FluxKustomization. Pending otherwise.
//
// When the Kustomization itself is gone the caller decides (it gets NotFound
// from its client); a nil ks yields Pending with Reason NotFound.
func FluxPruned(ctx context.Context, ks *kustomizev1.Kustomization, commit string, anc Ancestry) (Verdict, error) {
	return flux(ctx, ks, commit, anc, true)
}

func flux(ctx context.Context, ks *kustomizev1.Kustomization, commit string, anc Ancestry, prune bool) (Verdict, error) {
	if ks == nil {
		return Verdict{State: Pending, Reason: ReasonNotFound, Message: "Kustomization not found"}, nil
	}
	st := &ks.Status
	v := Verdict{
		AppliedRevision: appliedRevision(st),
		Subject:         subject("Kustomization", ks.Namespace, ks.Name),
	}
	revs, err := newRevisions(commit, anc)
	if err != nil {
		return pending(v, ReasonUnknown, err.Error()), err
	}
	gen := ks.Generation

	if prune && !ks.Spec.Prune {
		return failed(v, ReasonPruneDisabled,
			"spec.prune is false: Flux does not delete objects removed from the source"), nil
	}

	// An artifact Scribe pushed for the custom resource alone (per-CR
	// artifacts) carries a commit as its origin revision: ours, or
	// (per anc) an ancestor of ours in which our paths are the same (a
	// later commit that left this custom resource's directory alone).
	applied := false
	if st.LastAppliedOriginRevision != "" {
		applied, err = revs.match(ctx, st.LastAppliedOriginRevision)
		if err == nil && !applied {
			applied, err = revs.ancestor(ctx, st.LastAppliedOriginRevision)
		}
	}
	if err == nil && !applied {
		applied, err = revs.match(ctx, st.LastAppliedRevision)
	}
	if err != nil {
		return pending(v, ReasonUnknown, err.Error()), err
	}
	ready := apimeta.FindStatusCondition(st.Conditions, meta.ReadyCondition)

	if prune && applied {
		return Verdict{State: Healthy, Reason: ReasonPruned, AppliedRevision: v.AppliedRevision, Subject: v.Subject,
			Message: fmt.Sprintf("revision %s applied and pruned", v.AppliedRevision)}, nil
	}
	if !prune && applied && st.ObservedGeneration == gen &&
		ready != nil && ready.Status == metav1.ConditionTrue && conditionCurrent(ready, gen) {
		return Verdict{State: Healthy, Reason: ReasonHealthy, AppliedRevision: v.AppliedRevision, Subject: v.Subject,
			Message: ready.Message}, nil
	}

	if c := apimeta.FindStatusCondition(st.Conditions, meta.StalledCondition); c != nil &&
		c.Status == metav1.ConditionTrue && conditionCurrent(c, gen) {
		return failed(v, ReasonStalled, c.Message), nil
	}

	attempted, err := revs.match(ctx, st.LastAttemptedRevision)
	if err != nil {
		return pending(v, ReasonUnknown, err.Error()), err
	}
	readyCurrent := ready != nil && conditionCurrent(ready, gen)
	if attempted && readyCurrent && ready.Status == metav1.ConditionFalse {
		if reason, ok := fluxFailureReason(ready.Reason); ok {
			return failed(v, reason, ready.Message), nil
		}
	}

	switch {
	case !ks.DeletionTimestamp.IsZero():
		return pending(v, ReasonTerminating, "Kustomization is being deleted"), nil
	case ready != nil && !readyCurrent:
		return pending(v, ReasonNotObserved, fmt.Sprintf(
			"Ready condition is for generation %d, Kustomization is at generation %d", ready.ObservedGeneration, gen)), nil
	case !prune && st.ObservedGeneration != gen:
		return pending(v, ReasonNotObserved, fmt.Sprintf(
			"generation %d not yet observed (observed %d)", gen, st.ObservedGeneration)), nil
	case attempted && ready != nil && ready.Status != metav1.ConditionTrue:
		// Our revision is being reconciled, or is retried on a transient
		// problem: report Flux's reason and message.
		reason := ready.Reason
		if reason == "" {
			reason = ReasonProgressing
		}
		return pending(v, reason, ready.Message), nil
	case !applied && ks.Spec.Suspend:
		return pending(v, ReasonSuspended, fmt.Sprintf(
			"Kustomization is suspended; last applied revision %q", st.LastAppliedRevision)), nil
	case !applied:
		msg := fmt.Sprintf("last applied revision %q is not %s or a descendant with our paths unchanged",
			v.AppliedRevision, revs.ours)
		if st.LastAttemptedRevision != "" && st.LastAttemptedRevision != st.LastAppliedRevision {
			msg += fmt.Sprintf("; last attempted revision %q", st.LastAttemptedRevision)
		}
		if ready != nil && ready.Status == metav1.ConditionFalse && ready.Message != "" {
			msg += fmt.Sprintf("; Ready=False (%s): %s", ready.Reason, ready.Message)
		}
		return pending(v, ReasonRevisionNotApplied, msg), nil
	case ready == nil:
		return pending(v, ReasonProgressing, "no Ready condition yet"), nil
	default:
		// Our revision was applied, but Ready is not True for the latest
		// attempt, which is at a revision that is not ours (a later commit
		// that changed our paths, or a source rollback).
		return pending(v, ReasonNotReady, fmt.Sprintf("revision %q applied; the latest attempt, at %q, reports Ready=%s (%s): %s",
			st.LastAppliedRevision, st.LastAttemptedRevision, ready.Status, ready.Reason, ready.Message)), nil
	}
}

// appliedRevision is the revision a Kustomization last applied as a
// commit when its source says which (an OCI artifact's
// org.opencontainers.image.revision, Flux's lastAppliedOriginRevision),
// else its lastAppliedRevision.
func appliedRevision(st *kustomizev1.KustomizationStatus) string {
	if st.LastAppliedOriginRevision != "" {
		return st.LastAppliedOriginRevision
	}
	return st.LastAppliedRevision
}

// conditionCurrent reports whether a condition was written for generation
// gen. Flux's condition setter always records the object's generation; a zero
// ObservedGeneration (not recorded) is accepted.
func conditionCurrent(c *metav1.Condition, gen int64) bool {
	return c.ObservedGeneration == 0 || c.ObservedGeneration == gen
}

func pending(v Verdict, reason, msg string) Verdict {
	v.State, v.Reason, v.Message = Pending, reason, msg
	return v
}

func failed(v Verdict, reason, msg string) Verdict {
	v.State, v.Reason, v.Message = Failed, reason, msg
	return v
}

func subject(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}
