package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/forge"
)

// deliveryJob is what the executor of the delivery actions needs of one
// CR's render.
type deliveryJob struct {
	// Target is the CR's publish target: where pull requests go.
	Target *Target
	// CommitTo is where a direct commit goes (nil: Target); a Workload's
	// rollback may go straight to the base branch.
	CommitTo *Target
	// Source is the CR, UID its UID.
	Source scribev1.ObjectIdentity
	UID    types.UID
	// ResourceVersion is the CR's as the reconcile read (or last wrote)
	// it (DeliveryConfirmIntent).
	ResourceVersion string
	// Written is the CR as the API server answered the reconcile's last
	// write of it (zero: none); see writeWitnesses.
	Written LiveObject
	// Change is the render's commit (DeliveryCommit, DeliveryPropose) and
	// Sync its applier object, nudged after the commit.
	Change publish.Change
	Sync   scribev1.ObjectIdentity
	// Evidence goes into the pull request's description (DeliveryPropose).
	Evidence string
	// Head is the branch of the recorded pull request
	// (DeliveryReadPullRequest).
	Head string
	// MergedSync names the applier object to nudge after a merge (nil:
	// Sync); an error leaves it alone.
	MergedSync func() (scribev1.ObjectIdentity, error)
	// CloseProposal (DeliveryCommit), when not empty, says what the commit
	// is ("the rollback of v2"): once committed, the CR's open pull request
	// is closed, with a note naming the commit.
	CloseProposal string
}

// ReasonStaleStatus: the status a reconcile read is older than the API
// server's (a cache that has not caught up with the last status patch).
// Like ReasonDeleting it is never recorded: the reconcile writes nothing
// and reads the object again.
const ReasonStaleStatus = "StaleStatus"

// isStaleStatus reports whether err is a reconcile stopped by
// DeliveryConfirmIntent.
func isStaleStatus(err error) bool {
	var re *reasonError
	return errors.As(err, &re) && re.reason == ReasonStaleStatus
}

// delivered is what one delivery action showed.
type delivered struct {
	// Current (DeliveryConfirmIntent) says the status read is the latest.
	Current bool
	// Result of the commit (DeliveryCommit).
	Result publish.Result
	// Proposed (DeliveryPropose) and PullRequest (DeliveryReadPullRequest).
	Proposed    *Proposed
	PullRequest *PullRequestState
	// Closed is the pull request closed after the commit
	// (deliveryJob.CloseProposal), CloseErr why it could not be: the
	// commit stands either way.
	Closed   *forge.PullRequest
	CloseErr error
}

// deliver carries out one delivery action that DecideDelivery asked for:
// ConfirmIntent, Commit, Propose or ReadPullRequest. Every kind's
// reconciler calls it, so a change to how a render reaches the branch is
// made here once.
func (p *Publisher) deliver(ctx context.Context, kind DeliveryStepKind, job deliveryJob) (delivered, error) {
	t := job.Target
	switch kind {
	case DeliveryConfirmIntent:
		// One metadata read past the cache. An object that is gone is
		// left to the commit's own check (DecidePublish).
		if p.Reader == nil {
			return delivered{Current: true}, nil
		}
		live, err := p.live(ctx, job.Source)
		if err != nil {
			return delivered{}, err
		}
		if live.Found && live.ResourceVersion != job.ResourceVersion {
			return delivered{}, &reasonError{reason: ReasonStaleStatus, err: fmt.Errorf(
				"the status of %s read at resourceVersion %s is not the latest (%s): its saved intent may be committed already; reading it again",
				publish.ObjectRef(job.Source), job.ResourceVersion, live.ResourceVersion)}
		}
		return delivered{Current: true}, nil
	case DeliveryCommit:
		to := job.CommitTo
		if to == nil {
			to = t
		}
		res, err := p.Publish(ctx, to, job.UID, job.Change, job.Sync, job.Written)
		d := delivered{Result: res}
		if err == nil && job.CloseProposal != "" && t.PullRequests() {
			note := fmt.Sprintf("Closed by Scribe: %s was committed directly to %s as %s; merging this pull request would bring back what it undid.",
				job.CloseProposal, baseOpts(t).Branch, shortRev(res.Commit))
			d.Closed, d.CloseErr = p.CloseProposal(ctx, t, job.Source, note)
		}
		return d, err
	case DeliveryPropose:
		// Nothing is proposed for a CR being deleted either.
		if err := p.mayPublish(ctx, job.UID, job.Change, job.Written); err != nil {
			return delivered{}, err
		}
		prop, err := p.Propose(ctx, t, job.Change, job.Evidence)
		if err != nil {
			return delivered{}, err
		}
		pr := &Proposed{UpToDate: prop.UpToDate}
		if prop.UpToDate {
			if pr.Base, err = p.Git.CheckAccess(ctx, baseOpts(t)); err != nil {
				return delivered{}, err
			}
		} else {
			pr.PullRequest = scribev1.PullRequestStatus{Number: prop.PullRequest.Number, URL: prop.PullRequest.URL, Head: prop.Head, State: string(prop.PullRequest.State)}
		}
		return delivered{Proposed: pr}, nil
	case DeliveryReadPullRequest:
		prop, err := p.ProposalStatus(ctx, t, job.Source, job.Head)
		if err != nil {
			return delivered{}, err
		}
		pr := &PullRequestState{State: string(prop.PullRequest.State), Merged: prop.Merged, Revision: prop.MergeCommit, MergedBy: prop.MergedBy}
		if prop.Merged {
			if pr.Revision == "" {
				if pr.Revision, err = p.Git.CheckAccess(ctx, baseOpts(t)); err != nil {
					return delivered{}, err
				}
			}
			sync, serr := job.Sync, error(nil)
			if job.MergedSync != nil {
				sync, serr = job.MergedSync()
			}
			if serr == nil {
				// A merge may carry a new sync file too.
				p.Nudge(ctx, t, sync, true)
			}
			// Every kind's merged branch is deleted, by one rule: only
			// Scribe's own commit, or one the base holds (a foreign
			// commit nobody merged is kept). A next proposal pushes it
			// again on the base's tip.
			p.deleteMergedBranch(ctx, t, job.Source, job.Head)
		}
		return delivered{PullRequest: pr}, nil
	}
	return delivered{}, nil
}

// headOf is the branch of the recorded pull request pr (nil: none).
func headOf(pr *scribev1.PullRequestStatus) string {
	if pr == nil {
		return ""
	}
	return pr.Head
}
