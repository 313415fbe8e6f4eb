package gitsink

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// checkSyncIndexIn fails when the tree holds, at dir's sync index, a file
// or directory Scribe did not write.
func checkSyncIndexIn(src layeredStorer, cache map[plumbing.Hash]*object.Tree, root plumbing.Hash, dir, display string) error {
	file := path.Join(dir, publish.SyncIndexFile)
	parent := root
	if dir != "" {
		var err error
		if parent, err = lookupPath(src, cache, root, dir); err != nil || parent.IsZero() {
			return err
		}
	}
	t, ok := cache[parent]
	if !ok {
		var err error
		if t, err = object.GetTree(src, parent); err != nil {
			return fmt.Errorf("read tree %s: %w", parent, err)
		}
		cache[parent] = t
	}
	var entry *object.TreeEntry
	for i := range t.Entries {
		if t.Entries[i].Name == publish.SyncIndexFile {
			entry = &t.Entries[i]
		}
	}
	switch {
	case entry == nil:
		return nil
	case entry.Mode == filemode.Dir || entry.Mode == filemode.Submodule || entry.Mode == filemode.Symlink:
		return publish.SyncIndexConflict("publish to", display, file, fmt.Errorf("it is not a regular file"))
	}
	blob, err := object.GetBlob(src, entry.Hash)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	r, err := blob.Reader()
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	defer func() { _ = r.Close() }()
	data, err := io.ReadAll(io.LimitReader(r, 8<<20))
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if err := publish.CheckSyncIndex(data); err != nil {
		return publish.SyncIndexConflict("publish to", display, file, err)
	}
	return nil
}

// writeSyncIndex rewrites the index of every repository path the edits touch.
func writeSyncIndex(src layeredStorer, objs *memory.ObjectStorage, tree plumbing.Hash, edits []pathChange, display string) (plumbing.Hash, bool, error) {
	idx := newTreeEdit()
	seen := map[string]bool{}
	cache := map[plumbing.Hash]*object.Tree{}
	for _, pc := range edits {
		p := strings.TrimPrefix(path.Clean(pc.RepoPath), ".")
		if seen[p] {
			continue
		}
		seen[p] = true
		files, err := syncFiles(src, cache, tree, p)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if err := checkSyncIndexIn(src, cache, tree, p, display); err != nil {
			return plumbing.ZeroHash, false, err
		}
		data, err := publish.SyncIndexData(files)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		d := idx.dir(p)
		blob, err := putBlob(objs, data)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		d.files[publish.SyncIndexFile] = blob
	}
	return idx.apply(src, objs, tree)
}

// syncFiles lists <ns>/<kind>/<name>.sync.yaml below dir, sorted.
func syncFiles(src layeredStorer, cache map[plumbing.Hash]*object.Tree, root plumbing.Hash, dir string) ([]string, error) {
	h := root
	if dir != "" {
		var err error
		if h, err = lookupPath(src, cache, root, dir); err != nil || h.IsZero() {
			return nil, err
		}
	}
	var out []string
	var walk func(h plumbing.Hash, prefix string, depth int) error
	walk = func(h plumbing.Hash, prefix string, depth int) error {
		t, err := object.GetTree(src, h)
		if err != nil {
			return fmt.Errorf("read tree %s: %w", h, err)
		}
		for _, e := range t.Entries {
			switch {
			case depth < 2 && e.Mode == filemode.Dir:
				if err := walk(e.Hash, prefix+e.Name+"/", depth+1); err != nil {
					return err
				}
			case depth == 2 && e.Mode != filemode.Dir && strings.HasSuffix(e.Name, ".sync.yaml"):
				out = append(out, prefix+e.Name)
			}
		}
		return nil
	}
	if err := walk(h, "", 0); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}
