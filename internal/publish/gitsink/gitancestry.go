package gitsink

import (
	"context"
	"fmt"
	"path"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
)

// Ancestry: whether a commit an applier reports carries Scribe's commit
// for a CR's paths.

// descendsDepth is how far back Descends fetches when the cache is too
// shallow to hold Scribe's commit.
const descendsDepth = 1000

// Descends reports whether applied holds, for the paths src owns, exactly
// what ours holds: true for ours itself and for any later commit that left
// Scribe's paths alone (appliers report the revision they applied, which may
// be someone else's later commit). It compares the two commits' trees at
// those paths, so it needs no history walk and is cheap at any distance;
// commits the cache lacks are fetched (the cache is deepened when a shallow
// fetch cut ours off).
func (g *Git) Descends(ctx context.Context, opts Options, src scribev1.ObjectIdentity, ours, applied string) (bool, error) {
	if ours == applied {
		return true, nil
	}
	a, b := plumbing.NewHash(ours), plumbing.NewHash(applied)
	if a.IsZero() || b.IsZero() || a.String() != ours || b.String() != applied {
		return false, fmt.Errorf("descends: %q and %q must be commit SHAs", ours, applied)
	}
	ls, err := g.store(opts.URL)
	if err != nil {
		return false, err
	}
	var same bool
	err = ls.do(ctx, opts.Auth, func(ctx context.Context, st *gitStore) error {
		var err error
		same, err = descends(ctx, st, opts, src, a, b)
		return err
	})
	return same, err
}

func descends(ctx context.Context, st *gitStore, opts Options, src scribev1.ObjectIdentity, a, b plumbing.Hash) (bool, error) {
	if !st.hasCommit(b) || !st.hasCommit(a) {
		sess, ar, err := st.remoteRefs(ctx)
		if err != nil {
			return false, err
		}
		_ = sess.Close()
		if _, err := st.ensure(ctx, map[string]plumbing.Hash{opts.Branch: refHash(ar, plumbing.NewBranchReferenceName(opts.Branch))}); err != nil {
			return false, err
		}
		if !st.hasCommit(a) && st.hasCommit(b) {
			// A shallow cache may have cut ours off: deepen the history.
			if err := st.deepen(ctx, opts.Branch, descendsDepth); err != nil {
				return false, err
			}
		}
		if !st.hasCommit(b) || !st.hasCommit(a) {
			return false, nil
		}
	}
	ta, err := st.rootTree(a)
	if err != nil {
		return false, err
	}
	tb, err := st.rootTree(b)
	if err != nil {
		return false, err
	}
	lsrc := layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: &memory.NewStorage().ObjectStorage}
	cache := map[plumbing.Hash]*object.Tree{}
	dir := path.Join(opts.Path, publish.OwnedDir(src))
	for _, p := range []string{dir, dir + ".sync.yaml"} {
		ha, err := lookupPath(lsrc, cache, ta, p)
		if err != nil {
			return false, err
		}
		hb, err := lookupPath(lsrc, cache, tb, p)
		if err != nil {
			return false, err
		}
		if ha != hb {
			return false, nil
		}
	}
	return true, nil
}
