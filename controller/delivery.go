package controller

import (
	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// Delivery: getting a render onto the branch, directly or through a pull
// request, and recording the commit that carries it. The rollout
// (rollout.go) and the Experiment's stages (stages.go) ask the same
// question before anything is read back, over the status every kind
// shares (revision, digest, generated resources and the recorded pull
// request, scribev1.CommonStatus); DecideDelivery answers it once, and the reconcilers carry out
// its Commit, Propose and ReadPullRequest with one executor (deliver.go).
// What a kind says about it (events, conditions, how long to wait) stays
// with the kind.

// DeliveryStepKind is where the delivery of a render stands.
type DeliveryStepKind string

const (
	// DeliveryRender: there is no render to deliver yet.
	DeliveryRender DeliveryStepKind = "Render"
	// DeliveryConfirmIntent: the status read holds an intent saved by an
	// earlier reconcile (this render's digest, no revision); before it is
	// committed or proposed again, confirm the status read is the API
	// server's latest. A cache that has not seen the status patch that
	// recorded the commit shows that intent too, as a controller
	// restarted during the push does; only the latter has a push to
	// finish (and a render with files to make for it).
	DeliveryConfirmIntent DeliveryStepKind = "ConfirmIntent"
	// DeliveryCommit: commit the render to the branch.
	DeliveryCommit DeliveryStepKind = "Commit"
	// DeliveryPropose: open or update the pull request of the render.
	DeliveryPropose DeliveryStepKind = "Propose"
	// DeliveryReadPullRequest: ask the forge about the recorded pull request.
	DeliveryReadPullRequest DeliveryStepKind = "ReadPullRequest"
	// DeliveryAwaitingMerge: the pull request is open; wait for its merge.
	DeliveryAwaitingMerge DeliveryStepKind = "AwaitingMerge"
	// DeliveryClosed: the pull request was closed without merging.
	DeliveryClosed DeliveryStepKind = "Closed"
	// Delivered: status.revision names the commit that carries the render.
	Delivered DeliveryStepKind = "Delivered"
)

// DeliveryObservations is what the delivery actions carried out in this
// reconcile showed; a nil (or empty) observation was not made yet.
type DeliveryObservations struct {
	// PullRequests says the render goes through a pull request.
	PullRequests bool
	// Rendered is the render to deliver.
	Rendered *Rendered
	// Current says the status read is the API server's latest
	// (DeliveryConfirmIntent).
	Current bool
	// Commit carries the render (DeliveryCommit).
	Commit string
	// Proposed is the pull request just opened or updated (DeliveryPropose).
	Proposed *Proposed
	// PullRequest is the forge's word on the recorded pull request
	// (DeliveryReadPullRequest).
	PullRequest *PullRequestState
}

// DeliveryStep is the delivery decision.
type DeliveryStep struct {
	Kind DeliveryStepKind
	// SaveIntent (DeliveryPropose, DeliveryReadPullRequest) asks for the
	// intent to be saved before the call to the forge: once per
	// reconcile, before the first one. Whether a direct commit saves it
	// first is the kind's to say.
	SaveIntent bool
	// NewContent says the render differs from status.digest: the
	// revision and the pull request were reset.
	NewContent bool
	// Opened says this decision recorded the pull request just proposed.
	Opened bool
	// Recorded (Delivered) says how this decision recorded status.revision:
	// "committed", "already on the branch at" or "merged as"; empty when
	// it was recorded before.
	Recorded string
}

// The ways DeliveryStep.Recorded says the commit was recorded.
const (
	recordedCommitted = "committed"
	recordedUpToDate  = "already on the branch at"
	recordedMerged    = "merged as"
)

// DecideDelivery records in st (its pull request included) what obs
// showed of the render's delivery and says what is next. The render
// is delivered when st.Revision names the commit that carries it: a
// direct commit, the base branch's tip when it already carries the
// render, or the merge of the pull request. An intent found saved, not
// made by this decision, is confirmed first (DeliveryConfirmIntent).
func DecideDelivery(st *scribev1.CommonStatus, obs DeliveryObservations) DeliveryStep {
	if obs.Rendered == nil {
		return DeliveryStep{Kind: DeliveryRender}
	}
	var step DeliveryStep
	if st.Digest != obs.Rendered.Digest {
		// New content (a new intent, or a new spec).
		st.PullRequest = nil
		st.Revision, st.Digest = "", obs.Rendered.Digest
		step.NewContent = true
	}
	if st.Revision != "" {
		step.Kind = Delivered
		return step
	}
	// An intent saved by an earlier reconcile, its commit (or proposal)
	// not recorded, is carried out once the status read is confirmed
	// current.
	confirm := !step.NewContent && !obs.Current
	record := func(rev, how string) DeliveryStep {
		st.Revision = rev
		st.GeneratedResources = obs.Rendered.Generated.DeepCopy()
		step.Kind, step.Recorded = Delivered, how
		return step
	}
	if !obs.PullRequests {
		if obs.Commit == "" {
			step.Kind = DeliveryCommit
			if confirm {
				step.Kind = DeliveryConfirmIntent
			}
			return step
		}
		return record(obs.Commit, recordedCommitted)
	}
	if st.PullRequest == nil {
		if obs.Proposed == nil {
			step.Kind, step.SaveIntent = DeliveryPropose, true
			if confirm {
				step.Kind, step.SaveIntent = DeliveryConfirmIntent, false
			}
			return step
		}
		if obs.Proposed.UpToDate {
			return record(obs.Proposed.Base, recordedUpToDate)
		}
		p := obs.Proposed.PullRequest
		st.PullRequest = &p
		step.Opened = true
	}
	if obs.PullRequest == nil {
		// The intent is saved once per reconcile, before the first call
		// to the forge.
		step.Kind, step.SaveIntent = DeliveryReadPullRequest, obs.Proposed == nil
		return step
	}
	st.PullRequest.State = obs.PullRequest.State
	switch {
	case obs.PullRequest.Merged:
		st.PullRequest.State = "merged"
		return record(obs.PullRequest.Revision, recordedMerged)
	case obs.PullRequest.State == "closed":
		step.Kind = DeliveryClosed
	default:
		step.Kind = DeliveryAwaitingMerge
	}
	return step
}
