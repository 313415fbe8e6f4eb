package health

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ArgoApplication decides whether an Argo CD Application
// (argoproj.io/v1alpha1, read as unstructured) synced commit and is healthy.
// The checks, in order:
//
//  1. No operation in flight: a top-level .operation, or
//     status.operationState.phase Running or Terminating, is Pending
//     (OperationInProgress).
//  2. status.conditions of type InvalidSpecError is Failed, but Pending
//     (DestinationNotRegistered) when it says the destination cluster is
//     not registered (a target cluster not registered yet); ComparisonError
//     is Failed when status.sync.revision(s) is ours or empty (Argo could not
//     resolve or render it), and Pending (RevisionNotApplied) when Argo is
//     still comparing another revision. Message is Argo's verbatim.
//  3. status.operationState.phase Failed or Error for a sync of our revision
//     (operationState.syncResult.revision(s), else operation.sync.revision(s))
//     is Failed (SyncFailed) with operationState.message.
//  4. status.reconciledAt >= status.operationState.finishedAt, else Pending
//     (StaleHealth): health was computed before the sync finished.
//  5. status.sync.revision, or any of status.sync.revisions for multi-source
//     Applications, is commit or (per anc) a descendant with our paths
//     unchanged, else Pending (RevisionNotApplied).
//  6. status.sync.status is Synced, else Pending (OutOfSync): Argo compared
//     our revision but has not applied it yet.
//  7. status.health.status Healthy is Healthy; Degraded is Failed with
//     status.health.message (or the first Degraded resource's message);
//     Progressing, Missing, Suspended, Unknown or empty are Pending.
//
// The error is non-nil only when commit is empty or anc fails; the verdict is
// then Pending.
// argoNoClusterMessage is how Argo CD (util/argo.GetDestinationCluster)
// says that no cluster registration has the destination's name.
const argoNoClusterMessage = "there are no clusters with this name"

func ArgoApplication(ctx context.Context, app *unstructured.Unstructured, commit string, anc Ancestry) (Verdict, error) {
	o := content(app)
	if o == nil {
		return Verdict{State: Pending, Reason: ReasonNotFound, Message: "Application not found"}, nil
	}
	subj := subject("Application", str(o, "metadata", "namespace"), str(o, "metadata", "name"))
	st := obj(o, "status")
	v := Verdict{Subject: subj, AppliedRevision: str(st, "sync", "revision")}
	if v.AppliedRevision == "" {
		v.AppliedRevision = strings.Join(strs(st, "sync", "revisions"), ",")
	}
	revs, err := newRevisions(commit, anc)
	if err != nil {
		return pending(v, ReasonUnknown, err.Error()), err
	}

	// 1. Operation in flight.
	if op, ok := field(o, "operation"); ok && op != nil {
		return pending(v, ReasonOperationInProgress, "an operation is requested"), nil
	}
	opState := obj(st, "operationState")
	phase := str(opState, "phase")
	switch phase {
	case "Running", "Terminating":
		msg := "operation " + strings.ToLower(phase)
		if m := str(opState, "message"); m != "" {
			msg += ": " + m
		}
		return pending(v, ReasonOperationInProgress, msg), nil
	}

	// 2. Spec and comparison errors.
	syncRevs := strs(st, "sync", "revisions")
	if r := str(st, "sync", "revision"); r != "" {
		syncRevs = append([]string{r}, syncRevs...)
	}
	synced, matched, err := anyMatch(ctx, revs, syncRevs)
	if err != nil {
		return pending(v, ReasonUnknown, err.Error()), err
	}
	if synced {
		v.AppliedRevision = matched
	}
	cs := conditions(st, "conditions")
	if c := findCond(cs, "InvalidSpecError"); c != nil {
		if strings.Contains(c.Message, argoNoClusterMessage) {
			return pending(v, ReasonDestinationNotRegistered, c.Message), nil
		}
		return failed(v, ReasonInvalidSpecError, c.Message), nil
	}
	if c := findCond(cs, "ComparisonError"); c != nil {
		if synced || len(syncRevs) == 0 {
			return failed(v, ReasonComparisonError, c.Message), nil
		}
		return pending(v, ReasonRevisionNotApplied, fmt.Sprintf(
			"Argo CD compared revision %s, not %s; ComparisonError: %s", strings.Join(syncRevs, ","), revs.ours, c.Message)), nil
	}

	// 3. Failed sync of our revision.
	if phase == "Failed" || phase == "Error" {
		opRevs := strs(opState, "syncResult", "revisions")
		if r := str(opState, "syncResult", "revision"); r != "" {
			opRevs = append([]string{r}, opRevs...)
		}
		if len(opRevs) == 0 {
			opRevs = strs(opState, "operation", "sync", "revisions")
			if r := str(opState, "operation", "sync", "revision"); r != "" {
				opRevs = append([]string{r}, opRevs...)
			}
		}
		ours, _, err := anyMatch(ctx, revs, opRevs)
		if err != nil {
			return pending(v, ReasonUnknown, err.Error()), err
		}
		if ours {
			return failed(v, ReasonSyncFailed, str(opState, "message")), nil
		}
	}

	// 4. Health computed after the last sync finished.
	if finished := str(opState, "finishedAt"); finished != "" {
		reconciled := str(st, "reconciledAt")
		fin, ferr := time.Parse(time.RFC3339, finished)
		rec, rerr := time.Parse(time.RFC3339, reconciled)
		if ferr != nil || rerr != nil || rec.Before(fin) {
			return pending(v, ReasonStaleHealth, fmt.Sprintf(
				"health reconciled at %q, before the last sync finished at %q", reconciled, finished)), nil
		}
	}

	// 5. Our revision compared.
	if !synced {
		return pending(v, ReasonRevisionNotApplied, fmt.Sprintf(
			"sync revision %q is not %s or a descendant with our paths unchanged", strings.Join(syncRevs, ","), revs.ours)), nil
	}

	// 6. Live state matches it.
	if s := str(st, "sync", "status"); s != "Synced" {
		if s == "" {
			s = "no sync status"
		}
		return pending(v, ReasonOutOfSync, fmt.Sprintf("sync status is %s", s)), nil
	}

	// 7. Health.
	hs := str(st, "health", "status")
	msg := str(st, "health", "message")
	switch hs {
	case "Healthy":
		v.State, v.Reason, v.Message = Healthy, ReasonHealthy, msg
		return v, nil
	case "Degraded":
		if msg == "" {
			msg = degradedResource(st)
		}
		return failed(v, ReasonDegraded, msg), nil
	case "":
		return pending(v, ReasonUnknown, "no health status"), nil
	default:
		return pending(v, hs, msg), nil
	}
}

// anyMatch reports whether any of rs matches our commit, and which.
func anyMatch(ctx context.Context, revs *revisions, rs []string) (bool, string, error) {
	for _, r := range rs {
		ok, err := revs.match(ctx, r)
		if err != nil {
			return false, "", err
		}
		if ok {
			return true, r, nil
		}
	}
	return false, "", nil
}

// degradedResource describes the first resource in status.resources whose
// health is Degraded, for Applications whose own health has no message.
func degradedResource(st map[string]any) string {
	for _, e := range list(st, "resources") {
		r, ok := e.(map[string]any)
		if !ok || str(r, "health", "status") != "Degraded" {
			continue
		}
		s := subject(str(r, "kind"), str(r, "namespace"), str(r, "name"))
		if m := str(r, "health", "message"); m != "" {
			return s + ": " + m
		}
		return s + " is Degraded"
	}
	return "Application is Degraded"
}
