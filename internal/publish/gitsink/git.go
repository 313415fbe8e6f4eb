// Package gitsink publishes rendered bundles to a branch of a Git
// repository, or proposes them in a pull request (with package forge). It
// keeps one cached bare repository per remote and one writer per branch,
// batches concurrent changes into few commits, grafts each change's owned
// subtree onto the branch's tip, and pushes with retry. It implements
// publish.Sink; the contract and the error reasons are package publish's.
package gitsink

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/scribe-gitops/scribe/internal/credurl"
	"github.com/scribe-gitops/scribe/internal/publish"
)

// Options configure publishing to one branch of one Git repository.
type Options struct {
	// URL is the clone URL: https://, http:// or ssh://, or the scp form.
	URL string
	// Branch receives the commits.
	Branch string
	// Path is the directory inside the repository under which Scribe owns
	// <namespace>/<kind>/<name>/ and <namespace>/<kind>/<name>.sync.yaml.
	Path string
	// Auth for fetch and push; nil for anonymous. See AuthFromSecret.
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
	// object's .sync.yaml (see publish.SyncIndexFile): the one file a root applier
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
	// whatever is queued as soon as the previous commit is pushed. New
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

type gitStats struct {
	commits, conflicts, fetches atomic.Int64
}

// Stats counts what a Git publisher did since it was made.
type Stats struct {
	// Commits pushed.
	Commits int64
	// Conflicts: pushes refused because another writer moved the branch
	// first, each followed by a retry on the new tip.
	Conflicts int64
	// Fetches from remotes (a publish on an unchanged tip fetches nothing).
	Fetches int64
}

// Stats returns the counters.
func (g *Git) Stats() Stats {
	return Stats{Commits: g.stats.commits.Load(), Conflicts: g.stats.conflicts.Load(), Fetches: g.stats.fetches.Load()}
}

// New makes a Git publisher that caches repositories under cacheDir.
func New(cacheDir string) *Git {
	return &Git{CommitInterval: DefaultCommitInterval, cacheDir: cacheDir, stores: map[string]*lockedStore{}, writers: map[string]*gitWriter{}}
}

// Sink returns the writer for opts.URL and opts.Branch. Writers are shared:
// every sink for the same URL and branch commits through one queue.
func (g *Git) Sink(opts Options) (publish.Sink, error) {
	if opts.URL == "" || opts.Branch == "" {
		return nil, fmt.Errorf("git sink: url and branch are required")
	}
	if err := credurl.Check(opts.URL); err != nil {
		return nil, fmt.Errorf("git sink: %w: give credentials in the Secret (or --secret-dir, SCRIBE_GIT_*), never in the URL", err)
	}
	if err := publish.CheckRepoPath(opts.Path); err != nil {
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
func (g *Git) CheckAccess(ctx context.Context, opts Options) (string, error) {
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
