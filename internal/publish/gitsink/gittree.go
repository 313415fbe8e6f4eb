package gitsink

import (
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// Trees built in memory: the edits of a path's subtree, blobs, and the
// pruning of objects a new root does not reach.

// treeEdit describes the rewrite of one directory: names to remove, files
// to set, subdirectories to edit, and whether its old content is dropped.
type treeEdit struct {
	replace bool
	remove  map[string]bool
	files   map[string]plumbing.Hash
	dirs    map[string]*treeEdit
}

func newTreeEdit() *treeEdit {
	return &treeEdit{remove: map[string]bool{}, files: map[string]plumbing.Hash{}, dirs: map[string]*treeEdit{}}
}

// dir returns the edit of the directory at p (slash-separated, relative).
func (e *treeEdit) dir(p string) *treeEdit {
	cur := e
	if p == "" {
		return cur
	}
	for _, part := range strings.Split(p, "/") {
		next, ok := cur.dirs[part]
		if !ok {
			next = newTreeEdit()
			cur.dirs[part] = next
		}
		cur = next
	}
	return cur
}

// apply writes the edited tree into overlay and returns its hash; empty is
// true when nothing is left in it (git has no empty directories).
func (e *treeEdit) apply(src storer.EncodedObjectStorer, overlay *memory.ObjectStorage, old plumbing.Hash) (h plumbing.Hash, empty bool, err error) {
	entries := map[string]object.TreeEntry{}
	if !old.IsZero() && !e.replace {
		t, err := object.GetTree(src, old)
		if err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("read tree %s: %w", old, err)
		}
		for _, te := range t.Entries {
			entries[te.Name] = te
		}
	}
	for name := range e.remove {
		delete(entries, name)
	}
	for name, sub := range e.dirs {
		var prev plumbing.Hash
		if te, ok := entries[name]; ok {
			if te.Mode != filemode.Dir && !e.remove[name] {
				return plumbing.ZeroHash, false, &publish.Error{Reason: publish.ReasonInvalid, Op: "write", URL: name,
					Err: fmt.Errorf("%q is a file of someone else where Scribe needs a directory; Scribe does not replace it", name)}
			}
			if te.Mode == filemode.Dir {
				prev = te.Hash
			}
		}
		nh, subEmpty, err := sub.apply(src, overlay, prev)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if subEmpty {
			delete(entries, name)
			continue
		}
		entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: nh}
	}
	for name, blob := range e.files {
		entries[name] = object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: blob}
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, true, nil
	}
	t := &object.Tree{Entries: make([]object.TreeEntry, 0, len(entries))}
	for _, te := range entries {
		t.Entries = append(t.Entries, te)
	}
	sort.Slice(t.Entries, func(i, j int) bool { return gitTreeKey(t.Entries[i]) < gitTreeKey(t.Entries[j]) })
	o := overlay.NewEncodedObject()
	if err := t.Encode(o); err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("encode tree: %w", err)
	}
	if o.Hash() == old {
		return old, false, nil // unchanged: the remote has it under its tip
	}
	nh, err := overlay.SetEncodedObject(o)
	return nh, false, err
}

// gitTreeKey orders tree entries as git does: directories sort as if their
// name ended in "/".
func gitTreeKey(te object.TreeEntry) string {
	if te.Mode == filemode.Dir {
		return te.Name + "/"
	}
	return te.Name
}

// putBlob stores data as a blob in overlay. It does not ask the cache
// whether the blob exists (a miss costs file system lookups); prune drops
// the blobs no new tree refers to.
func putBlob(overlay *memory.ObjectStorage, data []byte) (plumbing.Hash, error) {
	o := overlay.NewEncodedObject()
	o.SetType(plumbing.BlobObject)
	o.SetSize(int64(len(data)))
	w, err := o.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(data); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return overlay.SetEncodedObject(o)
}

// prune removes from overlay every object that the new root tree does not
// reach through new trees: blobs of subtrees that turned out unchanged. What
// is left is exactly what the remote lacks (plus the commit, added later).
func prune(overlay *memory.ObjectStorage, root plumbing.Hash) error {
	keep := map[plumbing.Hash]bool{}
	var walk func(h plumbing.Hash) error
	walk = func(h plumbing.Hash) error {
		o, ok := overlay.Objects[h]
		if !ok || keep[h] {
			return nil
		}
		keep[h] = true
		if o.Type() != plumbing.TreeObject {
			return nil
		}
		t := &object.Tree{}
		if err := t.Decode(o); err != nil {
			return err
		}
		for _, e := range t.Entries {
			if err := walk(e.Hash); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	for h, o := range overlay.Objects {
		if keep[h] {
			continue
		}
		delete(overlay.Objects, h)
		switch o.Type() {
		case plumbing.BlobObject:
			delete(overlay.Blobs, h)
		case plumbing.TreeObject:
			delete(overlay.Trees, h)
		case plumbing.CommitObject:
			delete(overlay.Commits, h)
		}
	}
	return nil
}
