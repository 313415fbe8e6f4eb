package gitsink

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/forge"
)

// PullRequestOptions configure promotion by pull request: the change is
// pushed to its own branch and proposed into Base through the forge's API.
type PullRequestOptions struct {
	// Base is the branch the pull request targets; Options.Branch when empty.
	Base string
	// Forge opens, updates and reads pull requests.
	Forge forge.Client
	// Weights, when set, fills the description's weight lines of each
	// changed object (see WeightsFunc); none without it.
	Weights WeightsFunc
}

// Proposal is the state of one custom resource's pull request.
type Proposal struct {
	// Branch is scribe/<namespace>/<kind>/<name>.
	Branch string
	// Head is the commit at the tip of Branch that carries the change.
	Head string
	// Pushed is true when this call moved Branch.
	Pushed bool
	// UpToDate is true when Base already holds exactly the change: nothing
	// to propose, and no pull request was opened.
	UpToDate bool
	// PullRequest as the forge reports it; zero when none was opened.
	PullRequest forge.PullRequest
	// Merged is true when the change reached Base, by the forge's word or by
	// Git ancestry (Head is an ancestor of Base's tip) or content (Base's
	// owned paths equal Head's, as after a squash merge).
	Merged bool
	// MergedBy says how the merge was recognised: "forge", "ancestry" or
	// "content".
	MergedBy string
	// MergeCommit is the commit on Base that merged the change, when known.
	MergeCommit string
}

// PullRequestBranch is the branch a source's proposals are pushed to.
func PullRequestBranch(src scribev1.ObjectIdentity) string {
	return "scribe/" + src.Namespace + "/" + strings.ToLower(src.Kind) + "/" + src.Name
}

// Propose pushes change to its pull-request branch, on top of Base's tip,
// and opens or updates the one pull request for it. The branch is moved
// with a lease (the push names the branch's current commit as the expected
// old value), so a push never overwrites a commit Scribe has not seen. The
// body carries a summary of the rendered diff and the evidence text.
func (g *Git) Propose(ctx context.Context, opts Options, pr PullRequestOptions, change publish.Change, evidence string) (Proposal, error) {
	sink, err := g.Sink(opts)
	if err != nil {
		return Proposal{}, err
	}
	s := sink.(*gitSink)
	if err := change.Validate(); err != nil {
		return Proposal{}, &publish.Error{Reason: publish.ReasonInvalid, Op: "propose to", URL: redactURL(opts.URL), Err: err}
	}
	if pr.Forge == nil {
		return Proposal{}, fmt.Errorf("propose to %s: no forge client", redactURL(opts.URL))
	}
	base := pr.Base
	if base == "" {
		base = s.opts.Branch
	}
	branch := PullRequestBranch(change.Source)
	ls, err := g.store(s.opts.URL)
	if err != nil {
		return Proposal{}, err
	}

	var prop Proposal
	var req forge.Request
	err = ls.do(ctx, s.opts.Auth, func(ctx context.Context, st *gitStore) error {
		var err error
		prop, req, err = s.proposeInCache(ctx, st, base, branch, change, evidence, pr.Weights)
		return err
	})
	if err != nil || prop.UpToDate {
		return prop, err
	}
	p, err := pr.Forge.Ensure(ctx, req)
	if err != nil {
		return prop, fmt.Errorf("propose %s: %w", publish.ObjectRef(change.Source), err)
	}
	prop.PullRequest = p
	return prop, nil
}

// proposeInCache moves the pull-request branch to the draft of change on
// base's tip (buildDraft, commitPush: the commit path's steps) and returns
// the forge request that proposes it. The branch is left as it is when it
// already holds this content on this base, and never moved off a commit
// Scribe did not write (the lease, scribeWrote).
func (s *gitSink) proposeInCache(ctx context.Context, st *gitStore, base, branch string, change publish.Change, evidence string, weights WeightsFunc) (Proposal, forge.Request, error) {
	sess, ar, err := st.remoteRefs(ctx)
	if err != nil {
		return Proposal{}, forge.Request{}, err
	}
	defer func() { _ = sess.Close() }()
	baseTip := refHash(ar, plumbing.NewBranchReferenceName(base))
	if baseTip.IsZero() {
		return Proposal{}, forge.Request{}, &publish.Error{Reason: publish.ReasonNotFound, Op: "propose to", URL: redactURL(s.opts.URL), Err: fmt.Errorf("base branch %q does not exist", base)}
	}
	headRef := plumbing.NewBranchReferenceName(branch)
	headTip := refHash(ar, headRef)
	tips, err := st.ensure(ctx, map[string]plumbing.Hash{base: baseTip, branch: headTip})
	if err != nil {
		return Proposal{}, forge.Request{}, err
	}
	baseTip = tips[base]
	d, err := s.buildDraft(st, base, baseTip, []pathChange{{Change: change, RepoPath: s.opts.Path}})
	if err != nil {
		return Proposal{}, forge.Request{}, err
	}
	if err := d.rejected[0]; err != nil {
		return Proposal{}, forge.Request{}, err
	}
	prop := Proposal{Branch: branch}
	if len(d.changed) == 0 {
		prop.UpToDate = true
		return prop, forge.Request{}, nil
	}
	msg, err := d.message()
	if err != nil {
		return Proposal{}, forge.Request{}, err
	}
	dir := d.edits[0].dir()
	diff, err := objectDiff(st, d.objs, d.oldTree, d.newTree, dir, weights)
	if err != nil {
		return Proposal{}, forge.Request{}, st.corrupt(err)
	}
	req := forge.Request{Head: branch, Base: base, Title: strings.SplitN(msg, "\n", 2)[0], Body: proposalBody(change, base, dir, diff, evidence)}

	if !headTip.IsZero() {
		hc, err := object.GetCommit(st.repo.Storer, tips[branch])
		if err != nil {
			return Proposal{}, forge.Request{}, fmt.Errorf("propose to %s: read %s: %w", redactURL(s.opts.URL), branch, err)
		}
		// The lease: Scribe replaces only its own commit. A commit someone
		// else pushed onto the branch is kept, and the proposal stops.
		if !scribeWrote(hc, change.Source) {
			return Proposal{}, forge.Request{}, &publish.Error{Reason: publish.ReasonConflict, Op: "propose to", URL: redactURL(s.opts.URL),
				Err:  fmt.Errorf("branch %s is at %s, a commit Scribe did not write", branch, hc.Hash.String()[:12]),
				Hint: "someone pushed to Scribe's pull-request branch; merge or close the pull request, or delete the branch"}
		}
		// The branch already holds this content on this base: keep it.
		if hc.TreeHash == d.newTree && len(hc.ParentHashes) == 1 && hc.ParentHashes[0] == baseTip {
			prop.Head = hc.Hash.String()
			return prop, req, nil
		}
	}
	commit, err := d.commitPush(ctx, st, sess, ar, "propose to", headRef, headTip, []plumbing.Hash{baseTip}, msg)
	if err != nil {
		return Proposal{}, forge.Request{}, err
	}
	prop.Head, prop.Pushed = commit.String(), true
	return prop, req, nil
}

// scribeWrote says whether c is a commit Scribe wrote for src, as it wrote
// it: its message carries Scribe's trailer for src, and its author and
// committer are one and the same signature, time included, as every commit
// Scribe writes has. A reviewer who amends, rebases or cherry-picks
// Scribe's commit keeps the message and the author but becomes the
// committer at a later time, so the edit counts as someone else's and is
// kept. (A trailer alone would not do: it survives an amend.)
func scribeWrote(c *object.Commit, src scribev1.ObjectIdentity) bool {
	if c.Author.Name != c.Committer.Name || c.Author.Email != c.Committer.Email || !c.Author.When.Equal(c.Committer.When) {
		return false
	}
	_, aoff := c.Author.When.Zone()
	_, coff := c.Committer.When.Zone()
	if aoff != coff {
		return false
	}
	for _, t := range Trailers(c.Message) {
		if t[TrailerObject] == publish.ObjectRef(src) {
			return true
		}
	}
	return false
}

// ProposalStatus reads the state of a source's latest pull request and
// whether its head reached Base. A merge is recognised from the forge, and
// also from Git alone: the head commit is an ancestor of Base's tip, or Base
// holds the same owned paths as the head (a squash or rebase merge).
func (g *Git) ProposalStatus(ctx context.Context, opts Options, pr PullRequestOptions, src scribev1.ObjectIdentity, head string) (Proposal, error) {
	sink, err := g.Sink(opts)
	if err != nil {
		return Proposal{}, err
	}
	s := sink.(*gitSink)
	base := pr.Base
	if base == "" {
		base = s.opts.Branch
	}
	branch := PullRequestBranch(src)
	prop := Proposal{Branch: branch, Head: head}
	if pr.Forge != nil {
		p, err := pr.Forge.Latest(ctx, branch, base)
		if err != nil {
			return prop, fmt.Errorf("status of %s: %w", publish.ObjectRef(src), err)
		}
		if p != nil {
			prop.PullRequest = *p
			if prop.Head == "" {
				prop.Head = p.HeadSHA
			}
			if p.State == forge.StateMerged {
				prop.Merged, prop.MergedBy, prop.MergeCommit = true, "forge", p.MergeCommit
				return prop, nil
			}
		}
	}
	if prop.Head == "" {
		return prop, nil
	}
	ls, err := g.store(s.opts.URL)
	if err != nil {
		return prop, err
	}
	err = ls.do(ctx, s.opts.Auth, func(ctx context.Context, st *gitStore) error {
		var err error
		prop, err = proposalStatusInCache(ctx, st, s.opts, base, src, prop)
		return err
	})
	return prop, err
}

// proposalStatusInCache decides from Git alone whether prop.Head reached base.
func proposalStatusInCache(ctx context.Context, st *gitStore, opts Options, base string, src scribev1.ObjectIdentity, prop Proposal) (Proposal, error) {
	sess, ar, err := st.remoteRefs(ctx)
	if err != nil {
		return prop, err
	}
	_ = sess.Close()
	baseTip := refHash(ar, plumbing.NewBranchReferenceName(base))
	headHash := plumbing.NewHash(prop.Head)
	tips, err := st.ensure(ctx, map[string]plumbing.Hash{base: baseTip})
	if err != nil {
		return prop, err
	}
	baseTip = tips[base]
	if !st.hasCommit(headHash) {
		// Scribe pushed it, so it was in the cache; a fresh cache may lack it
		// (the branch may be gone after the merge): the forge's word stands.
		return prop, nil
	}
	if ok, err := st.isAncestor(headHash, baseTip); err != nil {
		return prop, err
	} else if ok {
		prop.Merged, prop.MergedBy = true, "ancestry"
		prop.MergeCommit = firstDescendantOnFirstParent(st, baseTip, headHash)
		return prop, nil
	}
	dir := path.Join(opts.Path, publish.OwnedDir(src))
	same := true
	for _, p := range []string{dir, dir + ".sync.yaml"} {
		headTree, err := st.rootTree(headHash)
		if err != nil {
			return prop, err
		}
		baseTree, err := st.rootTree(baseTip)
		if err != nil {
			return prop, err
		}
		src := layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: &memory.NewStorage().ObjectStorage}
		cache := map[plumbing.Hash]*object.Tree{}
		a, err := lookupPath(src, cache, headTree, p)
		if err != nil {
			return prop, err
		}
		b, err := lookupPath(src, cache, baseTree, p)
		if err != nil {
			return prop, err
		}
		if a != b {
			same = false
		}
	}
	if same {
		prop.Merged, prop.MergedBy = true, "content"
	}
	return prop, nil
}

// firstDescendantOnFirstParent returns the oldest commit on base's
// first-parent chain whose history contains head: the merge commit (or head
// itself after a fast-forward). The commits that contain head form a prefix
// of the chain, so a binary search needs only O(log n) history walks.
func firstDescendantOnFirstParent(st *gitStore, baseTip, head plumbing.Hash) string {
	chain := []plumbing.Hash{baseTip}
	for cur := baseTip; len(chain) < 10000 && cur != head; {
		c, err := object.GetCommit(st.repo.Storer, cur)
		if err != nil || len(c.ParentHashes) == 0 {
			break
		}
		cur = c.ParentHashes[0]
		chain = append(chain, cur)
	}
	lo, hi := 0, len(chain)-1 // chain[lo] contains head; find the last index that does
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if ok, err := st.isAncestor(head, chain[mid]); err == nil && ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return chain[lo].String()
}

// proposalBody is the pull request's description of change (see
// ProposalBody).
func proposalBody(c publish.Change, base, dir string, diff []ObjectChange, evidence string) string {
	p := ProposalBody{
		Object: c.Source.Kind + " " + c.Source.Namespace + "/" + c.Source.Name, Generation: c.Generation, Base: base,
		Summary: c.Summary, Dir: dir, Objects: diff, Evidence: evidence,
		Namespace: c.Source.Namespace, Kind: c.Source.Kind, Name: c.Source.Name,
	}
	if p.Summary == "" {
		p.Summary = c.Reason
	}
	if c.Bundle != nil {
		p.Digest = c.Bundle.Digest
	}
	return p.String()
}
