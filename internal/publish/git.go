package publish

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/storage/memory"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/credurl"
)

// GitOptions configure publishing to one branch of one Git repository.
type GitOptions struct {
	// URL is the clone URL: https://, http:// or ssh://, or the scp form.
	URL string
	// Branch receives the commits.
	Branch string
	// Path is the directory inside the repository under which Scribe owns
	// <namespace>/<kind>/<name>/ and <namespace>/<kind>/<name>.sync.yaml.
	Path string
	// Auth for fetch and push; nil for anonymous. See GitAuth.
	Auth transport.AuthMethod
	// Author and committer of Scribe's commits.
	Author Signature
	// Signer signs commits (see GPGSigner, SSHSigner); nil for unsigned.
	Signer git.Signer
	// MessageTemplate is a text/template for the commit subject and body,
	// executed with CommitInfo. Scribe always appends its trailers; the
	// template may not write them. Its execution is bounded (see
	// MaxTemplateOutput, TemplateTimeout): ranges only over the data, at
	// most two deep, and no {{template}} calls.
	MessageTemplate string
	// MessageTemplateName names MessageTemplate in errors (the flag or
	// field it came from); default "commit message template".
	MessageTemplateName string
	// MaxAttempts bounds the tries of one batch when other writers keep
	// moving the branch (default 10).
	MaxAttempts int
	// Backoff is the base of the jittered exponential wait between tries
	// (default 50ms, capped at 2s).
	Backoff time.Duration
	// SyncIndex makes Scribe keep <Path>/kustomization.yaml listing every
	// object's .sync.yaml (see SyncIndexFile): the one file a root applier
	// object points at.
	SyncIndex bool
	// Identity names the credentials and signing key the options carry
	// (for example the Repository and its Secrets' resource versions).
	// Concurrent changes are batched into one commit only with others of
	// the same Identity, author and template.
	Identity string
}

// Signature names the author and committer of Scribe's commits.
type Signature struct {
	Name  string
	Email string
}

// DefaultAuthor is used when the Repository names none.
func DefaultAuthor() Signature {
	return Signature{Name: "Scribe", Email: "scribe@scribe.dev"}
}

// CommitInfo is the data of a commit message template.
type CommitInfo struct {
	Branch  string
	Path    string
	Changes []ChangeInfo
}

// ChangeInfo describes one change of a commit.
type ChangeInfo struct {
	Action     string // "update" or "delete"
	Object     string // Kind/namespace/name
	Kind       string
	Namespace  string
	Name       string
	Generation int64
	Digest     string
	Reason     string
	Dir        string // repository-relative owned directory
}

// batchTimeout bounds one batch: every fetch, commit and push try.
const batchTimeout = 5 * time.Minute

// Trailer keys Scribe writes into every commit, once per change.
const (
	TrailerObject     = "Scribe-Object"
	TrailerGeneration = "Scribe-Generation"
	TrailerDigest     = "Scribe-Digest"
)

// DefaultCommitInterval is Git.CommitInterval unless changed: a burst of
// changes becomes about one commit a second.
const DefaultCommitInterval = time.Second

// Git publishes to Git repositories. It keeps one cached bare repository per
// remote URL under its cache directory and one writer per (URL, branch), so
// concurrent Publish calls for the same branch are serialized and batched.
type Git struct {
	// OnConflict, when set before first use, is called for every push lost
	// to another writer (then retried), e.g. to count it in a metric.
	OnConflict func()
	// CommitInterval paces the commits to one branch: a commit starts no
	// sooner than CommitInterval after the previous one to that branch
	// started, and every change queued meanwhile goes into it. A change to
	// a branch that has not been written for CommitInterval commits at
	// once; only a burst waits, and piles up into few commits. 0 commits
	// whatever is queued as soon as the previous commit is pushed. NewGit
	// sets DefaultCommitInterval; change it before first use.
	CommitInterval time.Duration

	cacheDir string
	stats    gitStats
	// ids caches the objects each blob and owned tree holds, for the
	// cross-resource collision check.
	ids identityCache

	mu      sync.Mutex
	stores  map[string]*lockedStore
	writers map[string]*gitWriter
}

// lockedStore serializes the use of one cached repository: within the
// process by a semaphore that gives up with the caller's context, across
// processes by an flock(2) on <cache>/<key>.lock. Every holder runs under
// storeTimeout, so a remote that hangs cannot wedge other callers.
//
// The lock file also carries a token that each holder replaces when it
// takes the lock: a holder that finds another token than the one it wrote
// knows another process (or another Git in this one) has used the cache
// since, perhaps been killed in the middle, and opens and checks the cache
// again before using it (go-git keeps the pack indexes it has read).
type lockedStore struct {
	sem      chan struct{}
	dir, url string
	display  string
	lockPath string
	ep       *transport.Endpoint
	tr       transport.Transport
	fetches  *atomic.Int64
	// store is nil until the first lock.
	store *gitStore
	// token is what this lockedStore last wrote into the lock file.
	token string
}

// storeTimeout bounds one operation on a cached repository: every fetch,
// push and ref listing it makes.
const storeTimeout = 2 * time.Minute

// lock takes the store for one operation and returns the context to use
// (bounded by storeTimeout), the store, and the release function.
func (ls *lockedStore) lock(ctx context.Context) (context.Context, *gitStore, func(), error) {
	select {
	case ls.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, nil, fmt.Errorf("wait for the git cache of %s: %w", ls.display, ctx.Err())
	}
	fl, err := acquireFileLock(ctx, ls.lockPath)
	if err != nil {
		<-ls.sem
		return nil, nil, nil, fmt.Errorf("wait for the git cache of %s: %w", ls.display, err)
	}
	if err := ls.claim(fl); err != nil {
		fl.release()
		<-ls.sem
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	return ctx, ls.store, func() { cancel(); fl.release(); <-ls.sem }, nil
}

// claim reads the token in the held lock file, opens (and checks) the
// cache again when someone else wrote it since, and writes a new token.
func (ls *lockedStore) claim(fl *fileLock) error {
	buf := make([]byte, 64)
	n, err := fl.f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read lock %s: %w", ls.lockPath, err)
	}
	if ls.store == nil || ls.token == "" || string(buf[:n]) != ls.token {
		st, err := openGitStore(ls.dir, ls.url, ls.ep, ls.tr)
		if err != nil {
			return err
		}
		st.fetches = ls.fetches
		ls.store = st
	}
	var tok [16]byte
	_, _ = crand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	if err := fl.f.Truncate(0); err != nil {
		return fmt.Errorf("write lock %s: %w", ls.lockPath, err)
	}
	if _, err := fl.f.WriteAt([]byte(token), 0); err != nil {
		ls.token = ""
		return fmt.Errorf("write lock %s: %w", ls.lockPath, err)
	}
	ls.token = token
	return nil
}

// do runs fn on the locked store. A panic in fn (go-git panics on some
// damaged packs) becomes an *Error with ReasonInternal; after it, or after
// an error with ReasonCacheCorrupt, the cache is dropped and fn runs once
// more on a fresh one. auth is set on the store for fn.
func (ls *lockedStore) do(ctx context.Context, auth transport.AuthMethod, fn func(ctx context.Context, st *gitStore) error) error {
	ctx, st, unlock, err := ls.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	err = runStore(ctx, st, auth, fn)
	if r := ReasonOf(err); r != ReasonCacheCorrupt && r != ReasonInternal {
		return err
	}
	if rerr := st.reset(); rerr != nil {
		return fmt.Errorf("%w; dropping the cache failed too: %w", err, rerr)
	}
	return runStore(ctx, st, auth, fn)
}

func runStore(ctx context.Context, st *gitStore, auth transport.AuthMethod, fn func(ctx context.Context, st *gitStore) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Reason: ReasonInternal, Op: "use the git cache of", URL: st.display,
				Err: fmt.Errorf("panic: %v", r), Hint: "the cache was dropped; report this if it persists"}
		}
	}()
	st.auth = auth
	return fn(ctx, st)
}

type gitStats struct {
	commits, conflicts, fetches atomic.Int64
}

// GitStats counts what a Git publisher did since it was made.
type GitStats struct {
	// Commits pushed.
	Commits int64
	// Conflicts: pushes refused because another writer moved the branch
	// first, each followed by a retry on the new tip.
	Conflicts int64
	// Fetches from remotes (a publish on an unchanged tip fetches nothing).
	Fetches int64
}

// Stats returns the counters.
func (g *Git) Stats() GitStats {
	return GitStats{Commits: g.stats.commits.Load(), Conflicts: g.stats.conflicts.Load(), Fetches: g.stats.fetches.Load()}
}

// NewGit makes a Git publisher that caches repositories under cacheDir.
func NewGit(cacheDir string) *Git {
	return &Git{CommitInterval: DefaultCommitInterval, cacheDir: cacheDir, stores: map[string]*lockedStore{}, writers: map[string]*gitWriter{}}
}

// Sink returns the writer for opts.URL and opts.Branch. Writers are shared:
// every sink for the same URL and branch commits through one queue.
func (g *Git) Sink(opts GitOptions) (Sink, error) {
	if opts.URL == "" || opts.Branch == "" {
		return nil, fmt.Errorf("git sink: url and branch are required")
	}
	if err := credurl.Check(opts.URL); err != nil {
		return nil, fmt.Errorf("git sink: %w: give credentials in the Secret (or --secret-dir, SCRIBE_GIT_*), never in the URL", err)
	}
	if err := checkRepoPath(opts.Path); err != nil {
		return nil, err
	}
	if opts.Author.Name == "" || opts.Author.Email == "" {
		opts.Author = DefaultAuthor()
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 10
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 50 * time.Millisecond
	}
	var tmpl *commitTemplate
	if opts.MessageTemplate != "" {
		name := opts.MessageTemplateName
		if name == "" {
			name = "commit message template"
		}
		t, err := parseCommitTemplate(name, opts.MessageTemplate)
		if err != nil {
			return nil, fmt.Errorf("git sink: %w", err)
		}
		tmpl = t
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	key := opts.URL + "\x00" + opts.Branch
	w, ok := g.writers[key]
	if !ok {
		w = &gitWriter{git: g}
		g.writers[key] = w
	}
	return &gitSink{w: w, opts: opts, tmpl: tmpl}, nil
}

// CheckAccess asks the remote for its refs over the push service, which
// proves the URL, the network path and the credentials (forges check write
// access there), and returns the branch's head ("" when the branch does not
// exist yet). Nothing is fetched or written.
func (g *Git) CheckAccess(ctx context.Context, opts GitOptions) (string, error) {
	if opts.URL == "" || opts.Branch == "" {
		return "", fmt.Errorf("git access check: url and branch are required")
	}
	ls, err := g.store(opts.URL)
	if err != nil {
		return "", err
	}
	var h plumbing.Hash
	err = ls.do(ctx, opts.Auth, func(ctx context.Context, st *gitStore) error {
		sess, ar, err := st.remoteRefs(ctx)
		if err != nil {
			return err
		}
		_ = sess.Close()
		h = refHash(ar, plumbing.NewBranchReferenceName(opts.Branch))
		return nil
	})
	if err != nil || h.IsZero() {
		return "", err
	}
	return h.String(), nil
}

// store returns the cached repository of url; it is opened (and checked)
// under its lock, on first use.
func (g *Git) store(url string) (*lockedStore, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ls, ok := g.stores[url]
	if !ok {
		if err := credurl.Check(url); err != nil {
			return nil, &Error{Reason: ReasonInvalid, Op: "open", URL: redactURL(url), Err: fmt.Errorf("%w: give credentials in the Secret (or --secret-dir, SCRIBE_GIT_*), never in the URL", err)}
		}
		ep, err := transport.NewEndpoint(url)
		if err != nil {
			return nil, fmt.Errorf("git URL %q: %w", redactURL(url), err)
		}
		tr, err := client.NewClient(ep)
		if err != nil {
			return nil, fmt.Errorf("git URL %q: %w", redactURL(url), err)
		}
		if err := os.MkdirAll(g.cacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("create git cache %s: %w", g.cacheDir, err)
		}
		sum := sha256.Sum256([]byte(url))
		key := hex.EncodeToString(sum[:8])
		ls = &lockedStore{
			sem: make(chan struct{}, 1), dir: filepath.Join(g.cacheDir, key), url: url, display: redactURL(url),
			lockPath: filepath.Join(g.cacheDir, key+".lock"), ep: ep, tr: tr, fetches: &g.stats.fetches,
		}
		g.stores[url] = ls
	}
	return ls, nil
}

// checkRepoPath applies CleanRepoPath to a sink's path, which must be
// given clean already ("" is the root).
func checkRepoPath(p string) error {
	if p == "" {
		return nil
	}
	c, err := CleanRepoPath(p)
	if err != nil {
		return fmt.Errorf("git sink: path %w", err)
	}
	if c != p {
		return fmt.Errorf("git sink: path %q must be clean (%q)", p, c)
	}
	return nil
}

type gitSink struct {
	w    *gitWriter
	opts GitOptions
	tmpl *commitTemplate
}

// groupKey says which requests may share a commit.
func (s *gitSink) groupKey() string {
	return s.opts.Identity + "\x00" + s.opts.Author.Name + "\x00" + s.opts.Author.Email + "\x00" + s.opts.MessageTemplate
}

func (s *gitSink) Publish(ctx context.Context, changes ...Change) (Result, error) {
	if len(changes) == 0 {
		return Result{}, fmt.Errorf("publish to %s: no changes", redactURL(s.opts.URL))
	}
	for _, c := range changes {
		if err := c.Validate(); err != nil {
			return Result{}, &Error{Reason: ReasonInvalid, Op: "publish to", URL: redactURL(s.opts.URL), Err: err}
		}
	}
	return s.w.enqueue(ctx, s, changes)
}

// gitWriter serializes and batches the commits to one branch. The first
// caller that finds the writer idle runs the loop; everyone else waits for
// the commit that carries their change. The loop paces the commits by
// Git.CommitInterval: what arrives while it waits (or while a push is in
// flight) goes into the next commit.
type gitWriter struct {
	git *Git

	mu      sync.Mutex
	pending []*request
	running bool
	// last is when the previous commit to the branch started.
	last time.Time
}

type request struct {
	ctx     context.Context
	sink    *gitSink
	changes []Change
	done    chan struct{}
	res     Result
	err     error
}

func (w *gitWriter) enqueue(ctx context.Context, s *gitSink, changes []Change) (Result, error) {
	req := &request{ctx: ctx, sink: s, changes: changes, done: make(chan struct{})}
	w.mu.Lock()
	w.pending = append(w.pending, req)
	if !w.running {
		w.running = true
		go w.loop()
	}
	w.mu.Unlock()
	select {
	case <-req.done:
		return req.res, req.err
	case <-ctx.Done():
		return Result{}, fmt.Errorf("publish to %s: %w", redactURL(s.opts.URL), ctx.Err())
	}
}

func (w *gitWriter) loop() {
	for {
		w.mu.Lock()
		wait := time.Until(w.last.Add(w.git.CommitInterval))
		w.mu.Unlock()
		if wait > 0 {
			// Commits follow each other closely: let the burst pile up.
			time.Sleep(wait)
		}
		w.mu.Lock()
		batch := w.pending
		w.pending = nil
		if len(batch) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.last = time.Now()
		w.mu.Unlock()

		live := batch[:0]
		for _, r := range batch {
			if r.ctx.Err() != nil {
				r.err = r.ctx.Err()
				close(r.done)
				continue
			}
			live = append(live, r)
		}
		if len(live) == 0 {
			continue
		}
		// Only requests made with the same credentials, signer, author and
		// message template share a commit: nobody's change is pushed or
		// signed with another Repository's secrets.
		var order []string
		groups := map[string][]*request{}
		for _, r := range live {
			k := r.sink.groupKey()
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], r)
		}
		for _, k := range order {
			w.commitBatch(groups[k])
		}
	}
}

// commitBatch publishes every request of the batch in one commit, retrying
// on conflicts, and hands each request its result.
func (w *gitWriter) commitBatch(batch []*request) {
	// Every request of the batch has the same identity (see groupKey); the
	// newest one's options are used. Changes keep their order and a later
	// change of the same object replaces an earlier one.
	s := batch[len(batch)-1].sink
	// The batch belongs to several callers, so it runs on its own bounded
	// context; a caller that gives up stops waiting, not the others' commit.
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()

	type item struct {
		change Change
		path   string
		req    int
	}
	var order []string
	items := map[string]item{}
	// Requests that change the same object fail or land together: a unit
	// is a set of requests joined by a shared object (union-find).
	unit := make([]int, len(batch))
	var find func(i int) int
	find = func(i int) int {
		if unit[i] != i {
			unit[i] = find(unit[i])
		}
		return unit[i]
	}
	for i, r := range batch {
		unit[i] = i
		for _, c := range r.changes {
			key := r.sink.opts.Path + "\x00" + ObjectRef(c.Source)
			if prev, seen := items[key]; !seen {
				order = append(order, key)
			} else {
				unit[find(prev.req)] = find(i)
			}
			items[key] = item{change: c, path: r.sink.opts.Path, req: i}
		}
	}
	edits := make([]pathChange, 0, len(order))
	for _, k := range order {
		edits = append(edits, pathChange{Change: items[k].change, RepoPath: items[k].path, unit: find(items[k].req)})
	}

	res, err := w.publishWithRetry(ctx, s, edits)
	for i, r := range batch {
		r.res, r.err = res.Result, err
		if err == nil && res.rejected[find(i)] != nil {
			r.res, r.err = Result{}, res.rejected[find(i)]
		} else if err == nil {
			r.res.Changed = false
			for _, c := range r.changes {
				key := r.sink.opts.Path + "\x00" + ObjectRef(c.Source)
				if res.changed[key] {
					r.res.Changed = true
				}
				if res.syncChanged[key] {
					r.res.SyncChanged = true
				}
			}
		}
		close(r.done)
	}
}

// pathChange is a change with the repository path it is written under.
type pathChange struct {
	Change
	RepoPath string
	// unit groups the changes that land or fail together (see commitBatch).
	unit int
}

func (pc pathChange) dir() string { return path.Join(pc.RepoPath, OwnedDir(pc.Source)) }

type batchResult struct {
	Result
	changed     map[string]bool
	syncChanged map[string]bool
	// rejected holds, by unit, the changes left out of the commit because
	// their objects collide with another custom resource's.
	rejected map[int]error
}

func (w *gitWriter) publishWithRetry(ctx context.Context, s *gitSink, edits []pathChange) (batchResult, error) {
	ls, err := w.git.store(s.opts.URL)
	if err != nil {
		return batchResult{}, err
	}
	var res batchResult
	err = ls.do(ctx, s.opts.Auth, func(ctx context.Context, st *gitStore) error {
		var err error
		res, err = w.commitWithRetry(ctx, st, s, edits)
		return err
	})
	return res, err
}

// commitWithRetry commits and pushes edits, trying again on the new tip
// when another writer moved the branch first.
func (w *gitWriter) commitWithRetry(ctx context.Context, st *gitStore, s *gitSink, edits []pathChange) (batchResult, error) {
	var lastErr error
	for attempt := 0; attempt < s.opts.MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := sleepBackoff(ctx, s.opts.Backoff, attempt); err != nil {
				return batchResult{}, err
			}
		}
		res, err := commitAndPush(ctx, st, s, s.opts.Branch, edits)
		if err == nil {
			if res.Changed {
				w.git.stats.commits.Add(1)
			}
			return res, nil
		}
		lastErr = err
		if ReasonOf(err) != ReasonConflict {
			return batchResult{}, err
		}
		w.git.stats.conflicts.Add(1)
		if w.git.OnConflict != nil {
			w.git.OnConflict()
		}
	}
	return batchResult{}, &Error{Reason: ReasonConflict, Op: "publish to", URL: redactURL(s.opts.URL),
		Err: fmt.Errorf("branch %s: gave up after %d attempts, other writers kept moving the branch: %w", s.opts.Branch, s.opts.MaxAttempts, errors.Unwrap(lastErr))}
}

// sleepBackoff waits a full-jitter exponential backoff: a random duration
// in [0, min(base*2^attempt, 2s)).
func sleepBackoff(ctx context.Context, base time.Duration, attempt int) error {
	limit := base << min(attempt, 10)
	if limit > 2*time.Second {
		limit = 2 * time.Second
	}
	t := time.NewTimer(rand.N(limit) + time.Millisecond) //nolint:gosec // jitter, not security
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitAndPush is one attempt: read the remote tip, fetch it if the cache
// lacks it, graft the owned subtrees onto its tree, commit and push with the
// tip as the expected old value.
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
	oldTree, err := st.rootTree(tip)
	if err != nil {
		return batchResult{}, err
	}
	overlay := memory.NewStorage()
	objs := &overlay.ObjectStorage
	rejected, err := collisions(layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: objs}, &s.w.git.ids, oldTree, edits, st.display)
	if err != nil {
		return batchResult{}, st.corrupt(err)
	}
	if len(rejected) > 0 {
		kept := make([]pathChange, 0, len(edits))
		for _, pc := range edits {
			if rejected[pc.unit] == nil {
				kept = append(kept, pc)
			}
		}
		edits = kept
		if len(edits) == 0 {
			return batchResult{rejected: rejected}, nil
		}
	}
	newTree, err := graft(st, objs, oldTree, edits, s.opts.SyncIndex)
	if err != nil {
		return batchResult{}, st.corrupt(err)
	}
	changed, syncChanged, err := changedOwners(st, objs, oldTree, newTree, edits)
	if err != nil {
		return batchResult{}, st.corrupt(err)
	}
	if err := rememberIdentities(layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: objs}, &s.w.git.ids, newTree, edits); err != nil {
		return batchResult{}, st.corrupt(err)
	}
	res := batchResult{changed: changed, syncChanged: syncChanged, rejected: rejected, Result: Result{Commit: tip.String(), Revision: branch + "@sha1:" + tip.String()}}
	if newTree == oldTree || (tip.IsZero() && len(changed) == 0) {
		// Nothing to write (a delete on a branch that does not exist is no
		// reason to create it).
		if tip.IsZero() {
			res.Commit, res.Revision = "", ""
		}
		return res, nil
	}
	msg, err := s.message(branch, edits, changed)
	if err != nil {
		return batchResult{}, err
	}
	var parents []plumbing.Hash
	if !tip.IsZero() {
		parents = []plumbing.Hash{tip}
	}
	commit, err := writeCommit(objs, s.opts.Author, s.opts.Signer, newTree, parents, msg)
	if err != nil {
		return batchResult{}, fmt.Errorf("publish to %s: %w", redactURL(s.opts.URL), err)
	}
	pack, err := st.push(ctx, sess, ar, objs, ref, tip, commit)
	if err != nil {
		var rej *pushRejectedError
		if errors.As(err, &rej) {
			return batchResult{}, st.classifyRejection(ctx, rej, ref, tip)
		}
		return batchResult{}, err
	}
	st.keep(pack, branch, commit)
	res.Commit = commit.String()
	res.Revision = branch + "@sha1:" + commit.String()
	res.Changed = true
	return res, nil
}

// classifyRejection decides whether a rejected push lost a race (the branch
// moved: retry on the new tip) or was refused (a hook, a protected branch).
func (s *gitStore) classifyRejection(ctx context.Context, rej *pushRejectedError, ref plumbing.ReferenceName, expected plumbing.Hash) error {
	if isConflictReason(rej.reason) {
		return &Error{Reason: ReasonConflict, Op: "push to", URL: s.display, Err: rej}
	}
	if sess, ar, err := s.remoteRefs(ctx); err == nil {
		_ = sess.Close()
		if refHash(ar, ref) != expected {
			return &Error{Reason: ReasonConflict, Op: "push to", URL: s.display, Err: rej}
		}
	}
	return &Error{Reason: ReasonRejected, Op: "push to", URL: s.display, Err: errors.New(rej.reason),
		Hint: "the remote refused the update of " + ref.Short() + ", for example a protected branch or a server hook; give Scribe push rights or use pullRequest mode"}
}

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
		data, err := SyncIndexData(files)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		d := idx.dir(p)
		blob, err := putBlob(objs, data)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		d.files[SyncIndexFile] = blob
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

// changedOwners reports, per change key, whether its owned paths differ
// between the two trees, and whether its sync file does.
func changedOwners(st *gitStore, objs *memory.ObjectStorage, oldTree, newTree plumbing.Hash, edits []pathChange) (changed, syncChanged map[string]bool, err error) {
	src := layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: objs}
	cache := map[plumbing.Hash]*object.Tree{}
	changed, syncChanged = map[string]bool{}, map[string]bool{}
	for _, pc := range edits {
		key := pc.RepoPath + "\x00" + ObjectRef(pc.Source)
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

// message builds the commit message: the subject and body (from the
// template, if any), then one block of trailers per change.
func (s *gitSink) message(branch string, edits []pathChange, changed map[string]bool) (string, error) {
	info := CommitInfo{Branch: branch, Path: s.opts.Path}
	for _, pc := range edits {
		if !changed[pc.RepoPath+"\x00"+ObjectRef(pc.Source)] {
			continue
		}
		ci := ChangeInfo{
			Action: "update", Object: ObjectRef(pc.Source), Kind: pc.Source.Kind,
			Namespace: pc.Source.Namespace, Name: pc.Source.Name, Generation: pc.Generation,
			Reason: neutralizeTrailers(pc.Reason), Dir: pc.dir(),
		}
		if pc.Delete {
			ci.Action = "delete"
		} else {
			ci.Digest = pc.Bundle.Digest
		}
		info.Changes = append(info.Changes, ci)
	}
	var b strings.Builder
	if s.tmpl != nil {
		out, err := s.tmpl.execute(info)
		if err != nil {
			return "", &Error{Reason: ReasonInvalid, Op: "publish to", URL: redactURL(s.opts.URL), Err: err}
		}
		b.WriteString(out)
	} else {
		defaultMessage(&b, info)
	}
	var text strings.Builder
	text.WriteString(strings.TrimRight(b.String(), "\n") + "\n\n")
	for i, ci := range info.Changes {
		if i > 0 {
			text.WriteString("\n")
		}
		fmt.Fprintf(&text, "%s: %s\n%s: %d\n", TrailerObject, ci.Object, TrailerGeneration, ci.Generation)
		if ci.Digest != "" {
			fmt.Fprintf(&text, "%s: %s\n", TrailerDigest, ci.Digest)
		}
	}
	return text.String(), nil
}

func defaultMessage(w io.Writer, info CommitInfo) {
	short := func(d string) string {
		if i := strings.IndexByte(d, ':'); i >= 0 && len(d) > i+13 {
			return d[:i+13]
		}
		return d
	}
	if len(info.Changes) == 1 {
		ci := info.Changes[0]
		if ci.Action == "delete" {
			_, _ = fmt.Fprintf(w, "scribe: delete %s %s/%s\n\nRemove %s/ and %s.sync.yaml.\n", ci.Kind, ci.Namespace, ci.Name, ci.Dir, ci.Dir)
		} else {
			_, _ = fmt.Fprintf(w, "scribe: update %s %s/%s to %s (generation %d)\n\nRender %s into %s/.\n", ci.Kind, ci.Namespace, ci.Name, short(ci.Digest), ci.Generation, ci.Digest, ci.Dir)
		}
		if ci.Reason != "" {
			_, _ = fmt.Fprintf(w, "\n%s\n", ci.Reason)
		}
		return
	}
	_, _ = fmt.Fprintf(w, "scribe: publish %d objects\n\n", len(info.Changes))
	for _, ci := range info.Changes {
		if ci.Action == "delete" {
			_, _ = fmt.Fprintf(w, "- delete %s\n", ci.Object)
		} else {
			_, _ = fmt.Fprintf(w, "- update %s to %s (generation %d)\n", ci.Object, short(ci.Digest), ci.Generation)
		}
		if ci.Reason != "" {
			_, _ = fmt.Fprintf(w, "  %s\n", ci.Reason)
		}
	}
}

// Trailers returns the Scribe trailer blocks of a commit message: one map
// per change, keyed by trailer name.
func Trailers(message string) []map[string]string {
	var out []map[string]string
	var cur map[string]string
	for _, line := range strings.Split(message, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok || (k != TrailerObject && k != TrailerGeneration && k != TrailerDigest) {
			continue
		}
		if k == TrailerObject {
			cur = map[string]string{}
			out = append(out, cur)
		}
		if cur != nil {
			cur[k] = v
		}
	}
	return out
}

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
func (g *Git) Descends(ctx context.Context, opts GitOptions, src scribev1.ObjectIdentity, ours, applied string) (bool, error) {
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

func descends(ctx context.Context, st *gitStore, opts GitOptions, src scribev1.ObjectIdentity, a, b plumbing.Hash) (bool, error) {
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
	dir := path.Join(opts.Path, OwnedDir(src))
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
