package e2e

import (
	"context"
	"strings"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/forge"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/render"
)

// giteaBundle is a one-ConfigMap render of Workload team-a/web.
func giteaBundle(content string) *render.Bundle {
	src := scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: "Workload", Namespace: "team-a", Name: "web"}
	dir := publish.OwnedDir(src)
	return &render.Bundle{
		Dir: dir, Source: src, Generation: 1, Digest: "sha256:" + strings.Repeat("0", 56) + content[:8],
		Files: []render.File{
			{Path: dir + "/configmap-web.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: team-a\ndata:\n  v: " + content + "\n")},
			{Path: dir + "/kustomization.yaml", Data: []byte("resources:\n- configmap-web.yaml\n")},
			{Path: dir + ".sync.yaml", Data: []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: workload-team-a-web\n  namespace: flux-system\n")},
		},
	}
}

// The Gitea client and Scribe's pull-request branch, against Gitea
// itself: open, update in place (one pull request per branch), read back
// closed, reopened and merged with the merge commit, find the latest after
// a restart, and delete the merged branch.
func TestGiteaForgeClientAndPullRequestBranchAgainstRealGitea(t *testing.T) {
	t.Parallel()
	skipWithoutLoop(t)
	g := StartGiteaOnly(t)
	ctx := context.Background()
	fc, err := forge.New(forge.Options{Provider: "gitea", RepoURL: g.RepoURL, Token: g.Token})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := gitsink.AuthFromSecret(g.RepoURL, map[string][]byte{"username": []byte(g.User), "password": []byte(g.Password)})
	if err != nil {
		t.Fatal(err)
	}
	git := gitsink.New(t.TempDir())
	opts := gitsink.Options{URL: g.RepoURL, Branch: "main", Path: SyncPath, Auth: auth, Author: gitsink.DefaultAuthor()}
	prOpts := gitsink.PullRequestOptions{Base: "main", Forge: fc}
	mainAt, err := g.BranchSHA(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}

	one := publish.ChangeFor(giteaBundle("one-aaaaaaaa"))
	one.Summary = "First rollout of **v1**: v1=100%."
	p1, err := git.Propose(ctx, opts, prOpts, one, "")
	if err != nil {
		t.Fatal(err)
	}
	if !p1.Pushed || p1.PullRequest.Number == 0 || p1.PullRequest.State != forge.StateOpen || !strings.HasPrefix(p1.PullRequest.URL, g.URL+"/") {
		t.Fatalf("first proposal = %+v", p1)
	}
	got, err := g.Pull(ctx, p1.PullRequest.Number)
	if err != nil {
		t.Fatal(err)
	}
	if got.Head.Ref != p1.Branch || got.Head.Sha != p1.Head || got.Base.Ref != "main" || !strings.Contains(got.Body, "| added | `ConfigMap team-a/web` |") {
		t.Fatalf("Gitea's pull request = %+v", got)
	}
	if head, _ := g.BranchSHA(ctx, "main"); head != mainAt {
		t.Fatalf("main moved to %s before a merge", head)
	}

	// New content: the branch is re-pushed, the same pull request updated
	// (its body still compares with main, which has neither).
	two := publish.ChangeFor(giteaBundle("two-bbbbbbbb"))
	p2, err := git.Propose(ctx, opts, prOpts, two, "step 1 held")
	if err != nil {
		t.Fatal(err)
	}
	if !p2.Pushed || p2.PullRequest.Number != p1.PullRequest.Number || p2.Head == p1.Head {
		t.Fatalf("second proposal = %+v (first %+v)", p2, p1)
	}
	got, _ = g.Pull(ctx, p2.PullRequest.Number)
	if got.Head.Sha != p2.Head || !strings.Contains(got.Body, "step 1 held") || !strings.Contains(got.Body, "| added | `ConfigMap team-a/web` |") {
		t.Fatalf("updated pull request = %+v", got)
	}
	if open, _ := g.Pulls(ctx, "open"); len(open) != 1 {
		t.Fatalf("%d open pull requests, want 1", len(open))
	}

	// Closed, then reopened: read back as such.
	status := func() gitsink.Proposal {
		t.Helper()
		st, err := git.ProposalStatus(ctx, opts, prOpts, one.Source, p2.Head)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if err := g.SetPullState(ctx, p2.PullRequest.Number, "closed"); err != nil {
		t.Fatal(err)
	}
	if st := status(); st.Merged || st.PullRequest.State != forge.StateClosed {
		t.Fatalf("status after a close = %+v", st)
	}
	if err := g.SetPullState(ctx, p2.PullRequest.Number, "open"); err != nil {
		t.Fatal(err)
	}
	if st := status(); st.Merged || st.PullRequest.State != forge.StateOpen {
		t.Fatalf("status after a reopen = %+v", st)
	}

	// Merged through the API: the forge's word and its merge commit.
	merge, err := g.Merge(ctx, p2.PullRequest.Number)
	if err != nil {
		t.Fatal(err)
	}
	st := status()
	if !st.Merged || st.MergedBy != "forge" || st.MergeCommit != merge || st.PullRequest.State != forge.StateMerged {
		t.Fatalf("status after the merge = %+v, want merged by the forge at %s", st, merge)
	}
	if head, _ := g.BranchSHA(ctx, "main"); head != merge {
		t.Fatalf("main at %s, want the merge commit %s", head, merge)
	}
	latest, err := fc.Latest(ctx, p2.Branch, "main")
	if err != nil || latest == nil || latest.Number != p2.PullRequest.Number || latest.State != forge.StateMerged {
		t.Fatalf("Latest after a restart = %+v, %v", latest, err)
	}

	// Scribe's branch goes after the merge; the merged pull request stays.
	res, err := git.DeleteProposalBranch(ctx, opts, prOpts, one.Source, p2.Head)
	if err != nil || res != gitsink.BranchDeleted {
		t.Fatalf("delete the merged branch = %q, %v", res, err)
	}
	if sha, err := g.BranchSHA(ctx, p2.Branch); err != nil || sha != "" {
		t.Fatalf("branch %s still at %q (%v)", p2.Branch, sha, err)
	}
	if latest, err := fc.Latest(ctx, p2.Branch, "main"); err != nil || latest == nil || latest.State != forge.StateMerged {
		t.Fatalf("Latest after the branch was deleted = %+v, %v", latest, err)
	}

	// The next proposal starts a new branch and a new pull request.
	three := publish.ChangeFor(giteaBundle("three-cccccccc"))
	p3, err := git.Propose(ctx, opts, prOpts, three, "step 2")
	if err != nil {
		t.Fatal(err)
	}
	if !p3.Pushed || p3.PullRequest.Number == p2.PullRequest.Number || p3.PullRequest.State != forge.StateOpen {
		t.Fatalf("third proposal = %+v", p3)
	}

	// A direct commit supersedes it (a direct rollback): CloseProposal
	// closes it on Gitea with the note first in its description, and a
	// second call finds nothing open.
	closed, err := git.CloseProposal(ctx, opts, prOpts, three.Source, "Closed by Scribe: superseded.")
	if err != nil || closed == nil || closed.Number != p3.PullRequest.Number || closed.State != forge.StateClosed || !strings.HasPrefix(closed.Body, "Closed by Scribe: superseded.\n\n") {
		t.Fatalf("CloseProposal = %+v, %v", closed, err)
	}
	if got, err := fc.Get(ctx, p3.PullRequest.Number); err != nil || got.State != forge.StateClosed {
		t.Fatalf("Gitea reads #%d as %+v, %v; want closed", p3.PullRequest.Number, got, err)
	}
	if again, err := git.CloseProposal(ctx, opts, prOpts, three.Source, "again"); err != nil || again != nil {
		t.Fatalf("CloseProposal with nothing open = %+v, %v", again, err)
	}
}
