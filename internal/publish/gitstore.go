package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/storage/memory"
)

// gitStore is the cached bare repository of one remote. It is never checked
// out: Scribe builds the trees of the paths it owns directly in the object
// store, grafts them onto the remote tip's tree, and pushes exactly the
// objects it created. Objects of an attempt live in memory until the push is
// accepted, so a failed attempt leaves the cache as it was.
type gitStore struct {
	dir string
	url string
	// display is url without credentials, for messages.
	display string
	auth    transport.AuthMethod
	repo    *git.Repository
	ep      *transport.Endpoint
	tr      transport.Transport
	// fetches counts fetches, for GitStats.
	fetches *atomic.Int64
	// loose counts objects written loose since the cache was opened.
	loose int
}

// A cache that has grown this fragmented (every fetch adds a pack, every
// push adds loose objects) is dropped and fetched again, shallow: cheaper
// than repacking, and bounded.
const (
	maxCachePacks = 500
	maxCacheLoose = 20000
)

// compact resets the cache when it has become too fragmented.
func (s *gitStore) compact() error {
	packs, _ := filepath.Glob(filepath.Join(s.dir, "objects", "pack", "*.pack"))
	if len(packs) <= maxCachePacks && s.loose <= maxCacheLoose {
		return nil
	}
	fresh, err := resetGitStore(s.dir, s.url)
	if err != nil {
		return err
	}
	s.repo, s.loose = fresh, 0
	return nil
}

const remoteName = "origin"

func openGitStore(dir, url string, auth transport.AuthMethod) (*gitStore, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, fmt.Errorf("git URL %q: %w", url, err)
	}
	tr, err := client.NewClient(ep)
	if err != nil {
		return nil, fmt.Errorf("git URL %q: %w", url, err)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		// Absent or unusable: start a fresh cache.
		if repo, err = resetGitStore(dir, url); err != nil {
			return nil, err
		}
	}
	if _, err := repo.Remote(remoteName); errors.Is(err, git.ErrRemoteNotFound) {
		if _, err := repo.CreateRemote(&config.RemoteConfig{Name: remoteName, URLs: []string{url}}); err != nil {
			return nil, fmt.Errorf("git cache %s: add remote: %w", dir, err)
		}
	}
	return &gitStore{dir: dir, url: url, display: redactURL(url), auth: auth, repo: repo, ep: ep, tr: tr}, nil
}

// resetGitStore replaces dir with an empty bare repository.
func resetGitStore(dir, url string) (*git.Repository, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("reset git cache %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("create git cache %s: %w", dir, err)
	}
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		return nil, fmt.Errorf("init git cache %s: %w", dir, err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: remoteName, URLs: []string{url}}); err != nil {
		return nil, fmt.Errorf("git cache %s: add remote: %w", dir, err)
	}
	return repo, nil
}

// redactURL drops a password or token from a URL's user info, so messages,
// conditions and logs never carry it.
func redactURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// remoteRefs asks the remote for its refs through a receive-pack session,
// which is also the session a push uses; it is one HTTP round trip.
func (s *gitStore) remoteRefs(ctx context.Context) (transport.ReceivePackSession, *packp.AdvRefs, error) {
	sess, err := s.tr.NewReceivePackSession(s.ep, s.auth)
	if err != nil {
		return nil, nil, classifyGitError("connect to", s.display, err)
	}
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		_ = sess.Close()
		return nil, nil, classifyGitError("list refs of", s.display, err)
	}
	return sess, ar, nil
}

// refHash returns the advertised hash of ref, or the zero hash.
func refHash(ar *packp.AdvRefs, ref plumbing.ReferenceName) plumbing.Hash {
	if h, ok := ar.References[ref.String()]; ok {
		return h
	}
	if ar.Head != nil && ref == plumbing.HEAD {
		return *ar.Head
	}
	return plumbing.ZeroHash
}

func (s *gitStore) hasCommit(h plumbing.Hash) bool {
	_, err := s.repo.Storer.EncodedObject(plumbing.CommitObject, h)
	return err == nil
}

// ensure fetches the given branches unless every wanted commit is already in
// the cache, and returns each branch's tip as fetched: it may be newer than
// the wanted one when the branch moved meanwhile, which narrows the window in
// which another writer can win the race to the next push. The first fetch
// into an empty cache is shallow (depth 1); later fetches are incremental
// and bring only what is new.
func (s *gitStore) ensure(ctx context.Context, want map[string]plumbing.Hash) (map[string]plumbing.Hash, error) {
	tips := map[string]plumbing.Hash{}
	var specs []config.RefSpec
	for branch, h := range want {
		tips[branch] = h
		if h.IsZero() || s.hasCommit(h) {
			continue
		}
		specs = append(specs, config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/%s/%s", branch, remoteName, branch)))
	}
	if len(specs) == 0 {
		return tips, nil
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i] < specs[j] })
	if err := s.compact(); err != nil {
		return nil, err
	}
	depth := 0
	if s.empty() {
		depth = 1
	}
	if s.fetches != nil {
		s.fetches.Add(1)
	}
	err := s.repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: remoteName,
		RemoteURL:  s.url,
		RefSpecs:   specs,
		Depth:      depth,
		Auth:       s.auth,
		Tags:       git.NoTags,
		Force:      true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil, classifyGitError("fetch from", s.display, err)
	}
	fetched := map[string]bool{}
	for _, sp := range specs {
		b := strings.TrimPrefix(strings.SplitN(string(sp), ":", 2)[0], "+refs/heads/")
		fetched[b] = true
	}
	for branch, h := range want {
		if h.IsZero() || !fetched[branch] {
			continue
		}
		if ref, err := s.repo.Storer.Reference(plumbing.NewRemoteReferenceName(remoteName, branch)); err == nil && s.hasCommit(ref.Hash()) {
			tips[branch] = ref.Hash()
		}
		if !s.hasCommit(tips[branch]) {
			return nil, fmt.Errorf("fetch from %s: branch %s at %s is not in the fetched objects", s.display, branch, tips[branch])
		}
	}
	return tips, nil
}

// deepen fetches branch again with depth commits of history.
func (s *gitStore) deepen(ctx context.Context, branch string, depth int) error {
	if s.fetches != nil {
		s.fetches.Add(1)
	}
	err := s.repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: remoteName,
		RemoteURL:  s.url,
		RefSpecs:   []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/%s/%s", branch, remoteName, branch))},
		Depth:      depth,
		Auth:       s.auth,
		Tags:       git.NoTags,
		Force:      true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return classifyGitError("fetch from", s.display, err)
	}
	return nil
}

func (s *gitStore) empty() bool {
	iter, err := s.repo.Storer.IterEncodedObjects(plumbing.CommitObject)
	if err != nil {
		return true
	}
	defer iter.Close()
	_, err = iter.Next()
	return err != nil
}

// push sends the objects in overlay and moves ref from old to new in one
// receive-pack request. The remote refuses the update if ref is no longer at
// old, which makes every push a compare-and-swap.
func (s *gitStore) push(ctx context.Context, sess transport.ReceivePackSession, ar *packp.AdvRefs, overlay *memory.ObjectStorage, ref plumbing.ReferenceName, old, new plumbing.Hash) ([]byte, error) {
	req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	// Ask for the server's messages ("remote: …"): hooks and forges explain
	// rejections there, e.g. GitHub's "GH006: Protected branch update failed".
	var remoteMsg bytes.Buffer
	switch {
	case ar.Capabilities.Supports(capability.Sideband64k):
		_ = req.Capabilities.Set(capability.Sideband64k)
		req.Progress = &remoteMsg
	case ar.Capabilities.Supports(capability.Sideband):
		_ = req.Capabilities.Set(capability.Sideband)
		req.Progress = &remoteMsg
	}
	req.Commands = []*packp.Command{{Name: ref, Old: old, New: new}}

	var hashes []plumbing.Hash
	for h := range overlay.Objects {
		hashes = append(hashes, h)
	}
	sort.Slice(hashes, func(i, j int) bool { return hashes[i].String() < hashes[j].String() })
	rd, wr := io.Pipe()
	req.Packfile = rd
	done := make(chan error, 1)
	// The pack is kept too: once the push is accepted it goes into the
	// cache as is, so it is encoded only once.
	var pack bytes.Buffer
	go func() {
		_, err := packfile.NewEncoder(io.MultiWriter(wr, &pack), overlay, false).Encode(hashes, 0)
		done <- wr.CloseWithError(err)
	}()
	rs, err := sess.ReceivePack(ctx, req)
	_ = rd.Close()
	encErr := <-done
	// The transport returns the report's own error too; the report says
	// whether the remote refused the update, which is not a transport failure.
	if rs != nil {
		if rerr := rs.Error(); rerr != nil {
			reason := strings.TrimPrefix(rerr.Error(), "command error on "+ref.String()+": ")
			if m := strings.TrimSpace(remoteMsg.String()); m != "" {
				reason += ": " + strings.Join(strings.Fields(m), " ")
			}
			return nil, &pushRejectedError{url: s.display, ref: ref.Short(), reason: reason}
		}
	}
	if err != nil {
		return nil, classifyGitError("push to", s.display, err)
	}
	if encErr != nil {
		return nil, fmt.Errorf("push to %s: encode pack: %w", s.display, encErr)
	}
	return pack.Bytes(), nil
}

// keep stores the pack of an accepted push in the cache (writing thousands
// of loose objects costs far more than indexing one pack) and records the
// remote branch at its new commit.
func (s *gitStore) keep(pack []byte, branch string, commit plumbing.Hash) error {
	if err := s.writePack(pack); err != nil {
		return fmt.Errorf("git cache %s: store objects: %w", s.dir, err)
	}
	ref := plumbing.NewHashReference(plumbing.NewRemoteReferenceName(remoteName, branch), commit)
	if err := s.repo.Storer.SetReference(ref); err != nil {
		return fmt.Errorf("git cache %s: update %s: %w", s.dir, ref.Name(), err)
	}
	return nil
}

func (s *gitStore) writePack(pack []byte) error {
	pw, ok := s.repo.Storer.(storer.PackfileWriter)
	if !ok {
		return fmt.Errorf("the object store cannot take packfiles")
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		return err
	}
	if _, err := w.Write(pack); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

// rootTree returns the tree hash of commit, or the zero hash for none.
func (s *gitStore) rootTree(commit plumbing.Hash) (plumbing.Hash, error) {
	if commit.IsZero() {
		return plumbing.ZeroHash, nil
	}
	c, err := object.GetCommit(s.repo.Storer, commit)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git cache %s: read commit %s: %w", s.dir, commit, err)
	}
	return c.TreeHash, nil
}

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
				return plumbing.ZeroHash, false, &Error{Reason: ReasonInvalid, Op: "write", URL: name,
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

// layeredStorer reads from overlay first and then from the cache; the pack
// encoder and tree reads use it while an attempt is being built.
type layeredStorer struct {
	storer.EncodedObjectStorer
	overlay *memory.ObjectStorage
}

func (l layeredStorer) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if o, err := l.overlay.EncodedObject(t, h); err == nil {
		return o, nil
	}
	return l.EncodedObjectStorer.EncodedObject(t, h)
}

// isAncestor reports whether a is b or an ancestor of b, walking b's
// history in the cache. A history cut short by a shallow fetch counts as
// "not found".
func (s *gitStore) isAncestor(a, b plumbing.Hash) (bool, error) {
	if a == b {
		return true, nil
	}
	cb, err := object.GetCommit(s.repo.Storer, b)
	if err != nil {
		return false, fmt.Errorf("git cache %s: read commit %s: %w", s.dir, b, err)
	}
	found := false
	iter := object.NewCommitPreorderIter(cb, nil, nil)
	err = iter.ForEach(func(c *object.Commit) error {
		if c.Hash == a {
			found = true
			return storer.ErrStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, plumbing.ErrObjectNotFound) {
		return false, fmt.Errorf("git cache %s: walk %s: %w", s.dir, b, err)
	}
	return found, nil
}
