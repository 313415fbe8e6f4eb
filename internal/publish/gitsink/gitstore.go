package gitsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/scribe-gitops/scribe/internal/credurl"
	"github.com/scribe-gitops/scribe/internal/publish"
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
	// fetches counts fetches, for Stats.
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
	return s.reset()
}

// reset replaces the cache with an empty repository: the next ensure
// fetches what it needs, shallow.
func (s *gitStore) reset() error {
	fresh, err := resetGitStore(s.dir, s.url)
	if err != nil {
		return err
	}
	s.repo, s.loose = fresh, 0
	return nil
}

const remoteName = "origin"

// objectCacheSize bounds the decoded objects a cache keeps in memory
// (go-git's own default, for PlainOpen, is 96 MiB per repository). Each
// Repository's URL has its own cache, so the default let a few
// repositories, or one large sync index rewritten by every commit, hold
// hundreds of MiB: 10,000 Workloads left 67 MB of objects in it.
const objectCacheSize = 16 * cache.MiByte

// openCache opens the bare repository at dir with a bounded object cache.
func openCache(dir string) (*git.Repository, error) {
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		return nil, git.ErrRepositoryNotExists
	}
	return git.Open(filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRU(objectCacheSize)), nil)
}

// openGitStore opens the cache at dir, checking it first (see checkCache):
// a cache that is absent, unusable or broken (a process killed while it
// wrote) is replaced by an empty one, so it is fetched again rather than
// failing every publish from now on. The caller holds the cache's lock.
func openGitStore(dir, url string, ep *transport.Endpoint, tr transport.Transport) (*gitStore, error) {
	sweepCache(dir)
	repo, err := openCache(dir)
	if err == nil {
		err = checkCache(dir, url, repo)
	}
	if err != nil {
		// Absent, unusable or broken: start a fresh cache.
		if repo, err = resetGitStore(dir, url); err != nil {
			return nil, err
		}
	}
	return &gitStore{dir: dir, url: url, display: redactURL(url), repo: repo, ep: ep, tr: tr}, nil
}

// Names of what a cache leaves behind when it is killed while it writes.
const (
	cacheNewSuffix = ".new-" // a fresh cache being made
	cacheOldSuffix = ".old-" // a dropped cache being removed
	refTempSuffix  = ".scribe-tmp"
)

// writeRef points the loose reference name at h, atomically: the file is
// written beside its place and renamed over it (go-git truncates and
// rewrites in place, which a kill can leave empty).
func (s *gitStore) writeRef(name plumbing.ReferenceName, h plumbing.Hash) error {
	p := filepath.Join(s.dir, filepath.FromSlash(name.String()))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + refTempSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(h.String() + "\n"); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// redactURL drops the credentials of a URL (see credurl.Redact), so
// messages, conditions, logs and the cache's config never carry them.
func redactURL(raw string) string { return credurl.Redact(raw) }

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
		return nil, s.fetchError(err)
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
			return nil, s.corrupt(fmt.Errorf("fetch: branch %s at %s is not in the fetched objects", branch, tips[branch]))
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
		return s.fetchError(err)
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

// push sends the objects in overlay and moves ref from old to next in one
// receive-pack request. The remote refuses the update if ref is no longer at
// old, which makes every push a compare-and-swap.
func (s *gitStore) push(ctx context.Context, sess transport.ReceivePackSession, ar *packp.AdvRefs, overlay *memory.ObjectStorage, ref plumbing.ReferenceName, old, next plumbing.Hash) ([]byte, error) {
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
	req.Commands = []*packp.Command{{Name: ref, Old: old, New: next}}

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
		var err error
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("encode pack: panic: %v", r)
			}
			done <- wr.CloseWithError(err)
		}()
		_, err = packfile.NewEncoder(io.MultiWriter(wr, &pack), overlay, false).Encode(hashes, 0)
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
// remote branch at its new commit. The push has landed whatever happens
// here: when the cache cannot take the pack, it is dropped (the next use
// fetches again) rather than failing a publish that succeeded.
func (s *gitStore) keep(pack []byte, branch string, commit plumbing.Hash) {
	err := s.writePack(pack)
	if err == nil {
		err = s.writeRef(plumbing.NewRemoteReferenceName(remoteName, branch), commit)
	}
	if err != nil {
		_ = s.reset()
	}
}

// corrupt classifies an error of reading the cache: the objects of a
// commit the cache holds must all be there, so a failure to read one means
// the cache is damaged (see lockedStore.do). Classified errors pass.
func (s *gitStore) corrupt(err error) error {
	var pe *publish.Error
	if err == nil || errors.As(err, &pe) {
		return err
	}
	if unwritable(err) {
		return cacheUnwritable("write the git cache of", s.display, err)
	}
	return &publish.Error{Reason: publish.ReasonCacheCorrupt, Op: "read the git cache of", URL: s.display, Err: err}
}

// fetchError classifies a failed fetch: the cache's fault when an object
// it should hold is missing or unreadable, or when the cache no longer
// passes its checks (a file of it vanished or was garbled under it);
// otherwise the remote's.
func (s *gitStore) fetchError(err error) error {
	if unwritable(err) {
		return cacheUnwritable("fetch into the git cache of", s.display, err)
	}
	msg := err.Error()
	if errors.Is(err, plumbing.ErrObjectNotFound) || strings.Contains(msg, "ref file is empty") ||
		strings.Contains(msg, "zlib") || strings.Contains(msg, "packfile") {
		return s.corrupt(fmt.Errorf("fetch: %w", err))
	}
	if cerr := checkCache(s.dir, s.url, s.repo); cerr != nil {
		return s.corrupt(fmt.Errorf("fetch: %w (%w)", err, cerr))
	}
	return classifyGitError("fetch from", s.display, err)
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
		return plumbing.ZeroHash, s.corrupt(fmt.Errorf("read commit %s: %w", commit, err))
	}
	return c.TreeHash, nil
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
