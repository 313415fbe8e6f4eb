package gitsink

import (
	"io"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// treeObjects reads the objects of the files at paths in root (repository
// paths, "." the root): a path naming a tree stands for every file below
// it, one naming a blob for that file, one naming nothing for none. Only
// the files keep selects (by repository path) are read, each blob to at
// most limit bytes; files come in path order, then tree walk order.
func treeObjects(src layeredStorer, root plumbing.Hash, paths []string, keep func(file string) bool, limit int64) ([]publish.Object, error) {
	var out []publish.Object
	cache := map[plumbing.Hash]*object.Tree{}
	read := func(file string, h plumbing.Hash) error {
		if !keep(file) {
			return nil
		}
		data, err := readBlob(src, h, limit)
		if err != nil {
			return err
		}
		out = append(out, publish.FileObjects(file, data)...)
		return nil
	}
	for _, p := range paths {
		p = strings.TrimPrefix(p, "./")
		h := root
		if p != "." && p != "" {
			var err error
			if h, err = lookupPath(src, cache, root, p); err != nil {
				return nil, err
			}
		}
		if h.IsZero() {
			continue
		}
		o, err := src.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return nil, err
		}
		if o.Type() != plumbing.TreeObject {
			if err := read(p, h); err != nil {
				return nil, err
			}
			continue
		}
		t, err := object.DecodeTree(src, o)
		if err != nil {
			return nil, err
		}
		if err := walkFiles(t, func(name string, h plumbing.Hash) error {
			if p != "." && p != "" {
				name = p + "/" + name
			}
			return read(name, h)
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// walkFiles calls fn with the path (below t) and blob of every file of t.
func walkFiles(t *object.Tree, fn func(name string, h plumbing.Hash) error) error {
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
		if e.Mode == filemode.Dir {
			continue
		}
		if err := fn(name, e.Hash); err != nil {
			return err
		}
	}
}

// readBlob reads at most limit bytes of the blob h.
func readBlob(src layeredStorer, h plumbing.Hash, limit int64) ([]byte, error) {
	blob, err := object.GetBlob(src, h)
	if err != nil {
		return nil, err
	}
	rd, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rd.Close() }()
	return io.ReadAll(io.LimitReader(rd, limit))
}
