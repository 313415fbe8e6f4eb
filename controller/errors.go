package controller

import (
	"errors"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

// Reasons of Ready=False that the controller sets itself.
const (
	ReasonRepositoryNotFound = "RepositoryNotFound"
	ReasonRepositoryNotReady = "RepositoryNotReady"
	ReasonSecretNotFound     = "SecretNotFound"
	// ReasonSourceNotFound: the Flux GitRepository a Repository names
	// does not exist.
	ReasonSourceNotFound = "SourceNotFound"
	// ReasonNamespaceNotWatched: the applier's namespace is not among the
	// namespaces the controller watches (--watch-namespaces).
	ReasonNamespaceNotWatched = "NamespaceNotWatched"
	ReasonApplyPending        = "ApplyPending"
	ReasonApplyFailed         = "ApplyFailed"
	ReasonSucceeded           = "Succeeded"
	ReasonProgressing         = "Progressing"
	ReasonRolledBack          = "RolledBack"
	// ReasonAwaitingPromotion: a step with `pause: {}` is held until
	// promoted.
	ReasonAwaitingPromotion = "AwaitingPromotion"
	// ReasonAwaitingConfirmation: a step waits for its
	// confirm-promotion webhooks.
	ReasonAwaitingConfirmation = "AwaitingConfirmation"
	// ReasonPaused: spec.paused holds the rollout at its step.
	ReasonPaused = "Paused"
	// ReasonSuspended: spec.suspend stops the reconciliation.
	ReasonSuspended = "Suspended"
	ReasonPruning   = "Pruning"
	// ReasonSigningKeyInvalid: the Repository's signing Secret holds no
	// usable key.
	ReasonSigningKeyInvalid = "SigningKeyInvalid"
	// ReasonResolveFailed: what an Experiment's render needs from the
	// cluster (the agent's Service, the OTLP ConfigMap) could not be read.
	ReasonResolveFailed = "ResolveFailed"
)

// Requeue intervals of the failure table.
const (
	// stalledRetryInterval: a stalled object is tried again this often
	// (a change of the object itself is reconciled at once).
	stalledRetryInterval = 30 * time.Second
	// dependencyRetryInterval: how soon a Repository or catalog that is on
	// its way is looked at again.
	dependencyRetryInterval = 5 * time.Second
	// remoteRetryInterval: the remote's trouble is retried at this steady
	// pace rather than controller-runtime's growing backoff.
	remoteRetryInterval = 5 * time.Second
)

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

// failure is how every reconciler answers an error.
type failure struct {
	// Reason of Ready=False (and of Stalled or Reconciling).
	Reason string
	// Stalled: only a change of the object, its Repository or a Secret
	// can fix it.
	Stalled bool
	// Waiting: a dependency (the Repository's access check, the catalog's
	// artifact) is on its way; Reconciling says so.
	Waiting bool
	// RequeueAfter is when to try again; zero returns the error, so
	// controller-runtime retries with its growing backoff.
	RequeueAfter time.Duration
}

// classify is the one table from an error's reason to its handling,
// shared by every kind.
func classify(err error) failure {
	reason := reasonOf(err)
	switch reason {
	// ReasonRepositoryNotFound is also publish.ReasonNotFound: the Git
	// remote has no such repository.
	// A collision with another custom resource's object, or a sync index
	// someone else wrote, waits for a person to change either side.
	case scribev1.RenderFailedReason, ReasonRepositoryNotFound, string(publish.ReasonInvalid),
		ReasonSecretNotFound, ReasonCatalogInvalid, ReasonPullRequestsNotConfigured, ReasonNamespaceNotWatched,
		ReasonNotPermitted, ReasonPolicyConflict, ReasonPolicyInvalid, ReasonCredentialNotBound,
		string(publish.ReasonObjectConflict), string(publish.ReasonSyncIndexConflict):
		return failure{Reason: reason, Stalled: true, RequeueAfter: stalledRetryInterval}
	case ReasonRepositoryNotReady, ReasonCatalogNotReady, ReasonSourceNotFound:
		return failure{Reason: reason, Waiting: true, RequeueAfter: dependencyRetryInterval}
	case string(publish.ReasonUnreachable), string(publish.ReasonConflict), string(publish.ReasonAuthentication),
		string(publish.ReasonHostKey), string(publish.ReasonRejected):
		return failure{Reason: reason, RequeueAfter: remoteRetryInterval}
	}
	return failure{Reason: reason}
}

// mark records err in obj's conditions: Ready=False always, then Stalled
// or Reconciling as the table says.
func (f failure) mark(obj conditions.Setter, err error) {
	conditions.MarkFalse(obj, scribev1.ReadyCondition, f.Reason, "%s", err.Error())
	switch {
	case f.Stalled:
		conditions.MarkStalled(obj, f.Reason, "%s", err.Error())
	case f.Waiting:
		conditions.MarkReconciling(obj, f.Reason, "%s", err.Error())
	}
}

// result is the reconcile result of the failure.
func (f failure) result(err error) (ctrl.Result, error) {
	if f.RequeueAfter == 0 {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: f.RequeueAfter}, nil
}

// fail records err in obj's conditions and says when to come back, by the
// table. The phase is left as it is: nothing new was committed.
func fail(obj object, err error) (ctrl.Result, error) {
	f := classify(err)
	f.mark(obj, err)
	if f.RequeueAfter != 0 {
		log.Log.V(1).Info("reconcile failed; retrying", "object", client.ObjectKeyFromObject(obj).String(),
			"reason", f.Reason, "after", f.RequeueAfter, "error", err.Error())
	}
	return f.result(err)
}
