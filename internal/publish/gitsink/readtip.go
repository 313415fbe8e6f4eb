package gitsink

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// maxSyncFile is the most bytes read of one sync file: a few objects.
const maxSyncFile = 1 << 20

// SyncObjects returns the objects of the sync files (<dir>.sync.yaml, one
// per custom resource) below opts.Path at the tip of opts.Branch. A branch
// that does not exist yet holds none. publish reads them before
// rendering, so a custom resource keeps the names its applier objects
// already have (see the templates' naming migration).
func (g *Git) SyncObjects(ctx context.Context, opts Options) ([]publish.Object, error) {
	isSync := func(file string) bool { return strings.HasSuffix(file, ".sync.yaml") }
	objs, err := g.TipObjects(ctx, opts, []string{path.Clean(opts.Path)}, isSync)
	if err != nil {
		return nil, fmt.Errorf("read sync files of %s: %w", redactURL(opts.URL), err)
	}
	return objs, nil
}

// TipObjects returns the objects of the files at paths (a file, or every
// file below a directory, that keep accepts) at the tip of opts.Branch,
// each file read up to 1 MiB. A branch that does not exist yet, or a path
// it does not hold, holds none.
func (g *Git) TipObjects(ctx context.Context, opts Options, paths []string, keep func(file string) bool) ([]publish.Object, error) {
	sink, err := g.Sink(opts)
	if err != nil {
		return nil, err
	}
	s := sink.(*gitSink)
	ls, err := g.store(s.opts.URL)
	if err != nil {
		return nil, err
	}
	var out []publish.Object
	err = ls.do(ctx, s.opts.Auth, func(ctx context.Context, st *gitStore) error {
		sess, ar, err := st.remoteRefs(ctx)
		if err != nil {
			return err
		}
		_ = sess.Close()
		tip := refHash(ar, plumbing.NewBranchReferenceName(s.opts.Branch))
		if tip.IsZero() {
			return nil
		}
		tips, err := st.ensure(ctx, map[string]plumbing.Hash{s.opts.Branch: tip})
		if err != nil {
			return err
		}
		root, err := st.rootTree(tips[s.opts.Branch])
		if err != nil {
			return st.corrupt(err)
		}
		src := layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: &memory.NewStorage().ObjectStorage}
		if out, err = treeObjects(src, root, paths, keep, maxSyncFile); err != nil {
			return st.corrupt(err)
		}
		return nil
	})
	return out, err
}
