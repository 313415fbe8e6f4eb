package gitsink_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/forge"
	"github.com/scribe-gitops/scribe/internal/publish/forge/forgetest"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

type prEnv struct {
	srv   *publishtest.GitServer
	gh    *forgetest.GitHub
	url   string
	g     *gitsink.Git
	opts  gitsink.Options
	prOpt gitsink.PullRequestOptions
}

func newPREnv(t *testing.T) *prEnv {
	t.Helper()
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	gh := forgetest.NewGitHub(t)
	client, err := forge.New(forge.Options{Provider: "github", RepoURL: gh.RepoURL(), APIURL: gh.APIURL(), Token: gh.Token(), HTTPClient: gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return &prEnv{
		srv: srv, gh: gh, url: url, g: gitsink.New(t.TempDir()),
		opts:  gitsink.Options{URL: url, Branch: "main", Path: "deploy"},
		prOpt: gitsink.PullRequestOptions{Base: "main", Forge: client},
	}
}

func (e *prEnv) propose(t *testing.T, c publish.Change, evidence string) gitsink.Proposal {
	t.Helper()
	p, err := e.g.Propose(context.Background(), e.opts, e.prOpt, c, evidence)
	if err != nil {
		t.Fatal(err)
	}
	if p.Pushed {
		e.gh.SetHeadSHA(p.Branch, p.Head)
	}
	return p
}

func (e *prEnv) status(t *testing.T, c publish.Change, head string) gitsink.Proposal {
	t.Helper()
	p, err := e.g.ProposalStatus(context.Background(), e.opts, e.prOpt, c.Source, head)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProposeOpensOnePullRequestPerObjectAndUpdatesIt(t *testing.T) {
	e := newPREnv(t)
	web := testBundle("team-a", "web", "one")
	p1 := e.propose(t, publish.ChangeFor(web), "step 1: weight 10")
	if !p1.Pushed || p1.Branch != "scribe/team-a/workload/web" || p1.PullRequest.Number == 0 {
		t.Fatalf("first proposal = %+v", p1)
	}
	// The branch holds the change on top of main; main is untouched.
	work := clone(t, e.url, p1.Branch)
	if data := readFile(t, filepath.Join(work, "deploy/team-a/workload/web/configmap-web.yaml")); !strings.Contains(data, "v: one") {
		t.Fatalf("branch content = %q", data)
	}
	mainWork := clone(t, e.url, "main")
	if _, err := os.Stat(filepath.Join(mainWork, "deploy")); !os.IsNotExist(err) {
		t.Fatal("a proposal wrote to the base branch")
	}
	// The request on the wire is GitHub's create-pull-request.
	var create *forgetest.Request
	for _, r := range e.gh.Requests() {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/pulls") {
			create = &r
		}
	}
	if create == nil {
		t.Fatal("no POST /repos/{owner}/{repo}/pulls")
	}
	body := create.JSON()
	if body["head"] != p1.Branch || body["base"] != "main" || !strings.HasPrefix(body["title"].(string), "scribe: update Workload team-a/web to sha256:") {
		t.Errorf("create request = %v", body)
	}
	text := body["body"].(string)
	for _, want := range []string{
		"| added | `ConfigMap web` | `deploy/team-a/workload/web/configmap-web.yaml` |",
		"| added | `Kustomization web` | `deploy/team-a/workload/web.sync.yaml` |",
		"2 added, 0 changed, 0 removed in `deploy/team-a/workload/web/` (digest `" + web.Digest + "`)",
		"### Evidence of the previous step\n\n```text\nstep 1: weight 10\n```\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("body lacks %q:\n%s", want, text)
		}
	}

	// Same change, new evidence: no push, the same pull request updated.
	p2 := e.propose(t, publish.ChangeFor(web), "step 1: weight 10, healthy for 60s")
	if p2.Pushed || p2.Head != p1.Head || p2.PullRequest.Number != p1.PullRequest.Number {
		t.Fatalf("second proposal = %+v, first %+v", p2, p1)
	}
	if !strings.Contains(p2.PullRequest.Body, "healthy for 60s") {
		t.Errorf("evidence not updated: %q", p2.PullRequest.Body)
	}
	// New content: the branch moves, still one pull request.
	p3 := e.propose(t, publish.ChangeFor(testBundle("team-a", "web", "two")), "step 2")
	if !p3.Pushed || p3.Head == p1.Head || p3.PullRequest.Number != p1.PullRequest.Number {
		t.Fatalf("third proposal = %+v", p3)
	}
	if prs := e.gh.PullRequests(); len(prs) != 1 {
		t.Fatalf("%d pull requests, want 1", len(prs))
	}
	if st := e.status(t, publish.ChangeFor(web), p3.Head); st.Merged || st.PullRequest.State != forge.StateOpen {
		t.Fatalf("status before merge = %+v", st)
	}
}

func TestProposalMergeIsRecognisedFromGitAncestryAndFromTheForge(t *testing.T) {
	e := newPREnv(t)
	c := publish.ChangeFor(testBundle("team-a", "web", "one"))
	p := e.propose(t, c, "")

	// A person merges on the git server; the forge has not caught up.
	work := clone(t, e.url, "main")
	publishtest.Git(t, work, "fetch", "--quiet", "origin", p.Branch)
	publishtest.Git(t, work, "merge", "--quiet", "--no-ff", "-m", "Merge pull request", "FETCH_HEAD")
	publishtest.Git(t, work, "push", "--quiet", "origin", "main")
	merge := publishtest.Git(t, work, "rev-parse", "HEAD")
	// More work lands on main after the merge.
	if _, err := e.srv.CommitOnServer("exp", "main", "later.txt", "later\n"); err != nil {
		t.Fatal(err)
	}

	st := e.status(t, c, p.Head)
	if !st.Merged || st.MergedBy != "ancestry" || st.MergeCommit != merge {
		t.Fatalf("status after a git merge = %+v, want merged by ancestry at %s", st, merge)
	}
	// Now the forge says so too, and its word comes first.
	e.gh.Merge(p.PullRequest.Number, merge)
	st = e.status(t, c, p.Head)
	if !st.Merged || st.MergedBy != "forge" || st.MergeCommit != merge || st.PullRequest.State != forge.StateMerged {
		t.Fatalf("status after the forge merge = %+v", st)
	}
	// Proposing the merged content again opens nothing: main has it.
	again, err := e.g.Propose(context.Background(), e.opts, e.prOpt, c, "")
	if err != nil || !again.UpToDate || again.Pushed {
		t.Fatalf("re-proposal of merged content = %+v, %v", again, err)
	}
}

func TestProposalSquashMergeIsRecognisedByContent(t *testing.T) {
	e := newPREnv(t)
	c := publish.ChangeFor(testBundle("team-a", "api", "one"))
	p := e.propose(t, c, "")
	work := clone(t, e.url, "main")
	publishtest.Git(t, work, "fetch", "--quiet", "origin", p.Branch)
	publishtest.Git(t, work, "merge", "--quiet", "--squash", "FETCH_HEAD")
	publishtest.Git(t, work, "commit", "--quiet", "-m", "Squashed")
	publishtest.Git(t, work, "push", "--quiet", "origin", "main")
	st := e.status(t, c, p.Head)
	if !st.Merged || st.MergedBy != "content" {
		t.Fatalf("status after a squash merge = %+v", st)
	}
}

func TestProposeNeverOverwritesSomeoneElsesCommitOnTheBranch(t *testing.T) {
	e := newPREnv(t)
	c := publish.ChangeFor(testBundle("team-a", "web", "one"))
	p := e.propose(t, c, "")
	// A reviewer pushes a fix-up onto Scribe's branch.
	fix, err := e.srv.CommitOnServer("exp", p.Branch, "deploy/team-a/workload/web/extra.yaml", "reviewer: true\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.g.Propose(context.Background(), e.opts, e.prOpt, publish.ChangeFor(testBundle("team-a", "web", "two")), "")
	if err == nil || publish.ReasonOf(err) != publish.ReasonConflict || !strings.Contains(err.Error(), "a commit Scribe did not write") {
		t.Fatalf("err = %v", err)
	}
	work := clone(t, e.url, p.Branch)
	if head := publishtest.Git(t, work, "rev-parse", "HEAD"); head != fix {
		t.Fatalf("branch moved to %s, the reviewer's %s was overwritten", head, fix)
	}
}

// TestProposeKeepsAReviewersAmendOfScribesCommit: a reviewer amends
// Scribe's own commit (same message, trailers and author) and
// force-pushes. The amend is someone else's commit: the next proposal
// stops instead of replacing it, and the branch is not deleted.
func TestProposeKeepsAReviewersAmendOfScribesCommit(t *testing.T) {
	e := newPREnv(t)
	c := publish.ChangeFor(testBundle("team-a", "web", "one"))
	p := e.propose(t, c, "")
	work := clone(t, e.url, p.Branch)
	if err := os.WriteFile(filepath.Join(work, "deploy/team-a/workload/web/reviewed.yaml"), []byte("reviewer: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	publishtest.Git(t, work, "add", "-A")
	publishtest.Git(t, work, "-c", "user.name=Reviewer", "-c", "user.email=reviewer@example.com", "commit", "--quiet", "--amend", "--no-edit")
	publishtest.Git(t, work, "push", "--quiet", "--force", "origin", "HEAD:"+p.Branch)
	amended := publishtest.Git(t, work, "rev-parse", "HEAD")
	if msg := publishtest.Git(t, work, "log", "-1", "--format=%B"); !strings.Contains(msg, "Scribe-Object: ") {
		t.Fatalf("the amend lost Scribe's trailer, so it proves nothing: %q", msg)
	}

	_, err := e.g.Propose(context.Background(), e.opts, e.prOpt, publish.ChangeFor(testBundle("team-a", "web", "two")), "")
	if err == nil || publish.ReasonOf(err) != publish.ReasonConflict || !strings.Contains(err.Error(), "a commit Scribe did not write") {
		t.Fatalf("proposal over an amended commit: err = %v, want a conflict", err)
	}
	res, err := e.g.DeleteProposalBranch(context.Background(), e.opts, e.prOpt, c.Source, p.Head)
	if err != nil || res != gitsink.BranchKept {
		t.Fatalf("cleanup of an amended, unmerged branch = %q, %v; want kept", res, err)
	}
	if head := publishtest.Git(t, clone(t, e.url, p.Branch), "rev-parse", "HEAD"); head != amended {
		t.Fatalf("branch moved to %s, the reviewer's amend %s was overwritten", head, amended)
	}
}

func TestProposeFailsClearlyWhenTheForgeRejectsTheToken(t *testing.T) {
	e := newPREnv(t)
	bad, err := forge.New(forge.Options{Provider: "github", RepoURL: e.gh.RepoURL(), APIURL: e.gh.APIURL(), Token: "wrong", HTTPClient: e.gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	e.prOpt.Forge = bad
	_, err = e.g.Propose(context.Background(), e.opts, e.prOpt, publish.ChangeFor(testBundle("ns", "a", "x")), "")
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "github") {
		t.Fatalf("err = %v", err)
	}
}

// branchTip is the commit at the tip of branch on the server, or "".
func branchTip(t *testing.T, url, branch string) string {
	t.Helper()
	out := publishtest.Git(t, "", "ls-remote", url, "refs/heads/"+branch)
	if out == "" {
		return ""
	}
	return strings.Fields(out)[0]
}

func TestMergedProposalBranchIsDeletedOnlyWhenNothingUnmergedWouldBeLost(t *testing.T) {
	tests := []struct {
		name string
		// prepare changes the branch or main after the proposal; it returns
		// the head Scribe recorded.
		prepare func(t *testing.T, e *prEnv, p gitsink.Proposal) string
		want    gitsink.BranchCleanup
		gone    bool
	}{
		{name: "merged, at Scribe's head: deleted", want: gitsink.BranchDeleted, gone: true,
			prepare: func(t *testing.T, e *prEnv, p gitsink.Proposal) string {
				mergeOnServer(t, e, p.Branch)
				return p.Head
			}},
		{name: "a reviewer's fix-up, merged: deleted", want: gitsink.BranchDeleted, gone: true,
			prepare: func(t *testing.T, e *prEnv, p gitsink.Proposal) string {
				if _, err := e.srv.CommitOnServer("exp", p.Branch, "deploy/team-a/workload/web/extra.yaml", "reviewer: true\n"); err != nil {
					t.Fatal(err)
				}
				mergeOnServer(t, e, p.Branch)
				return p.Head
			}},
		{name: "a reviewer's commit pushed after the merge: kept", want: gitsink.BranchKept, gone: false,
			prepare: func(t *testing.T, e *prEnv, p gitsink.Proposal) string {
				mergeOnServer(t, e, p.Branch)
				if _, err := e.srv.CommitOnServer("exp", p.Branch, "notes.txt", "later\n"); err != nil {
					t.Fatal(err)
				}
				return p.Head
			}},
		{name: "deleted already (by the forge on merge): nothing to do", want: gitsink.BranchGone, gone: true,
			prepare: func(t *testing.T, e *prEnv, p gitsink.Proposal) string {
				mergeOnServer(t, e, p.Branch)
				publishtest.Git(t, "", "push", "--quiet", e.url, ":refs/heads/"+p.Branch)
				return p.Head
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPREnv(t)
			c := publish.ChangeFor(testBundle("team-a", "web", "one"))
			p := e.propose(t, c, "")
			head := tt.prepare(t, e, p)
			got, err := e.g.DeleteProposalBranch(context.Background(), e.opts, e.prOpt, c.Source, head)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("result %q, want %q", got, tt.want)
			}
			if tip := branchTip(t, e.url, p.Branch); (tip == "") != tt.gone {
				t.Errorf("branch tip after cleanup = %q, want gone=%v", tip, tt.gone)
			}
			// The next proposal starts the branch again from main.
			if tt.gone {
				next := e.propose(t, publish.ChangeFor(testBundle("team-a", "web", "two")), "")
				if !next.Pushed || branchTip(t, e.url, p.Branch) != next.Head {
					t.Fatalf("next proposal = %+v", next)
				}
			}
		})
	}
}

// mergeOnServer merges branch into main with a merge commit, as a forge's
// merge button does.
func mergeOnServer(t *testing.T, e *prEnv, branch string) {
	t.Helper()
	work := clone(t, e.url, "main")
	publishtest.Git(t, work, "fetch", "--quiet", "origin", branch)
	publishtest.Git(t, work, "merge", "--quiet", "--no-ff", "-m", "Merge pull request", "FETCH_HEAD")
	publishtest.Git(t, work, "push", "--quiet", "origin", "main")
}
