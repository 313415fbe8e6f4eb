package gitsink

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// BranchCleanup says what DeleteProposalBranch did.
type BranchCleanup string

const (
	// BranchDeleted: the branch was deleted.
	BranchDeleted BranchCleanup = "deleted"
	// BranchGone: there was no branch to delete (deleted already, by the
	// forge on merge or by a person).
	BranchGone BranchCleanup = "gone"
	// BranchKept: the branch holds a commit that did not reach the base
	// branch and that Scribe did not write; it is left alone.
	BranchKept BranchCleanup = "kept"
)

// DeleteProposalBranch deletes the pull-request branch of src once its
// change is merged. It deletes only a branch whose tip is head (the commit
// Scribe pushed), a commit Scribe wrote for src, or a commit the base
// branch already holds: a commit someone else pushed and nobody merged is
// kept. The delete names the tip it saw, so a push racing it wins.
func (g *Git) DeleteProposalBranch(ctx context.Context, opts Options, pr PullRequestOptions, src scribev1.ObjectIdentity, head string) (BranchCleanup, error) {
	sink, err := g.Sink(opts)
	if err != nil {
		return "", err
	}
	s := sink.(*gitSink)
	base := pr.Base
	if base == "" {
		base = s.opts.Branch
	}
	branch := PullRequestBranch(src)
	ls, err := g.store(s.opts.URL)
	if err != nil {
		return "", err
	}
	var out BranchCleanup
	err = ls.do(ctx, s.opts.Auth, func(ctx context.Context, st *gitStore) error {
		sess, ar, err := st.remoteRefs(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = sess.Close() }()
		ref := plumbing.NewBranchReferenceName(branch)
		tip := refHash(ar, ref)
		if tip.IsZero() {
			out = BranchGone
			return nil
		}
		if tip.String() != head {
			ok, err := mergedOrOurs(ctx, st, ar, base, branch, tip, src)
			if err != nil {
				return err
			}
			if !ok {
				out = BranchKept
				return nil
			}
		}
		if err := st.deleteRef(ctx, sess, ar, ref, tip); err != nil {
			var rej *pushRejectedError
			if errors.As(err, &rej) {
				return st.classifyRejection(ctx, rej, ref, tip)
			}
			return err
		}
		_ = st.repo.Storer.RemoveReference(plumbing.NewRemoteReferenceName(remoteName, branch))
		out = BranchDeleted
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("delete branch %s: %w", branch, err)
	}
	return out, nil
}

// mergedOrOurs says whether tip, the branch's commit, is one Scribe wrote
// for src or one the base branch holds.
func mergedOrOurs(ctx context.Context, st *gitStore, ar *packp.AdvRefs, base, branch string, tip plumbing.Hash, src scribev1.ObjectIdentity) (bool, error) {
	baseTip := refHash(ar, plumbing.NewBranchReferenceName(base))
	tips, err := st.ensure(ctx, map[string]plumbing.Hash{base: baseTip, branch: tip})
	if err != nil {
		return false, err
	}
	c, err := object.GetCommit(st.repo.Storer, tips[branch])
	if err != nil {
		return false, st.corrupt(err)
	}
	if scribeWrote(c, src) {
		return true, nil
	}
	if tips[base].IsZero() {
		return false, nil
	}
	return st.isAncestor(tips[branch], tips[base])
}

// deleteRef deletes ref on the remote if it is still at old: one
// receive-pack request with no pack.
func (s *gitStore) deleteRef(ctx context.Context, sess interface {
	ReceivePack(context.Context, *packp.ReferenceUpdateRequest) (*packp.ReportStatus, error)
}, ar *packp.AdvRefs, ref plumbing.ReferenceName, old plumbing.Hash) error {
	req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	req.Commands = []*packp.Command{{Name: ref, Old: old, New: plumbing.ZeroHash}}
	rs, err := sess.ReceivePack(ctx, req)
	if rs != nil {
		if rerr := rs.Error(); rerr != nil {
			return &pushRejectedError{url: s.display, ref: ref.Short(), reason: rerr.Error()}
		}
	}
	if err != nil {
		return classifyGitError("delete a branch of", s.display, err)
	}
	return nil
}
