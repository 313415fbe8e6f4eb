package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// ReasonPullRequestsNotConfigured: a Workload asks for pull requests
// (spec.rollout.promotion or spec.rollout.rollback pullRequest) and its
// Repository cannot open them (no spec.git.pullRequest, or an OCI
// Repository). Stalled: committing directly would skip the review.
const ReasonPullRequestsNotConfigured = "PullRequestsNotConfigured"

// checkPullRequests refuses a Workload whose rollout asks for pull
// requests from a Repository that cannot open them, naming both fields.
func checkPullRequests(w *scribev1.Workload, t *Target) error {
	field := needsPullRequests(w)
	if field == "" || t.PullRequests() {
		return nil
	}
	repo := fmt.Sprintf("%s/%s", t.Repo.Namespace, t.Repo.Name)
	why := "has no spec.git.pullRequest"
	if t.Repo.Spec.Git == nil {
		why = "is not a Git repository, so it has no spec.git.pullRequest"
	}
	return &reasonError{reason: ReasonPullRequestsNotConfigured, err: fmt.Errorf(
		"%s is pullRequest, but Repository %s %s: nothing is committed until the Repository can open pull requests (set spec.git.pullRequest) or %s is changed",
		field, repo, why, field)}
}

// rollbackTarget is where a direct rollback is committed: in pull-request
// mode, the branch pull requests target (which the applier follows), not
// the branch Scribe pushes proposals from.
func (r *WorkloadReconciler) rollbackTarget(w *scribev1.Workload, t *Target) (*Target, error) {
	if !rollingBack(w) || throughPullRequest(w) || !t.PullRequests() {
		return t, nil
	}
	base := baseOpts(t)
	if base.Branch == t.GitOpts.Branch {
		return t, nil
	}
	sink, err := r.Publisher.Git.Sink(base)
	if err != nil {
		return nil, fmt.Errorf("rollback to branch %s: %w", base.Branch, err)
	}
	direct := *t
	direct.Sink = sink
	direct.GitOpts = &base
	return &direct, nil
}

// commitWhat says what a direct commit of w is, for the note on the pull
// request it supersedes.
func commitWhat(w *scribev1.Workload) string {
	if rollingBack(w) {
		return fmt.Sprintf("the rollback of %s to %s", w.Status.RolledBackVersion, w.Status.StableVersion)
	}
	return fmt.Sprintf("a change of Workload %s/%s", w.Namespace, w.Name)
}

// reportClosedProposal records what closing the pull request a direct
// commit superseded came to: the pull request closed, or why it is still
// open (the commit stands; the next proposal updates that pull request).
func (r *WorkloadReconciler) reportClosedProposal(w *scribev1.Workload, d delivered) {
	switch {
	case d.CloseErr != nil:
		r.Events.Eventf(w, nil, corev1.EventTypeWarning, ReasonPullRequestNotClosed, ReasonPullRequestNotClosed,
			"%s was committed as %s, but its open pull request could not be closed: %s", commitWhat(w), shortRev(d.Result.Commit), oneLine(d.CloseErr.Error(), 512))
	case d.Closed != nil:
		r.Events.Eventf(w, nil, corev1.EventTypeNormal, ReasonPullRequestSuperseded, ReasonPullRequestSuperseded,
			"closed pull request #%d: %s was committed directly as %s", d.Closed.Number, commitWhat(w), shortRev(d.Result.Commit))
	}
}

// Reasons of the events about a pull request a direct commit superseded.
const (
	ReasonPullRequestSuperseded = "PullRequestSuperseded"
	ReasonPullRequestNotClosed  = "PullRequestSupersededNotClosed"
)
