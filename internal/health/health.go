// Package health decides, from status that has already been read, whether a
// Scribe commit was applied by the GitOps applier (Flux or Argo CD) and
// whether what it applied is healthy.
//
// It implements the read-back contract of DESIGN.md ("Applied and healthy"):
// first the applier's own object (a Flux Kustomization or an Argo CD
// Application) must show that it applied our commit, or a descendant in which
// our paths are unchanged, and that its health assessment is current; then the
// rendered objects' own status decides (Object, Deployment).
//
// Everything here is a pure function of its arguments: no client calls, no
// package-level state. The only callback is Ancestry, which the caller backs
// with its Git store. No function panics on malformed input; a status that
// cannot be read yields a Pending verdict.
package health

import (
	"context"
	"fmt"
	"strings"
)

// State is the outcome of a health read-back.
type State string

// States of a Verdict.
const (
	// Pending means not applied yet, or applied and still in progress, or the
	// status is not current enough to decide. Callers wait and look again.
	Pending State = "Pending"
	// Healthy means applied and healthy.
	Healthy State = "Healthy"
	// Failed means the applier or the applied objects report a failure for
	// our revision.
	Failed State = "Failed"
)

// Reasons set on verdicts. Verdicts may also carry a reason taken verbatim
// from the applier (for example Flux's "DependencyNotReady") or from a
// Kubernetes condition; these constants are the ones this package chooses.
const (
	// ReasonHealthy: applied (where that applies) and healthy.
	ReasonHealthy = "Healthy"
	// ReasonPruned: the applier applied a revision at or after the deletion
	// commit, so it pruned the objects removed by it.
	ReasonPruned = "Pruned"

	// ReasonNotFound: the object was nil (not fetched or gone).
	ReasonNotFound = "NotFound"
	// ReasonNotObserved: the controller has not yet observed the current
	// generation (status.observedGeneration or the condition's
	// observedGeneration lags metadata.generation).
	ReasonNotObserved = "NotObserved"
	// ReasonRetryRequested: the applier failed, but a reconcile was asked
	// of it since (Flux's reconcile.fluxcd.io/requestedAt not yet in
	// status.lastHandledReconcileAt, Argo CD's refresh annotation not yet
	// removed): the failure may be stale.
	ReasonRetryRequested = "RetryRequested"
	// ReasonProgressing: reconciliation or rollout in progress.
	ReasonProgressing = "Progressing"
	// ReasonSyncedProgressing: an applier synced the commit and its health
	// is fresh but not Healthy yet (Argo CD's Progressing): applied.
	ReasonSyncedProgressing = "SyncedProgressing"
	// ReasonRevisionNotApplied: the applier's applied/synced revision is not
	// our commit nor a descendant in which our paths are unchanged.
	ReasonRevisionNotApplied = "RevisionNotApplied"
	// ReasonStaleHealth: Argo CD computed health before the last sync
	// finished (status.reconciledAt < status.operationState.finishedAt).
	ReasonStaleHealth = "StaleHealth"
	// ReasonOperationInProgress: an Argo CD operation is requested or running.
	ReasonOperationInProgress = "OperationInProgress"
	// ReasonNotReady: our revision was applied, but the applier's latest
	// attempt, at a revision that is not ours, is not Ready.
	ReasonNotReady = "NotReady"
	// ReasonOutOfSync: Argo CD compared our revision but live state does not
	// match it yet.
	ReasonOutOfSync = "OutOfSync"
	// ReasonSuspended: the applier is suspended and has not applied our commit.
	ReasonSuspended = "Suspended"
	// ReasonTerminating: the object is being deleted.
	ReasonTerminating = "Terminating"
	// ReasonUnknown: the status gives no usable answer (missing or malformed).
	ReasonUnknown = "Unknown"

	// ReasonStalled: the applier reports Stalled=True; it will not make
	// progress without a change.
	ReasonStalled = "Stalled"
	// ReasonApplyFailed: applying the manifests failed (Flux
	// ReconciliationFailed).
	ReasonApplyFailed = "ApplyFailed"
	// ReasonBuildFailed: building the manifests failed (Flux BuildFailed).
	ReasonBuildFailed = "BuildFailed"
	// ReasonPruneFailed: pruning removed objects failed (Flux PruneFailed).
	ReasonPruneFailed = "PruneFailed"
	// ReasonHealthCheckFailed: the applier's health checks failed.
	ReasonHealthCheckFailed = "HealthCheckFailed"
	// ReasonPruneDisabled: the Kustomization has spec.prune=false, so objects
	// removed from Git are never deleted.
	ReasonPruneDisabled = "PruneDisabled"
	// ReasonSyncFailed: the Argo CD sync operation at our revision ended in
	// phase Failed or Error.
	ReasonSyncFailed = "SyncFailed"
	// ReasonComparisonError: Argo CD could not compare (render) the revision.
	ReasonComparisonError = "ComparisonError"
	// ReasonInvalidSpecError: the Argo CD Application spec is invalid.
	ReasonInvalidSpecError = "InvalidSpecError"
	// ReasonDestinationNotRegistered: the Argo CD Application's
	// destination cluster has no Argo CD cluster registration (yet): a
	// target cluster still being created, or one nothing registers.
	ReasonDestinationNotRegistered = "DestinationNotRegistered"
	// ReasonDegraded: health status Degraded.
	ReasonDegraded = "Degraded"
	// ReasonFailed: the object reports a failure (kstatus Failed, a failed
	// Workflow or test execution, a failed Cluster).
	ReasonFailed = "Failed"
	// ReasonNotSynced: a Crossplane-style resource reports Synced=False.
	ReasonNotSynced = "NotSynced"
)

// Verdict is the result of a health read-back.
type Verdict struct {
	// State is Pending, Healthy or Failed.
	State State
	// Reason is a short CamelCase reason, e.g. "ApplyFailed",
	// "HealthCheckFailed", "Progressing", "StaleHealth", "NotObserved".
	Reason string
	// Message is a human message; for failures it is the applier's or the
	// object's own message verbatim.
	Message string
	// AppliedRevision is the revision the applier reports as applied, e.g.
	// Flux status.lastAppliedRevision or Argo CD status.sync.revision.
	AppliedRevision string
	// Subject names what the verdict is about, as "Kind/namespace/name" (or
	// "Kind/name" for cluster-scoped objects). Aggregate uses it to say which
	// object failed or is pending.
	Subject string
}

// String formats the verdict for logs.
func (v Verdict) String() string {
	var b strings.Builder
	if v.Subject != "" {
		b.WriteString(v.Subject)
		b.WriteString(": ")
	}
	b.WriteString(string(v.State))
	if v.Reason != "" {
		b.WriteString(" (")
		b.WriteString(v.Reason)
		b.WriteString(")")
	}
	if v.Message != "" {
		b.WriteString(": ")
		b.WriteString(v.Message)
	}
	return b.String()
}

// Ancestry reports whether applied is ours or a descendant of ours in which
// Scribe's owned paths are unchanged.
//
// The functions in this package call it only when the applier's revision
// differs from ours, and pass both as bare hashes: the part after any
// "<ref>@" and "<algorithm>:" prefix, lower-cased (a git commit SHA, or an
// OCI digest's hex). A nil Ancestry means "exact match only".
type Ancestry func(ctx context.Context, ours, applied string) (bool, error)

// RevisionHash returns the hash part of a revision string as Flux, Argo CD and
// OCI write them, lower-cased:
//
//	"main@sha1:<hex>"      -> "<hex>"
//	"sha1:<hex>"           -> "<hex>"
//	"<hex>"                -> "<hex>"
//	"latest@sha256:<hex>"  -> "<hex>"
//	"sha256:<hex>"         -> "<hex>"
//	"main/<hex>"           -> "<hex>" (Flux v1beta2 format)
//
// Two revisions name the same commit or artifact when their hashes are equal.
func RevisionHash(rev string) string {
	rev = strings.TrimSpace(rev)
	if i := strings.LastIndexByte(rev, '@'); i >= 0 {
		rev = rev[i+1:]
	}
	if i := strings.LastIndexByte(rev, ':'); i >= 0 {
		rev = rev[i+1:]
	} else if i := strings.LastIndexByte(rev, '/'); i >= 0 {
		rev = rev[i+1:]
	}
	return strings.ToLower(strings.TrimSpace(rev))
}

// revisions matches applier revisions against our commit, asking Ancestry at
// most once per distinct revision.
type revisions struct {
	ours  string
	anc   Ancestry
	cache map[string]bool
}

func newRevisions(commit string, anc Ancestry) (*revisions, error) {
	ours := RevisionHash(commit)
	if ours == "" {
		return nil, fmt.Errorf("health: empty commit %q", commit)
	}
	return &revisions{ours: ours, anc: anc, cache: map[string]bool{}}, nil
}

// match reports whether rev is our commit or, per Ancestry, a descendant in
// which our paths are unchanged. An empty rev never matches.
func (r *revisions) match(ctx context.Context, rev string) (bool, error) {
	h := RevisionHash(rev)
	if h == "" {
		return false, nil
	}
	if h == r.ours {
		return true, nil
	}
	if r.anc == nil {
		return false, nil
	}
	if ok, seen := r.cache[h]; seen {
		return ok, nil
	}
	ok, err := r.anc(ctx, r.ours, h)
	if err != nil {
		return false, fmt.Errorf("health: checking whether %s descends from %s: %w", h, r.ours, err)
	}
	r.cache[h] = ok
	return ok, nil
}

// ancestor reports whether rev is, per Ancestry, an ancestor of our
// commit in which our paths are the same as in ours (our commit
// descends from it with them unchanged). An empty rev, or no Ancestry,
// never matches.
func (r *revisions) ancestor(ctx context.Context, rev string) (bool, error) {
	h := RevisionHash(rev)
	if h == "" || r.anc == nil {
		return false, nil
	}
	if h == r.ours {
		return true, nil
	}
	ok, err := r.anc(ctx, h, r.ours)
	if err != nil {
		return false, fmt.Errorf("health: checking whether %s descends from %s: %w", r.ours, h, err)
	}
	return ok, nil
}

// maxListed bounds how many subjects Aggregate names in one message.
const maxListed = 10

// Aggregate combines verdicts: any Failed gives Failed, with the first
// failure's reason and message prefixed by its subject (and a count of the
// other failures); all Healthy (or no verdicts) gives Healthy; otherwise
// Pending, with the first pending verdict's reason and a message listing what
// is pending. A verdict with an unknown State counts as Pending.
// AppliedRevision is kept when all verdicts that set one agree.
func Aggregate(vs ...Verdict) Verdict {
	out := Verdict{AppliedRevision: commonRevision(vs)}
	var failed, pending []int
	for i, v := range vs {
		switch v.State {
		case Healthy:
		case Failed:
			failed = append(failed, i)
		default:
			pending = append(pending, i)
		}
	}
	switch {
	case len(failed) > 0:
		first := vs[failed[0]]
		out.State = Failed
		out.Reason = first.Reason
		if out.Reason == "" {
			out.Reason = ReasonFailed
		}
		out.Message = label(vs, failed[0]) + ": " + first.Message
		if len(failed) > 1 {
			out.Message += fmt.Sprintf(" (%d more failed: %s)", len(failed)-1, names(vs, failed[1:]))
		}
	case len(pending) > 0:
		first := vs[pending[0]]
		out.State = Pending
		out.Reason = first.Reason
		if out.Reason == "" {
			out.Reason = ReasonProgressing
		}
		parts := make([]string, 0, min(len(pending), maxListed))
		for _, i := range pending[:min(len(pending), maxListed)] {
			p := label(vs, i)
			if vs[i].Reason != "" {
				p += " (" + vs[i].Reason + ")"
			}
			if vs[i].Message != "" {
				p += ": " + vs[i].Message
			}
			parts = append(parts, p)
		}
		out.Message = fmt.Sprintf("waiting for %d of %d: %s", len(pending), len(vs), strings.Join(parts, "; "))
		if len(pending) > maxListed {
			out.Message += fmt.Sprintf("; and %d more", len(pending)-maxListed)
		}
	default:
		out.State = Healthy
		out.Reason = ReasonHealthy
		if len(vs) == 0 {
			out.Message = "nothing to check"
		} else {
			out.Message = fmt.Sprintf("all %d healthy", len(vs))
		}
	}
	return out
}

func label(vs []Verdict, i int) string {
	if vs[i].Subject != "" {
		return vs[i].Subject
	}
	return fmt.Sprintf("#%d", i)
}

func names(vs []Verdict, idx []int) string {
	parts := make([]string, 0, min(len(idx), maxListed))
	for _, i := range idx[:min(len(idx), maxListed)] {
		parts = append(parts, label(vs, i))
	}
	s := strings.Join(parts, ", ")
	if len(idx) > maxListed {
		s += fmt.Sprintf(", and %d more", len(idx)-maxListed)
	}
	return s
}

func commonRevision(vs []Verdict) string {
	rev := ""
	for _, v := range vs {
		switch {
		case v.AppliedRevision == "":
		case rev == "":
			rev = v.AppliedRevision
		case rev != v.AppliedRevision:
			return ""
		}
	}
	return rev
}
