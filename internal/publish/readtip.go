package publish

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// maxSyncFile is the most bytes read of one sync file: a few objects.
const maxSyncFile = 1 << 20

// SyncFiles returns the sync files (<dir>.sync.yaml, one per custom
// resource) below opts.Path at the tip of opts.Branch, by repository path.
// A branch that does not exist yet holds none. publish reads them before
// rendering, so a custom resource keeps the names its applier objects
// already have (see the templates' naming migration).
func (g *Git) SyncFiles(ctx context.Context, opts GitOptions) (map[string][]byte, error) {
	sink, err := g.Sink(opts)
	if err != nil {
		return nil, err
	}
	s := sink.(*gitSink)
	ls, err := g.store(s.opts.URL)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
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
		base := strings.TrimPrefix(path.Clean(s.opts.Path), "./")
		dir := root
		if base != "." && base != "" {
			if dir, err = lookupPath(src, map[plumbing.Hash]*object.Tree{}, root, base); err != nil {
				return st.corrupt(err)
			}
		}
		if dir.IsZero() {
			return nil
		}
		return readSyncFiles(src, dir, base, out)
	})
	if err != nil {
		return nil, fmt.Errorf("read sync files of %s: %w", redactURL(opts.URL), err)
	}
	return out, nil
}

// readSyncFiles adds every *.sync.yaml blob below tree (at repository path
// prefix) to out.
func readSyncFiles(src layeredStorer, tree plumbing.Hash, prefix string, out map[string][]byte) error {
	t, err := object.GetTree(src, tree)
	if err != nil {
		return err
	}
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if e.Mode == filemode.Dir || !strings.HasSuffix(name, ".sync.yaml") {
			continue
		}
		blob, err := object.GetBlob(src, e.Hash)
		if err != nil {
			return err
		}
		rd, err := blob.Reader()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(io.LimitReader(rd, maxSyncFile))
		_ = rd.Close()
		if err != nil {
			return err
		}
		p := name
		if prefix != "." && prefix != "" {
			p = prefix + "/" + name
		}
		out[p] = data
	}
}
