package gitsink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// One attempt at a commit: the remote tip, the draft (the grafted tree
// and its message), the commit object, the push with the tip as the
// expected old value. A proposal (pullrequest.go) builds the same draft on
// its base's tip and pushes it through the same commitPush.

// draft is the tree a set of edits makes of a base commit's tree, and
// what it changed. buildDraft makes it; commitAndPush and Propose read it.
type draft struct {
	sink   *gitSink
	branch string // the base branch, named in the message
	objs   *memory.ObjectStorage
	// oldTree is the base commit's tree, newTree the tree with the edits.
	oldTree, newTree plumbing.Hash
	// edits are the edits written: those of a rejected unit are left out.
	edits []pathChange
	// rejected holds, by unit, the edits left out because their objects
	// collide with another custom resource's.
	rejected map[int]error
	// changed and syncChanged say, by change key, whether the owned paths
	// and the sync file differ between the trees.
	changed, syncChanged map[string]bool
}

// buildDraft grafts edits onto the tree of base (a commit on branch; zero
// for a branch that does not exist yet): the edits whose objects collide
// with another custom resource's are left out (draft.rejected), the rest
// are grafted, and the owners whose paths changed are listed. A draft with
// no edits left has no new tree.
func (s *gitSink) buildDraft(st *gitStore, branch string, base plumbing.Hash, edits []pathChange) (*draft, error) {
	oldTree, err := st.rootTree(base)
	if err != nil {
		return nil, err
	}
	d := &draft{sink: s, branch: branch, objs: &memory.NewStorage().ObjectStorage, oldTree: oldTree}
	rejected, err := collisions(layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: d.objs}, &s.w.git.ids, oldTree, edits, st.display)
	if err != nil {
		return nil, st.corrupt(err)
	}
	d.rejected = rejected
	if len(rejected) > 0 {
		kept := make([]pathChange, 0, len(edits))
		for _, pc := range edits {
			if rejected[pc.unit] == nil {
				kept = append(kept, pc)
			}
		}
		edits = kept
		if len(edits) == 0 {
			return d, nil
		}
	}
	d.edits = edits
	if d.newTree, err = graft(st, d.objs, oldTree, edits, s.opts.SyncIndex); err != nil {
		return nil, st.corrupt(err)
	}
	if d.changed, d.syncChanged, err = changedOwners(st, d.objs, oldTree, d.newTree, edits); err != nil {
		return nil, st.corrupt(err)
	}
	return d, nil
}

// message is the draft's commit message (committemplate.go): the changes
// whose owned paths changed, on the draft's branch.
func (d *draft) message() (string, error) {
	return d.sink.message(d.branch, d.edits, d.changed)
}

// commitPush writes the draft's tree as a commit on parents with msg and
// pushes it to ref, whose remote tip must still be old (the lease: zero
// creates ref). A rejected push is classified: a lost race is
// publish.ReasonConflict, a refusal publish.ReasonRejected. op names the
// operation in errors ("publish to", "propose to").
func (d *draft) commitPush(ctx context.Context, st *gitStore, sess transport.ReceivePackSession, ar *packp.AdvRefs, op string, ref plumbing.ReferenceName, old plumbing.Hash, parents []plumbing.Hash, msg string) (plumbing.Hash, error) {
	s := d.sink
	commit, err := writeCommit(d.objs, s.opts.Author, s.opts.Signer, d.newTree, parents, msg)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%s %s: %w", op, redactURL(s.opts.URL), err)
	}
	pack, err := st.push(ctx, sess, ar, d.objs, ref, old, commit)
	if err != nil {
		var rej *pushRejectedError
		if errors.As(err, &rej) {
			return plumbing.ZeroHash, st.classifyRejection(ctx, rej, ref, old)
		}
		return plumbing.ZeroHash, err
	}
	st.keep(pack, ref.Short(), commit)
	return commit, nil
}

// commitAndPush is one attempt: read the remote tip, fetch it if the cache
// lacks it, build the draft of the edits on its tree, commit and push with
// the tip as the expected old value.
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
	d, err := s.buildDraft(st, branch, tip, edits)
	if err != nil {
		return batchResult{}, err
	}
	if len(d.edits) == 0 {
		return batchResult{rejected: d.rejected}, nil
	}
	if err := rememberIdentities(layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: d.objs}, &s.w.git.ids, d.newTree, d.edits); err != nil {
		return batchResult{}, st.corrupt(err)
	}
	res := batchResult{changed: d.changed, syncChanged: d.syncChanged, rejected: d.rejected, Result: publish.Result{Commit: tip.String(), Revision: branch + "@sha1:" + tip.String()}}
	if d.newTree == d.oldTree || (tip.IsZero() && len(d.changed) == 0) {
		// Nothing to write (a delete on a branch that does not exist is no
		// reason to create it).
		if tip.IsZero() {
			res.Commit, res.Revision = "", ""
		}
		return res, nil
	}
	msg, err := d.message()
	if err != nil {
		return batchResult{}, err
	}
	var parents []plumbing.Hash
	if !tip.IsZero() {
		parents = []plumbing.Hash{tip}
	}
	commit, err := d.commitPush(ctx, st, sess, ar, "publish to", ref, tip, parents, msg)
	if err != nil {
		return batchResult{}, err
	}
	res.Commit = commit.String()
	res.Revision = branch + "@sha1:" + commit.String()
	res.Changed = true
	return res, nil
}

// classifyRejection decides whether a rejected push lost a race (the branch
// moved: retry on the new tip) or was refused (a hook, a protected branch).
func (s *gitStore) classifyRejection(ctx context.Context, rej *pushRejectedError, ref plumbing.ReferenceName, expected plumbing.Hash) error {
	if isConflictReason(rej.reason) {
		return &publish.Error{Reason: publish.ReasonConflict, Op: "push to", URL: s.display, Err: rej}
	}
	if sess, ar, err := s.remoteRefs(ctx); err == nil {
		_ = sess.Close()
		if refHash(ar, ref) != expected {
			return &publish.Error{Reason: publish.ReasonConflict, Op: "push to", URL: s.display, Err: rej}
		}
	}
	return &publish.Error{Reason: publish.ReasonRejected, Op: "push to", URL: s.display, Err: errors.New(rej.reason),
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
