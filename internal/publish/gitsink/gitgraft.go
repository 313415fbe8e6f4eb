package gitsink

import (
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// Grafting: the owned subtrees of the changes written onto a tree, and
// which owners' paths a new tree changed.

// graft applies edits to the tree oldTree and returns the new root tree.
func graft(st *gitStore, objs *memory.ObjectStorage, oldTree plumbing.Hash, edits []pathChange, index bool) (plumbing.Hash, error) {
	root := newTreeEdit()
	for _, pc := range edits {
		dir := pc.dir()
		parent, name := path.Split(dir)
		parent = strings.TrimSuffix(parent, "/")
		pe := root.dir(parent)
		if pc.Delete {
			delete(pe.dirs, name)
			delete(pe.files, name+".sync.yaml")
			pe.remove[name] = true
			pe.remove[name+".sync.yaml"] = true
			continue
		}
		delete(pe.remove, name)
		delete(pe.remove, name+".sync.yaml")
		owned := newTreeEdit()
		owned.replace = true
		pe.dirs[name] = owned
		for _, f := range pc.Bundle.Files {
			blob, err := putBlob(objs, f.Data)
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("store %s: %w", f.Path, err)
			}
			full := path.Join(pc.RepoPath, f.Path)
			fdir, fname := path.Split(full)
			root.dir(strings.TrimSuffix(fdir, "/")).files[fname] = blob
		}
	}
	src := layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: objs}
	h, empty, err := root.apply(src, objs, oldTree)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if index && !empty {
		if h, empty, err = writeSyncIndex(src, objs, h, edits, st.display); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	if !empty {
		if err := prune(objs, h); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	if empty {
		// An empty repository is still a tree: the empty one.
		t := &object.Tree{}
		o := objs.NewEncodedObject()
		if err := t.Encode(o); err != nil {
			return plumbing.ZeroHash, err
		}
		return objs.SetEncodedObject(o)
	}
	return h, nil
}

// changedOwners reports, per change key, whether its owned paths differ
// between the two trees, and whether its sync file does.
func changedOwners(st *gitStore, objs *memory.ObjectStorage, oldTree, newTree plumbing.Hash, edits []pathChange) (changed, syncChanged map[string]bool, err error) {
	src := layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: objs}
	cache := map[plumbing.Hash]*object.Tree{}
	changed, syncChanged = map[string]bool{}, map[string]bool{}
	for _, pc := range edits {
		key := pc.RepoPath + "\x00" + publish.ObjectRef(pc.Source)
		for _, p := range []string{pc.dir(), pc.dir() + ".sync.yaml"} {
			a, err := lookupPath(src, cache, oldTree, p)
			if err != nil {
				return nil, nil, err
			}
			b, err := lookupPath(src, cache, newTree, p)
			if err != nil {
				return nil, nil, err
			}
			if a != b {
				changed[key] = true
				if strings.HasSuffix(p, ".sync.yaml") {
					syncChanged[key] = true
				}
			}
		}
	}
	return changed, syncChanged, nil
}

// lookupPath returns the hash of the entry at p below root, or zero.
func lookupPath(src layeredStorer, cache map[plumbing.Hash]*object.Tree, root plumbing.Hash, p string) (plumbing.Hash, error) {
	cur := root
	for _, part := range strings.Split(p, "/") {
		if cur.IsZero() {
			return cur, nil
		}
		t, ok := cache[cur]
		if !ok {
			var err error
			t, err = object.GetTree(src, cur)
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("read tree %s: %w", cur, err)
			}
			cache[cur] = t
		}
		next := plumbing.ZeroHash
		for _, e := range t.Entries {
			if e.Name == part {
				next = e.Hash
				break
			}
		}
		cur = next
	}
	return cur, nil
}
