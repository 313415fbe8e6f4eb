package publish

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// One attempt at a commit: the remote tip, the grafted tree, the commit
// object, the push with the tip as the expected old value.

// commitAndPush is one attempt: read the remote tip, fetch it if the cache
// lacks it, graft the owned subtrees onto its tree, commit and push with the
// tip as the expected old value.
func commitAndPush(ctx context.Context, st *gitStore, s *gitSink, branch string, edits []pathChange) (batchResult, error) {
	sess, ar, err := st.remoteRefs(ctx)
	if err != nil {
		return batchResult{}, err
	}
	defer func() { _ = sess.Close() }()
	ref := plumbing.NewBranchReferenceName(branch)
	tips, err := st.ensure(ctx, map[string]plumbing.Hash{branch: refHash(ar, ref)})
	if err != nil {
		return batchResult{}, err
	}
	tip := tips[branch]
	oldTree, err := st.rootTree(tip)
	if err != nil {
		return batchResult{}, err
	}
	overlay := memory.NewStorage()
	objs := &overlay.ObjectStorage
	rejected, err := collisions(layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: objs}, &s.w.git.ids, oldTree, edits, st.display)
	if err != nil {
		return batchResult{}, st.corrupt(err)
	}
	if len(rejected) > 0 {
		kept := make([]pathChange, 0, len(edits))
		for _, pc := range edits {
			if rejected[pc.unit] == nil {
				kept = append(kept, pc)
			}
		}
		edits = kept
		if len(edits) == 0 {
			return batchResult{rejected: rejected}, nil
		}
	}
	newTree, err := graft(st, objs, oldTree, edits, s.opts.SyncIndex)
	if err != nil {
		return batchResult{}, st.corrupt(err)
	}
	changed, syncChanged, err := changedOwners(st, objs, oldTree, newTree, edits)
	if err != nil {
		return batchResult{}, st.corrupt(err)
	}
	if err := rememberIdentities(layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: objs}, &s.w.git.ids, newTree, edits); err != nil {
		return batchResult{}, st.corrupt(err)
	}
	res := batchResult{changed: changed, syncChanged: syncChanged, rejected: rejected, Result: Result{Commit: tip.String(), Revision: branch + "@sha1:" + tip.String()}}
	if newTree == oldTree || (tip.IsZero() && len(changed) == 0) {
		// Nothing to write (a delete on a branch that does not exist is no
		// reason to create it).
		if tip.IsZero() {
			res.Commit, res.Revision = "", ""
		}
		return res, nil
	}
	msg, err := s.message(branch, edits, changed)
	if err != nil {
		return batchResult{}, err
	}
	var parents []plumbing.Hash
	if !tip.IsZero() {
		parents = []plumbing.Hash{tip}
	}
	commit, err := writeCommit(objs, s.opts.Author, s.opts.Signer, newTree, parents, msg)
	if err != nil {
		return batchResult{}, fmt.Errorf("publish to %s: %w", redactURL(s.opts.URL), err)
	}
	pack, err := st.push(ctx, sess, ar, objs, ref, tip, commit)
	if err != nil {
		var rej *pushRejectedError
		if errors.As(err, &rej) {
			return batchResult{}, st.classifyRejection(ctx, rej, ref, tip)
		}
		return batchResult{}, err
	}
	st.keep(pack, branch, commit)
	res.Commit = commit.String()
	res.Revision = branch + "@sha1:" + commit.String()
	res.Changed = true
	return res, nil
}

// classifyRejection decides whether a rejected push lost a race (the branch
// moved: retry on the new tip) or was refused (a hook, a protected branch).
func (s *gitStore) classifyRejection(ctx context.Context, rej *pushRejectedError, ref plumbing.ReferenceName, expected plumbing.Hash) error {
	if isConflictReason(rej.reason) {
		return &Error{Reason: ReasonConflict, Op: "push to", URL: s.display, Err: rej}
	}
	if sess, ar, err := s.remoteRefs(ctx); err == nil {
		_ = sess.Close()
		if refHash(ar, ref) != expected {
			return &Error{Reason: ReasonConflict, Op: "push to", URL: s.display, Err: rej}
		}
	}
	return &Error{Reason: ReasonRejected, Op: "push to", URL: s.display, Err: errors.New(rej.reason),
		Hint: "the remote refused the update of " + ref.Short() + ", for example a protected branch or a server hook; give Scribe push rights or use pullRequest mode"}
}

// writeCommit encodes (and signs) a commit into objs.
func writeCommit(objs *memory.ObjectStorage, author Signature, signer git.Signer, tree plumbing.Hash, parents []plumbing.Hash, msg string) (plumbing.Hash, error) {
	now := time.Now()
	sig := object.Signature{Name: author.Name, Email: author.Email, When: now}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: tree, ParentHashes: parents}
	if signer != nil {
		unsigned := objs.NewEncodedObject()
		if err := c.EncodeWithoutSignature(unsigned); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("encode commit: %w", err)
		}
		r, err := unsigned.Reader()
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("encode commit: %w", err)
		}
		signature, err := signer.Sign(r)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("sign commit: %w", err)
		}
		c.PGPSignature = string(signature)
	}
	o := objs.NewEncodedObject()
	if err := c.Encode(o); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode commit: %w", err)
	}
	return objs.SetEncodedObject(o)
}
