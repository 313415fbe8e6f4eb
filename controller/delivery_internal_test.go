package controller

import (
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// TestDecideDelivery is the delivery decision's table: what is next for a
// render, and what is recorded of it, from a status and what the delivery
// actions showed.
func TestDecideDelivery(t *testing.T) {
	rendered := &Rendered{Digest: "sha256:new", Generated: &scribev1.GeneratedResources{Path: "apps/web"}}
	open := &scribev1.PullRequestStatus{Number: 7, URL: "https://forge/pr/7", Head: "h1", State: "open"}
	for _, tc := range []struct {
		name     string
		st       scribev1.CommonStatus
		pr       *scribev1.PullRequestStatus
		obs      DeliveryObservations
		want     DeliveryStep
		revision string
		prState  string // "" : no pull request recorded
	}{
		{name: "nothing rendered: render", want: DeliveryStep{Kind: DeliveryRender}},
		{name: "new content: commit it", st: scribev1.CommonStatus{Revision: "old", Digest: "sha256:old"}, pr: open,
			obs: DeliveryObservations{Rendered: rendered}, want: DeliveryStep{Kind: DeliveryCommit, NewContent: true}},
		{name: "the same content: delivered already", st: scribev1.CommonStatus{Revision: "c1", Digest: "sha256:new"},
			obs: DeliveryObservations{Rendered: rendered, PullRequests: true}, want: DeliveryStep{Kind: Delivered}, revision: "c1"},
		{name: "committed", st: scribev1.CommonStatus{Digest: "sha256:new"},
			obs: DeliveryObservations{Rendered: rendered, Commit: "c2"}, want: DeliveryStep{Kind: Delivered, Recorded: recordedCommitted}, revision: "c2"},
		{name: "an intent saved before, not committed: confirm the status read is the latest first", st: scribev1.CommonStatus{Digest: "sha256:new"},
			obs: DeliveryObservations{Rendered: rendered}, want: DeliveryStep{Kind: DeliveryConfirmIntent}},
		{name: "an intent saved before, confirmed the latest: commit it (again)", st: scribev1.CommonStatus{Digest: "sha256:new"},
			obs: DeliveryObservations{Rendered: rendered, Current: true}, want: DeliveryStep{Kind: DeliveryCommit}},
		{name: "new content, through a pull request: propose, saving the intent", st: scribev1.CommonStatus{Revision: "old", Digest: "sha256:old"},
			obs: DeliveryObservations{Rendered: rendered, PullRequests: true}, want: DeliveryStep{Kind: DeliveryPropose, SaveIntent: true, NewContent: true}},
		{name: "an intent saved before, not proposed: confirm the status read is the latest first", st: scribev1.CommonStatus{Digest: "sha256:new"},
			obs: DeliveryObservations{Rendered: rendered, PullRequests: true}, want: DeliveryStep{Kind: DeliveryConfirmIntent}},
		{name: "an intent saved before, confirmed the latest: propose, saving the intent", st: scribev1.CommonStatus{Digest: "sha256:new"},
			obs: DeliveryObservations{Rendered: rendered, PullRequests: true, Current: true}, want: DeliveryStep{Kind: DeliveryPropose, SaveIntent: true}},
		{name: "the base already carries it", st: scribev1.CommonStatus{Digest: "sha256:new"},
			obs:  DeliveryObservations{Rendered: rendered, PullRequests: true, Proposed: &Proposed{UpToDate: true, Base: "b1"}},
			want: DeliveryStep{Kind: Delivered, Recorded: recordedUpToDate}, revision: "b1"},
		{name: "opened: read it without saving again", st: scribev1.CommonStatus{Digest: "sha256:new"},
			obs:  DeliveryObservations{Rendered: rendered, PullRequests: true, Proposed: &Proposed{PullRequest: *open}},
			want: DeliveryStep{Kind: DeliveryReadPullRequest, Opened: true}, prState: "open"},
		{name: "recorded: read it, saving the intent first", st: scribev1.CommonStatus{Digest: "sha256:new"}, pr: open,
			obs: DeliveryObservations{Rendered: rendered, PullRequests: true}, want: DeliveryStep{Kind: DeliveryReadPullRequest, SaveIntent: true}, prState: "open"},
		{name: "open: await the merge", st: scribev1.CommonStatus{Digest: "sha256:new"}, pr: open,
			obs:  DeliveryObservations{Rendered: rendered, PullRequests: true, PullRequest: &PullRequestState{State: "open"}},
			want: DeliveryStep{Kind: DeliveryAwaitingMerge}, prState: "open"},
		{name: "closed", st: scribev1.CommonStatus{Digest: "sha256:new"}, pr: open,
			obs:  DeliveryObservations{Rendered: rendered, PullRequests: true, PullRequest: &PullRequestState{State: "closed"}},
			want: DeliveryStep{Kind: DeliveryClosed}, prState: "closed"},
		{name: "merged", st: scribev1.CommonStatus{Digest: "sha256:new"}, pr: open,
			obs:  DeliveryObservations{Rendered: rendered, PullRequests: true, PullRequest: &PullRequestState{State: "closed", Merged: true, Revision: "m1"}},
			want: DeliveryStep{Kind: Delivered, Recorded: recordedMerged}, revision: "m1", prState: "merged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			if tc.pr != nil {
				st.PullRequest = tc.pr.DeepCopy()
			}
			got := DecideDelivery(&st, tc.obs)
			if got != tc.want {
				t.Fatalf("step = %+v, want %+v", got, tc.want)
			}
			if st.Revision != tc.revision {
				t.Errorf("revision = %q, want %q", st.Revision, tc.revision)
			}
			if tc.obs.Rendered != nil && st.Digest != tc.obs.Rendered.Digest {
				t.Errorf("digest = %q, want the render's", st.Digest)
			}
			if got.Recorded != "" && (st.GeneratedResources == nil || st.GeneratedResources.Path != "apps/web") {
				t.Errorf("generated resources = %+v, want the render's", st.GeneratedResources)
			}
			state := ""
			if st.PullRequest != nil {
				state = st.PullRequest.State
			}
			if state != tc.prState {
				t.Errorf("pull request state = %q, want %q", state, tc.prState)
			}
		})
	}
}
