package gitsink

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"

	"github.com/scribe-gitops/scribe/internal/credurl"
	"github.com/scribe-gitops/scribe/internal/publish"
)

// The cached repository of one remote, held by one caller at a time: a
// semaphore within the process, a file lock across processes, and a
// token in the lock file that says whether someone else used the cache
// since (git.go's Git.store hands it out).

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
// damaged packs) becomes a *publish.Error with ReasonInternal; after it, or after
// an error with ReasonCacheCorrupt, the cache is dropped and fn runs once
// more on a fresh one. auth is set on the store for fn.
func (ls *lockedStore) do(ctx context.Context, auth transport.AuthMethod, fn func(ctx context.Context, st *gitStore) error) error {
	ctx, st, unlock, err := ls.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	err = runStore(ctx, st, auth, fn)
	if r := publish.ReasonOf(err); r != publish.ReasonCacheCorrupt && r != publish.ReasonInternal {
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
			err = &publish.Error{Reason: publish.ReasonInternal, Op: "use the git cache of", URL: st.display,
				Err: fmt.Errorf("panic: %v", r), Hint: "the cache was dropped; report this if it persists"}
		}
	}()
	st.auth = auth
	return fn(ctx, st)
}

// store returns the cached repository of url; it is opened (and checked)
// under its lock, on first use.
func (g *Git) store(url string) (*lockedStore, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ls, ok := g.stores[url]
	if !ok {
		if err := credurl.Check(url); err != nil {
			return nil, &publish.Error{Reason: publish.ReasonInvalid, Op: "open", URL: redactURL(url), Err: fmt.Errorf("%w: give credentials in the Secret (or --secret-dir, SCRIBE_GIT_*), never in the URL", err)}
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
