package gitsink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// The Git sink's writer: one per (URL, branch), it serializes and batches
// the changes to the branch into commits, paced by Git.CommitInterval,
// and retries a batch whose push lost a race.

// batchTimeout bounds one batch: every fetch, commit and push try.
const batchTimeout = 5 * time.Minute

// DefaultCommitInterval is Git.CommitInterval unless changed: a burst of
// changes becomes about one commit a second.
const DefaultCommitInterval = time.Second

type gitSink struct {
	w    *gitWriter
	opts Options
	tmpl *commitTemplate
}

// groupKey says which requests may share a commit.
func (s *gitSink) groupKey() string {
	return s.opts.Identity + "\x00" + s.opts.Author.Name + "\x00" + s.opts.Author.Email + "\x00" + s.opts.MessageTemplate
}

func (s *gitSink) Publish(ctx context.Context, changes ...publish.Change) (publish.Result, error) {
	if len(changes) == 0 {
		return publish.Result{}, fmt.Errorf("publish to %s: no changes", redactURL(s.opts.URL))
	}
	for _, c := range changes {
		if err := c.Validate(); err != nil {
			return publish.Result{}, &publish.Error{Reason: publish.ReasonInvalid, Op: "publish to", URL: redactURL(s.opts.URL), Err: err}
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
	changes []publish.Change
	done    chan struct{}
	res     publish.Result
	err     error
}

func (w *gitWriter) enqueue(ctx context.Context, s *gitSink, changes []publish.Change) (publish.Result, error) {
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
		return publish.Result{}, fmt.Errorf("publish to %s: %w", redactURL(s.opts.URL), ctx.Err())
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
	// context; a caller that gives up stops waiting, not the others'
	// commit. Once every caller has given up, the batch stops too (its
	// next try, or its push in flight): a process that is stopping, its
	// leadership lost, pushes nothing more, so a retry of its batch cannot
	// land after what the next leader commits (a custom resource's removal
	// above all).
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	defer cancelWhenAbandoned(batch, cancel)()

	type item struct {
		change publish.Change
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
			key := r.sink.opts.Path + "\x00" + publish.ObjectRef(c.Source)
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
			r.res, r.err = publish.Result{}, res.rejected[find(i)]
		} else if err == nil {
			r.res.Changed = false
			for _, c := range r.changes {
				key := r.sink.opts.Path + "\x00" + publish.ObjectRef(c.Source)
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

// cancelWhenAbandoned calls cancel once the context of every request of
// batch is done; the returned function stops watching them.
func cancelWhenAbandoned(batch []*request, cancel context.CancelFunc) (stop func()) {
	var left atomic.Int64
	left.Store(int64(len(batch)))
	stops := make([]func() bool, 0, len(batch))
	for _, r := range batch {
		stops = append(stops, context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// pathChange is a change with the repository path it is written under.
type pathChange struct {
	publish.Change
	RepoPath string
	// unit groups the changes that land or fail together (see commitBatch).
	unit int
}

func (pc pathChange) dir() string { return path.Join(pc.RepoPath, publish.OwnedDir(pc.Source)) }

type batchResult struct {
	publish.Result
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
// when another writer moved the branch first, at most s.opts.MaxAttempts
// times, waiting retryDelay between tries.
func (w *gitWriter) commitWithRetry(ctx context.Context, st *gitStore, s *gitSink, edits []pathChange) (batchResult, error) {
	var res batchResult
	attempts := 0
	err := retryDelay(s.opts.Backoff).Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		attempts++
		var err error
		if res, err = commitAndPush(ctx, st, s, s.opts.Branch, edits); err == nil {
			if res.Changed {
				w.git.stats.commits.Add(1)
			}
			return true, nil
		}
		if publish.ReasonOf(err) != publish.ReasonConflict {
			return false, err
		}
		w.git.stats.conflicts.Add(1)
		if w.git.OnConflict != nil {
			w.git.OnConflict()
		}
		if attempts >= s.opts.MaxAttempts {
			return false, &publish.Error{Reason: publish.ReasonConflict, Op: "publish to", URL: redactURL(s.opts.URL),
				Err: fmt.Errorf("branch %s: gave up after %d attempts, other writers kept moving the branch: %w", s.opts.Branch, s.opts.MaxAttempts, errors.Unwrap(err))}
		}
		return false, nil
	})
	if err != nil {
		return batchResult{}, err
	}
	return res, nil
}

// retryDelay is the wait before each try of a commit after the first: a
// full-jitter exponential backoff, a random duration in
// [0, min(base·2^try, base·2^10, 2s)) and a millisecond. Writers that
// collided spread out at once rather than colliding again in step.
func retryDelay(base time.Duration) wait.DelayFunc {
	limit := retryLimits(base)
	return func() time.Duration {
		return rand.N(limit()) + time.Millisecond //nolint:gosec // jitter, not security
	}
}

// retryLimits is the upper end of retryDelay's range before each try
// after the first: base·2^try, doubling nine times at most, capped.
func retryLimits(base time.Duration) wait.DelayFunc {
	return wait.Backoff{Duration: min(2*base, maxRetryDelay), Factor: 2, Steps: 9, Cap: maxRetryDelay}.DelayFunc()
}

// maxRetryDelay bounds retryDelay's range.
const maxRetryDelay = 2 * time.Second
