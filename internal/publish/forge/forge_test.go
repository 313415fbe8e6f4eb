package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish/forge/forgetest"
)

// fakeForge is what the three fakes in forgetest have in common.
type fakeForge interface {
	URL() string
	RepoURL() string
	Token() string
	Repo() string
	Merge(number int, mergeCommitSHA string)
	Close(number int)
	SetHeadSHA(branch, sha string)
	PullRequests() []forgetest.PullRequest
	Requests() []forgetest.Request
	ResetRequests()
}

type providerCase struct {
	provider string
	start    func(tb testing.TB, opts ...forgetest.Option) fakeForge
}

func providers() []providerCase {
	return []providerCase{
		{ProviderGitHub, func(tb testing.TB, opts ...forgetest.Option) fakeForge { return forgetest.NewGitHub(tb, opts...) }},
		{ProviderGitLab, func(tb testing.TB, opts ...forgetest.Option) fakeForge { return forgetest.NewGitLab(tb, opts...) }},
		{ProviderGitea, func(tb testing.TB, opts ...forgetest.Option) fakeForge { return forgetest.NewGitea(tb, opts...) }},
	}
}

const (
	head = "scribe/ns/workload/web"
	base = "main"
)

// newClient makes a Client for f that derives the API URL from the clone
// URL, as production does.
func newClient(t *testing.T, provider string, f fakeForge) Client {
	t.Helper()
	c, err := New(Options{Provider: provider, RepoURL: f.RepoURL(), Token: f.Token()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// writes counts the requests that change something.
func writes(reqs []forgetest.Request) int {
	n := 0
	for _, r := range reqs {
		if r.Method != http.MethodGet {
			n++
		}
	}
	return n
}

func TestEnsureCreatesOnePullRequestThenUpdatesTheSameOne(t *testing.T) {
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c := newClient(t, pc.provider, f)
			ctx := t.Context()

			first, err := c.Ensure(ctx, Request{Head: head, Base: base, Title: "web: generation 1", Body: "first"})
			if err != nil {
				t.Fatalf("first Ensure: %v", err)
			}
			if first.Number != 1 || first.State != StateOpen || first.HeadBranch != head || first.BaseBranch != base ||
				first.Title != "web: generation 1" || first.Body != "first" || first.MergeCommit != "" {
				t.Fatalf("first Ensure = %+v", first)
			}
			if !strings.HasPrefix(first.URL, f.URL()+"/"+f.Repo()+"/") {
				t.Errorf("URL = %q, want the web page under %s/%s", first.URL, f.URL(), f.Repo())
			}

			second, err := c.Ensure(ctx, Request{Head: head, Base: base, Title: "web: generation 2", Body: "second"})
			if err != nil {
				t.Fatalf("second Ensure: %v", err)
			}
			if second.Number != first.Number || second.Title != "web: generation 2" || second.Body != "second" || second.State != StateOpen {
				t.Fatalf("second Ensure = %+v, want #%d with the new title and body", second, first.Number)
			}
			prs := f.PullRequests()
			if len(prs) != 1 || prs[0].Title != "web: generation 2" || prs[0].Body != "second" {
				t.Fatalf("forge holds %+v, want one pull request with the new title and body", prs)
			}

			// The same request again writes nothing.
			before := writes(f.Requests())
			again, err := c.Ensure(ctx, Request{Head: head, Base: base, Title: "web: generation 2", Body: "second"})
			if err != nil {
				t.Fatalf("third Ensure: %v", err)
			}
			if again.Number != first.Number {
				t.Fatalf("third Ensure = #%d, want #%d", again.Number, first.Number)
			}
			if n := writes(f.Requests()) - before; n != 0 {
				t.Errorf("unchanged Ensure sent %d writes, want 0", n)
			}
		})
	}
}

func TestEnsureRetargetsTheOpenPullRequestInsteadOfOpeningASecond(t *testing.T) {
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c := newClient(t, pc.provider, f)
			if _, err := c.Ensure(t.Context(), Request{Head: head, Base: "main", Title: "t"}); err != nil {
				t.Fatal(err)
			}
			got, err := c.Ensure(t.Context(), Request{Head: head, Base: "release", Title: "t"})
			if err != nil {
				t.Fatal(err)
			}
			if got.Number != 1 || got.BaseBranch != "release" {
				t.Fatalf("Ensure = %+v, want #1 into release", got)
			}
			if prs := f.PullRequests(); len(prs) != 1 || prs[0].Base != "release" {
				t.Fatalf("forge holds %+v, want one pull request into release", prs)
			}
		})
	}
}

// raceTransport opens the same pull request just before the client's own
// create request arrives, as a concurrent writer would.
type raceTransport struct{ done bool }

func (rt *raceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && !rt.done {
		rt.done = true
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		other := req.Clone(req.Context())
		other.Body = io.NopCloser(bytes.NewReader(body))
		resp, err := http.DefaultTransport.RoundTrip(other)
		if err != nil {
			return nil, err
		}
		_ = resp.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	return http.DefaultTransport.RoundTrip(req)
}

func TestEnsureAdoptsAPullRequestOpenedConcurrently(t *testing.T) {
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c, err := New(Options{Provider: pc.provider, RepoURL: f.RepoURL(), Token: f.Token(), HTTPClient: &http.Client{Transport: &raceTransport{}}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t", Body: "b"})
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if got.Number != 1 || len(f.PullRequests()) != 1 {
				t.Fatalf("Ensure = %+v with %d pull requests, want #1 alone", got, len(f.PullRequests()))
			}
		})
	}
}

// sameBranchTransport rewrites a create request so that it merges the head
// into itself, which every forge rejects as invalid.
type sameBranchTransport struct{}

func (sameBranchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost {
		var m map[string]any
		if err := json.NewDecoder(req.Body).Decode(&m); err != nil {
			return nil, err
		}
		for _, k := range []string{"base", "target_branch"} {
			if _, ok := m[k]; ok {
				m[k] = head
			}
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	}
	return http.DefaultTransport.RoundTrip(req)
}

func TestRejectedCreateIsAValidationError(t *testing.T) {
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c, err := New(Options{Provider: pc.provider, RepoURL: f.RepoURL(), Token: f.Token(), HTTPClient: &http.Client{Transport: sameBranchTransport{}}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t"})
			var fe *Error
			if !errors.Is(err, ErrValidation) || !errors.As(err, &fe) || fe.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("Ensure error %v, want a 422 validation error", err)
			}
			if errors.Is(err, ErrAuth) || errors.Is(err, ErrNotFound) {
				t.Errorf("validation error %v has another kind too", err)
			}
			if !strings.HasPrefix(err.Error(), pc.provider+": open ") || fe.Message == "" {
				t.Errorf("error %q: want the operation and the forge's message", err)
			}
		})
	}
}

func TestGetReportsOpenThenMergedWithMergeCommit(t *testing.T) {
	const headSHA = "1111111111111111111111111111111111111111"
	const mergeSHA = "2222222222222222222222222222222222222222"
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c := newClient(t, pc.provider, f)
			f.SetHeadSHA(head, headSHA)
			pr, err := c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Get(t.Context(), pr.Number)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.State != StateOpen || got.HeadSHA != headSHA || got.MergeCommit != "" {
				t.Fatalf("Get before merge = %+v, want open at %s with no merge commit", got, headSHA)
			}

			f.SetHeadSHA(head, "3333333333333333333333333333333333333333")
			if got, err = c.Get(t.Context(), pr.Number); err != nil || got.HeadSHA != "3333333333333333333333333333333333333333" {
				t.Fatalf("Get after push = %+v, %v; want the new head SHA", got, err)
			}

			f.Merge(pr.Number, mergeSHA)
			got, err = c.Get(t.Context(), pr.Number)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.State != StateMerged || got.MergeCommit != mergeSHA || got.Number != pr.Number {
				t.Fatalf("Get after merge = %+v, want merged with merge commit %s", got, mergeSHA)
			}
		})
	}
}

func TestGetReportsClosed(t *testing.T) {
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c := newClient(t, pc.provider, f)
			pr, err := c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t"})
			if err != nil {
				t.Fatal(err)
			}
			f.Close(pr.Number)
			got, err := c.Get(t.Context(), pr.Number)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.State != StateClosed || got.MergeCommit != "" {
				t.Fatalf("Get after close = %+v, want closed without merge commit", got)
			}
		})
	}
}

func TestLatestIsNilWithoutPullRequestsAndFindsMergedAndClosedOnes(t *testing.T) {
	const mergeSHA = "4444444444444444444444444444444444444444"
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c := newClient(t, pc.provider, f)
			ctx := t.Context()

			if got, err := c.Latest(ctx, head, base); err != nil || got != nil {
				t.Fatalf("Latest on an empty repository = %+v, %v; want nil, nil", got, err)
			}
			// A pull request from another head is not the one asked for.
			if _, err := c.Ensure(ctx, Request{Head: "scribe/ns/workload/api", Base: base, Title: "api"}); err != nil {
				t.Fatal(err)
			}
			if got, err := c.Latest(ctx, head, base); err != nil || got != nil {
				t.Fatalf("Latest with only another head's pull request = %+v, %v; want nil, nil", got, err)
			}

			first, err := c.Ensure(ctx, Request{Head: head, Base: base, Title: "web 1"})
			if err != nil {
				t.Fatal(err)
			}
			f.Merge(first.Number, mergeSHA)
			got, err := c.Latest(ctx, head, base)
			if err != nil {
				t.Fatalf("Latest: %v", err)
			}
			if got == nil || got.Number != first.Number || got.State != StateMerged || got.MergeCommit != mergeSHA {
				t.Fatalf("Latest after merge = %+v, want #%d merged at %s", got, first.Number, mergeSHA)
			}

			// After the merge, Ensure opens a new pull request, which is then the latest.
			second, err := c.Ensure(ctx, Request{Head: head, Base: base, Title: "web 2"})
			if err != nil {
				t.Fatal(err)
			}
			if second.Number == first.Number {
				t.Fatalf("Ensure after merge reused merged #%d", first.Number)
			}
			f.Close(second.Number)
			got, err = c.Latest(ctx, head, base)
			if err != nil {
				t.Fatalf("Latest: %v", err)
			}
			if got == nil || got.Number != second.Number || got.State != StateClosed {
				t.Fatalf("Latest after close = %+v, want #%d closed", got, second.Number)
			}
			if got, err := c.Latest(ctx, head, "release"); err != nil || got != nil {
				t.Fatalf("Latest into another base = %+v, %v; want nil, nil", got, err)
			}
		})
	}
}

func TestBadTokenIsAnAuthenticationErrorNamingProviderAndRepository(t *testing.T) {
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c, err := New(Options{Provider: pc.provider, RepoURL: f.RepoURL(), Token: "not-the-token"})
			if err != nil {
				t.Fatal(err)
			}
			_, ensureErr := c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t"})
			_, getErr := c.Get(t.Context(), 1)
			_, latestErr := c.Latest(t.Context(), head, base)
			for name, err := range map[string]error{"Ensure": ensureErr, "Get": getErr, "Latest": latestErr} {
				if !errors.Is(err, ErrAuth) {
					t.Errorf("%s error %v is not ErrAuth", name, err)
					continue
				}
				var fe *Error
				if !errors.As(err, &fe) || fe.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s error %v: want an *Error with status 401", name, err)
				}
				msg := err.Error()
				if strings.ContainsAny(msg, "{}") {
					t.Errorf("%s error %q shows raw JSON", name, msg)
				}
				for _, want := range []string{pc.provider + ": ", f.Repo(), "401", "authentication"} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s error %q does not mention %q", name, msg, want)
					}
				}
			}
		})
	}
}

func TestGitHubErrorMessageNamesOperationBranchesAndRepository(t *testing.T) {
	f := forgetest.NewGitHub(t)
	c, err := New(Options{Provider: "github", RepoURL: f.RepoURL(), Token: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t"})
	const want = "github: list open pull requests from scribe/ns/workload/web in acme/exp: 401 Bad credentials (authentication failed: the token is invalid or expired)"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant    %s", err, want)
	}
}

func TestUnknownRepositoryOrPullRequestIsNotFound(t *testing.T) {
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c, err := New(Options{Provider: pc.provider, RepoURL: f.URL() + "/acme/nope.git", Token: f.Token()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t"})
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "acme/nope") || !strings.Contains(err.Error(), "404") {
				t.Errorf("Ensure in unknown repository: %v, want not found naming acme/nope", err)
			}
			if _, err := c.Latest(t.Context(), head, base); !errors.Is(err, ErrNotFound) {
				t.Errorf("Latest in unknown repository: %v, want not found", err)
			}

			c = newClient(t, pc.provider, f)
			_, err = c.Get(t.Context(), 99)
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "#99") && !strings.Contains(err.Error(), "!99") {
				t.Errorf("Get of unknown pull request: %v, want not found naming 99", err)
			}
			if errors.Is(err, ErrAuth) {
				t.Errorf("not found error %v is also ErrAuth", err)
			}
		})
	}
}

func TestInvalidRequestsFailBeforeAnyRequestIsSent(t *testing.T) {
	cases := map[string]Request{
		"no head":      {Base: base, Title: "t"},
		"no base":      {Head: head, Title: "t"},
		"no title":     {Head: head, Base: base},
		"head is base": {Head: base, Base: base, Title: "t"},
	}
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c := newClient(t, pc.provider, f)
			for name, r := range cases {
				if _, err := c.Ensure(t.Context(), r); !errors.Is(err, ErrValidation) || !strings.HasPrefix(err.Error(), pc.provider+": ") {
					t.Errorf("%s: Ensure error %v, want a validation error naming %s", name, err, pc.provider)
				}
			}
			if _, err := c.Get(t.Context(), 0); !errors.Is(err, ErrValidation) {
				t.Errorf("Get(0) error %v, want a validation error", err)
			}
			if _, err := c.Latest(t.Context(), "", base); !errors.Is(err, ErrValidation) {
				t.Errorf("Latest without head: error %v, want a validation error", err)
			}
			if reqs := f.Requests(); len(reqs) != 0 {
				t.Errorf("invalid requests reached the forge: %+v", reqs)
			}
		})
	}
}

func TestCancelledContextIsReported(t *testing.T) {
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c := newClient(t, pc.provider, f)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, err := c.Get(ctx, 1)
			if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), pc.provider+": get ") {
				t.Errorf("Get with cancelled context: %v, want context.Canceled wrapped with the operation", err)
			}
		})
	}
}

func TestTokenIsTrimmedOfTheSecretsTrailingNewline(t *testing.T) {
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c, err := New(Options{Provider: pc.provider, RepoURL: f.RepoURL(), Token: f.Token() + "\n"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Latest(t.Context(), head, base); err != nil {
				t.Fatalf("Latest: %v", err)
			}
		})
	}
}

func TestGitHubWireFormat(t *testing.T) {
	f := forgetest.NewGitHub(t)
	c := newClient(t, ProviderGitHub, f)
	ctx := t.Context()
	if _, err := c.Ensure(ctx, Request{Head: head, Base: base, Title: "web: apply", Body: "rendered by scribe"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ensure(ctx, Request{Head: head, Base: base, Title: "web: apply 2", Body: "again"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Latest(ctx, head, base); err != nil {
		t.Fatal(err)
	}
	reqs := f.Requests()
	type want struct {
		method, path string
		query        map[string]string
		body         map[string]any
		absent       []string
	}
	// A RepoURL on a host other than github.com is GitHub Enterprise: /api/v3.
	wants := []want{
		{method: "GET", path: "/api/v3/repos/acme/exp/pulls", query: map[string]string{"state": "open", "head": "acme:" + head}},
		{method: "POST", path: "/api/v3/repos/acme/exp/pulls", body: map[string]any{"title": "web: apply", "head": head, "base": base, "body": "rendered by scribe"}},
		{method: "GET", path: "/api/v3/repos/acme/exp/pulls", query: map[string]string{"state": "open", "head": "acme:" + head}},
		{method: "PATCH", path: "/api/v3/repos/acme/exp/pulls/1", body: map[string]any{"title": "web: apply 2", "body": "again"}, absent: []string{"base", "state"}},
		{method: "GET", path: "/api/v3/repos/acme/exp/pulls", query: map[string]string{"state": "all", "head": "acme:" + head, "base": base, "sort": "created", "direction": "desc"}},
	}
	if len(reqs) != len(wants) {
		for _, r := range reqs {
			t.Logf("%s %s?%s %s", r.Method, r.Path, r.Query.Encode(), r.Body)
		}
		t.Fatalf("got %d requests, want %d", len(reqs), len(wants))
	}
	for i, w := range wants {
		r := reqs[i]
		if r.Method != w.method || r.Path != w.path {
			t.Errorf("request %d = %s %s, want %s %s", i, r.Method, r.Path, w.method, w.path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+f.Token() {
			t.Errorf("request %d Authorization = %q", i, got)
		}
		for k, v := range w.query {
			if got := r.Query.Get(k); got != v {
				t.Errorf("request %d query %s = %q, want %q", i, k, got, v)
			}
		}
		if w.body == nil {
			continue
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("request %d Content-Type = %q, want JSON", i, ct)
		}
		m := r.JSON()
		for k, v := range w.body {
			if m[k] != v {
				t.Errorf("request %d body %s = %#v, want %#v", i, k, m[k], v)
			}
		}
		for _, k := range w.absent {
			if _, ok := m[k]; ok {
				t.Errorf("request %d body has %s: %s", i, k, r.Body)
			}
		}
	}
}

func TestGitHubAPIURLOverrideAndRetargetWireFormat(t *testing.T) {
	f := forgetest.NewGitHub(t, forgetest.WithRepo("Acme/Exp"))
	c, err := New(Options{Provider: "GitHub", RepoURL: "git@github.com:Acme/Exp.git", APIURL: f.APIURL(), Token: f.Token(), HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ensure(t.Context(), Request{Head: head, Base: "main", Title: "t"}); err != nil {
		t.Fatal(err)
	}
	f.ResetRequests()
	if _, err := c.Ensure(t.Context(), Request{Head: head, Base: "release", Title: "t"}); err != nil {
		t.Fatal(err)
	}
	reqs := f.Requests()
	last := reqs[len(reqs)-1]
	if last.Method != http.MethodPatch || last.Path != "/repos/Acme/Exp/pulls/1" {
		t.Fatalf("last request = %s %s, want PATCH /repos/Acme/Exp/pulls/1", last.Method, last.Path)
	}
	if m := last.JSON(); m["base"] != "release" {
		t.Errorf("PATCH body %s, want base release", last.Body)
	}
}

func TestGitLabAddressesSubgroupProjectsByEncodedPath(t *testing.T) {
	f := forgetest.NewGitLab(t, forgetest.WithRepo("acme/platform/exp.v2"))
	c := newClient(t, ProviderGitLab, f)
	pr, err := c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t", Body: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(pr.URL, "/acme/platform/exp.v2/-/merge_requests/1") {
		t.Errorf("URL = %q", pr.URL)
	}
	reqs := f.Requests()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want list and create", len(reqs))
	}
	for _, r := range reqs {
		if r.Path != "/api/v4/projects/acme%2Fplatform%2Fexp%2Ev2/merge_requests" {
			t.Errorf("%s %s: want the URL-encoded project path", r.Method, r.Path)
		}
		if r.Header.Get("Private-Token") != f.Token() {
			t.Errorf("%s %s: PRIVATE-TOKEN = %q", r.Method, r.Path, r.Header.Get("Private-Token"))
		}
	}
	if q := reqs[0].Query; q.Get("state") != "opened" || q.Get("source_branch") != head {
		t.Errorf("list query = %v, want state=opened source_branch=%s", q, head)
	}
	m := reqs[1].JSON()
	if m["source_branch"] != head || m["target_branch"] != base || m["title"] != "t" || m["description"] != "b" {
		t.Errorf("create body = %s", reqs[1].Body)
	}
}

func TestGitLabMergeCommitOfSquashAndFastForwardMerges(t *testing.T) {
	f := forgetest.NewGitLab(t)
	c := newClient(t, ProviderGitLab, f)
	const squash = "5555555555555555555555555555555555555555"
	const ffHead = "6666666666666666666666666666666666666666"

	pr, err := c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	f.MergeSquashed(pr.Number, squash)
	if got, err := c.Get(t.Context(), pr.Number); err != nil || got.State != StateMerged || got.MergeCommit != squash {
		t.Fatalf("squash-merged Get = %+v, %v; want merge commit %s", got, err, squash)
	}

	f.SetHeadSHA(head, ffHead)
	pr, err = c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	f.MergeFastForward(pr.Number)
	if got, err := c.Latest(t.Context(), head, base); err != nil || got == nil || got.State != StateMerged || got.MergeCommit != ffHead {
		t.Fatalf("fast-forward-merged Latest = %+v, %v; want merge commit %s", got, err, ffHead)
	}
}

func TestGiteaNeverProbesTheServerVersion(t *testing.T) {
	f := forgetest.NewGitea(t)
	c := newClient(t, ProviderGitea, f)
	pr, err := c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(t.Context(), pr.Number); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Requests() {
		if strings.HasSuffix(r.Path, "/version") {
			t.Errorf("client probed %s", r.Path)
		}
		if got := r.Header.Get("Authorization"); got != "token "+f.Token() {
			t.Errorf("%s %s: Authorization = %q", r.Method, r.Path, got)
		}
	}
}

func TestGiteaFindsPullRequestsBeyondTheFirstPage(t *testing.T) {
	f := forgetest.NewGitea(t)
	c := newClient(t, ProviderGitea, f)
	ours, err := c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "ours"})
	if err != nil {
		t.Fatal(err)
	}
	// 60 newer pull requests push ours onto the second page.
	for i := range 60 {
		if _, err := c.Ensure(t.Context(), Request{Head: "other/" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Base: base, Title: "other"}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "ours 2"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Number != ours.Number {
		t.Fatalf("Ensure opened #%d, want to update #%d on the second page", got.Number, ours.Number)
	}
	if latest, err := c.Latest(t.Context(), head, base); err != nil || latest == nil || latest.Number != ours.Number {
		t.Fatalf("Latest = %+v, %v; want #%d", latest, err, ours.Number)
	}
}

func TestGiteaFindsAMergedPullRequestWhoseBranchWasDeleted(t *testing.T) {
	f := forgetest.NewGitea(t)
	c := newClient(t, ProviderGitea, f)
	pr, err := c.Ensure(t.Context(), Request{Head: head, Base: base, Title: "step 1"})
	if err != nil {
		t.Fatal(err)
	}
	f.Merge(pr.Number, "abc123")
	f.DeleteBranch(head)
	latest, err := c.Latest(t.Context(), head, base)
	if err != nil || latest == nil || latest.Number != pr.Number || latest.State != StateMerged || latest.HeadBranch != head {
		t.Fatalf("Latest = %+v, %v; want #%d merged from %s", latest, err, pr.Number, head)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	cases := map[string]struct {
		opts Options
		want string
	}{
		"no provider":      {Options{RepoURL: "https://github.com/acme/exp", Token: "t"}, "no provider"},
		"unknown provider": {Options{Provider: "bitbucket", RepoURL: "https://bitbucket.org/acme/exp", Token: "t"}, `unsupported provider "bitbucket"`},
		"no token":         {Options{Provider: "github", RepoURL: "https://github.com/acme/exp", Token: " \n"}, "github: no API token for acme/exp"},
		"bad repo URL":     {Options{Provider: "gitea", RepoURL: "https://gitea.example.com/acme", Token: "t"}, "gitea: repository URL path"},
		"bad API URL":      {Options{Provider: "gitlab", RepoURL: "https://gitlab.example.com/acme/exp", APIURL: "gitlab.example.com/api/v4", Token: "t"}, "want an absolute http(s) URL"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// A client that authenticates itself needs no token.
	if _, err := New(Options{Provider: "github", RepoURL: "https://github.com/acme/exp", HTTPClient: &http.Client{}}); err != nil {
		t.Errorf("New with an authenticating HTTP client: %v", err)
	}
}
