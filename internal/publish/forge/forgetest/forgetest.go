// Package forgetest runs fake forges for tests: httptest servers on
// 127.0.0.1 that speak enough of GitHub's, GitLab's and Gitea's REST wire
// formats for opening, updating and reading pull requests, with methods to
// play the forge's side (merge, close, move a head branch) and a record of
// every request for asserting the wire format.
//
// Each fake serves one repository (DefaultRepo unless WithRepo says
// otherwise) and accepts one token (DefaultToken unless WithToken says
// otherwise). Answers carry deterministic times and SHAs.
package forgetest

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults of every fake.
const (
	DefaultRepo  = "acme/exp"
	DefaultToken = "forgetest-token"
)

// Option configures a fake.
type Option func(*config)

type config struct {
	repo, token string
}

// WithRepo sets the repository the fake serves: owner/repo, or for GitLab a
// project path that may contain subgroups.
func WithRepo(path string) Option { return func(c *config) { c.repo = strings.Trim(path, "/") } }

// WithToken sets the only token the fake accepts.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// State is a fake pull request's state.
type State string

// States of a fake pull request.
const (
	StateOpen   State = "open"
	StateClosed State = "closed"
	StateMerged State = "merged"
)

// PullRequest is a fake's pull request (GitLab: merge request), in the
// fake's own terms.
type PullRequest struct {
	Number                int
	State                 State
	Head, Base            string
	Title, Body           string
	HeadSHA, BaseSHA      string
	MergeCommit           string
	SquashCommit          string // GitLab only
	CreatedAt, UpdatedAt  time.Time
	ClosedAt, MergedAt    time.Time // zero unless closed / merged
	FastForward, Squashed bool      // GitLab only: how it was merged
}

// Request is one request a fake received.
type Request struct {
	Method string
	// Path is the escaped path as sent, for example
	// /api/v4/projects/acme%2Fexp/merge_requests.
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
}

// JSON decodes the request body into a map, or returns nil if the body is
// not a JSON object.
func (r Request) JSON() map[string]any {
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return nil
	}
	return m
}

// fake is what the three fakes share: the server, the pull requests and
// the record of requests.
type fake struct {
	tb    testing.TB
	srv   *httptest.Server
	repo  string
	token string
	mu    sync.Mutex
	prs   []*PullRequest // Number is index+1
	shas  map[string]string
	gone  map[string]bool // branches deleted (DeleteBranch)
	reqs  []Request
	clock time.Time
	serve func(w http.ResponseWriter, r *http.Request, body []byte)
}

// newFake makes a fake that answers with serve; start it with start.
func newFake(tb testing.TB, opts []Option) *fake {
	tb.Helper()
	cfg := config{repo: DefaultRepo, token: DefaultToken}
	for _, o := range opts {
		o(&cfg)
	}
	f := &fake{
		tb:    tb,
		repo:  cfg.repo,
		token: cfg.token,
		shas:  map[string]string{},
		clock: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	return f
}

// start starts the server; f.serve is set.
func (f *fake) start() {
	f.srv = httptest.NewServer(http.HandlerFunc(f.handle))
	f.tb.Cleanup(f.srv.Close)
}

func (f *fake) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, Request{
		Method: r.Method,
		Path:   r.URL.EscapedPath(),
		Query:  r.URL.Query(),
		Header: r.Header.Clone(),
		Body:   body,
	})
	f.mu.Unlock()
	f.serve(w, r, body)
}

// URL is the server's root, http://127.0.0.1:port.
func (f *fake) URL() string { return f.srv.URL }

// Token is the only token the fake accepts.
func (f *fake) Token() string { return f.token }

// Repo is the repository the fake serves.
func (f *fake) Repo() string { return f.repo }

// RepoURL is a clone URL of the repository on the fake's host,
// http://127.0.0.1:port/<repo>.git; the forge package derives the fake's
// API URL from it.
func (f *fake) RepoURL() string { return f.srv.URL + "/" + f.repo + ".git" }

// Client is an HTTP client for the fake's server.
func (f *fake) Client() *http.Client { return f.srv.Client() }

// Requests returns a copy of the requests received so far.
func (f *fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

// ResetRequests forgets the requests received so far.
func (f *fake) ResetRequests() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = nil
}

// PullRequests returns a copy of the fake's pull requests, oldest first.
func (f *fake) PullRequests() []PullRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]PullRequest, len(f.prs))
	for i, p := range f.prs {
		out[i] = *p
	}
	return out
}

// SetHeadSHA records that branch now points at sha, as a push to the real
// git server would, and moves the head of every open pull request from it.
func (f *fake) SetHeadSHA(branch, sha string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shas[branch] = sha
	for _, p := range f.prs {
		if p.Head == branch && p.State == StateOpen {
			p.HeadSHA = sha
			p.UpdatedAt = f.tick()
		}
	}
}

// DeleteBranch records that branch was deleted, as after a merge; Gitea
// then reports refs/pull/<n>/head as the pull request's head ref.
func (f *fake) DeleteBranch(branch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone == nil {
		f.gone = map[string]bool{}
	}
	f.gone[branch] = true
	delete(f.shas, branch)
}

// Merge merges the open pull request number with the merge commit sha.
func (f *fake) Merge(number int, mergeCommitSHA string) {
	f.tb.Helper()
	f.mutate(number, func(p *PullRequest, now time.Time) {
		p.State, p.MergeCommit, p.MergedAt, p.ClosedAt = StateMerged, mergeCommitSHA, now, now
		f.shas[p.Base] = mergeCommitSHA
	})
}

// Close closes the open pull request number without merging it.
func (f *fake) Close(number int) {
	f.tb.Helper()
	f.mutate(number, func(p *PullRequest, now time.Time) { p.State, p.ClosedAt = StateClosed, now })
}

// mutate applies fn to the open pull request number, or reports a test
// error (safe from any goroutine).
func (f *fake) mutate(number int, fn func(p *PullRequest, now time.Time)) {
	f.tb.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.get(number)
	if p == nil || p.State != StateOpen {
		f.tb.Errorf("forgetest: pull request %d is not open", number)
		return
	}
	now := f.tick()
	fn(p, now)
	p.UpdatedAt = now
}

// tick advances the fake's clock by a second; f.mu is held.
func (f *fake) tick() time.Time {
	f.clock = f.clock.Add(time.Second)
	return f.clock
}

// get returns pull request n or nil; f.mu is held.
func (f *fake) get(n int) *PullRequest {
	if n < 1 || n > len(f.prs) {
		return nil
	}
	return f.prs[n-1]
}

// openFor returns the open pull request from head, or nil; f.mu is held.
func (f *fake) openFor(head string) *PullRequest {
	for _, p := range f.prs {
		if p.Head == head && p.State == StateOpen {
			return p
		}
	}
	return nil
}

// add adds an open pull request; f.mu is held.
func (f *fake) add(head, base, title, body string) *PullRequest {
	now := f.tick()
	p := &PullRequest{
		Number: len(f.prs) + 1, State: StateOpen,
		Head: head, Base: base, Title: title, Body: body,
		HeadSHA: f.sha(head), BaseSHA: f.sha(base),
		CreatedAt: now, UpdatedAt: now,
	}
	f.prs = append(f.prs, p)
	return p
}

// sha is the commit a branch points at: as set by SetHeadSHA, else a
// made-up one; f.mu is held.
func (f *fake) sha(branch string) string {
	if s, ok := f.shas[branch]; ok {
		return s
	}
	return fakeSHA("branch", branch)
}

// fakeSHA is a deterministic 40-hex-digit SHA.
func fakeSHA(parts ...string) string {
	h := sha1.Sum([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}

// bearer returns the token of an "Authorization: <scheme> <token>" header
// for the given schemes.
func bearer(r *http.Request, schemes ...string) string {
	h := r.Header.Get("Authorization")
	for _, s := range schemes {
		if len(h) > len(s)+1 && strings.EqualFold(h[:len(s)], s) && h[len(s)] == ' ' {
			return strings.TrimSpace(h[len(s)+1:])
		}
	}
	return ""
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// segments splits an escaped path into unescaped segments, so that an
// URL-encoded GitLab project path stays one segment.
func segments(escaped string) []string {
	parts := strings.Split(strings.Trim(escaped, "/"), "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	return parts
}

// timeOrNil is t in RFC 3339, or nil when zero.
func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Format(time.RFC3339)
}

// strOrNil is s, or nil when empty.
func strOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// page slices items for page (from 1) of size per, and says whether more
// follow.
func page[T any](items []T, pg, per int) ([]T, bool) {
	start := (pg - 1) * per
	if start >= len(items) {
		return []T{}, false
	}
	end := min(start+per, len(items))
	return items[start:end], end < len(items)
}

// intParam reads a positive integer query parameter, else def, capped at
// limit when limit > 0.
func intParam(q url.Values, name string, def, limit int) int {
	n, err := strconv.Atoi(q.Get(name))
	if err != nil || n < 1 {
		n = def
	}
	if limit > 0 && n > limit {
		n = limit
	}
	return n
}

// decodeBody decodes a JSON or form body into a map of strings and
// booleans; ok is false when the body cannot be read.
func decodeBody(r *http.Request, body []byte) (map[string]any, bool) {
	m := map[string]any{}
	if len(bytes.TrimSpace(body)) == 0 {
		return m, true
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, false
		}
		for k := range v {
			m[k] = v.Get(k)
		}
		return m, true
	}
	if json.Unmarshal(body, &m) != nil {
		return nil, false
	}
	return m, true
}

// str reads a string field of a decoded body; ok is false when it is absent
// or null.
func str(m map[string]any, key string) (string, bool) {
	s, ok := m[key].(string)
	return s, ok
}

// sortNewest orders pull requests newest first, by creation.
func sortNewest(prs []*PullRequest) []*PullRequest {
	out := make([]*PullRequest, len(prs))
	for i, p := range prs {
		out[len(prs)-1-i] = p
	}
	return out
}
