package forgetest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// GitHub is a fake GitHub REST API (https://docs.github.com/en/rest/pulls/pulls):
//
//	GET   /repos/{owner}/{repo}/pulls?state=&head=&base=&sort=&direction=&per_page=&page=
//	POST  /repos/{owner}/{repo}/pulls            201; 422 when one is open for the head
//	GET   /repos/{owner}/{repo}/pulls/{number}
//	PATCH /repos/{owner}/{repo}/pulls/{number}   title, body, state, base
//
// served both at the root (as api.github.com) and under /api/v3 (as GitHub
// Enterprise). Requests need "Authorization: Bearer <token>" or
// "token <token>"; others get 401 Bad credentials. Unknown repositories and
// pull requests get 404 Not Found.
type GitHub struct {
	*fake
}

// NewGitHub starts a fake GitHub, closed when the test ends.
func NewGitHub(tb testing.TB, opts ...Option) *GitHub {
	tb.Helper()
	g := &GitHub{fake: newFake(tb, opts)}
	g.serve = g.handle
	g.start()
	return g
}

// APIURL is the REST API root as on api.github.com: the server's root with
// a trailing slash.
func (g *GitHub) APIURL() string { return g.URL() + "/" }

const ghDocs = "https://docs.github.com/rest/pulls/pulls"

func ghError(w http.ResponseWriter, status int, message string, errs ...map[string]any) {
	body := map[string]any{"message": message, "documentation_url": ghDocs, "status": strconv.Itoa(status)}
	if len(errs) > 0 {
		body["errors"] = errs
	}
	writeJSON(w, status, body)
}

func (g *GitHub) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	if tok := bearer(r, "Bearer", "token"); tok == "" || tok != g.token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
		return
	}
	segs := segments(r.URL.EscapedPath())
	prefix := ""
	if len(segs) >= 2 && segs[0] == "api" && segs[1] == "v3" {
		segs, prefix = segs[2:], "/api/v3"
	}
	if len(segs) < 4 || segs[0] != "repos" || segs[3] != "pulls" || len(segs) > 5 ||
		!strings.EqualFold(segs[1]+"/"+segs[2], g.repo) {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	api := g.URL() + prefix
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(segs) == 4 {
		switch r.Method {
		case http.MethodGet:
			g.list(w, r, api)
		case http.MethodPost:
			g.create(w, r, body, api)
		default:
			ghError(w, http.StatusNotFound, "Not Found")
		}
		return
	}
	n, err := strconv.Atoi(segs[4])
	p := g.get(n)
	if err != nil || p == nil {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, g.pull(p, api, true))
	case http.MethodPatch:
		g.edit(w, r, body, p, api)
	default:
		ghError(w, http.StatusNotFound, "Not Found")
	}
}

func (g *GitHub) owner() string { return g.repo[:strings.Index(g.repo, "/")] }

func (g *GitHub) list(w http.ResponseWriter, r *http.Request, api string) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		ghError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "field": "state", "code": "invalid"})
		return
	}
	head, base := q.Get("head"), q.Get("base")
	var match []*PullRequest
	for _, p := range g.prs {
		switch {
		case state == "open" && p.State != StateOpen, state == "closed" && p.State == StateOpen:
			continue
		case head != "" && !g.headMatches(p, head):
			continue
		case base != "" && p.Base != base:
			continue
		}
		match = append(match, p)
	}
	// sort=created (default) lists newest first unless direction=asc;
	// other sorts are treated as created.
	if q.Get("direction") != "asc" {
		match = sortNewest(match)
	}
	per := intParam(q, "per_page", 30, 100)
	pg := intParam(q, "page", 1, 0)
	items, more := page(match, pg, per)
	if more {
		next := *r.URL
		nq := next.Query()
		nq.Set("page", strconv.Itoa(pg+1))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, g.URL(), next.RequestURI()))
	}
	out := make([]map[string]any, 0, len(items))
	for _, p := range items {
		out = append(out, g.pull(p, api, false))
	}
	writeJSON(w, http.StatusOK, out)
}

// headMatches applies the head filter: "owner:branch", or a bare branch.
func (g *GitHub) headMatches(p *PullRequest, head string) bool {
	if owner, branch, ok := strings.Cut(head, ":"); ok {
		return strings.EqualFold(owner, g.owner()) && branch == p.Head
	}
	return head == p.Head
}

func (g *GitHub) create(w http.ResponseWriter, r *http.Request, body []byte, api string) {
	m, ok := decodeBody(r, body)
	if !ok {
		ghError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	title, _ := str(m, "title")
	head, _ := str(m, "head")
	base, _ := str(m, "base")
	text, _ := str(m, "body")
	if o, b, ok := strings.Cut(head, ":"); ok && strings.EqualFold(o, g.owner()) {
		head = b
	}
	for field, v := range map[string]string{"title": title, "head": head, "base": base} {
		if v == "" {
			ghError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "field": field, "code": "missing_field"})
			return
		}
	}
	if head == base {
		ghError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "code": "custom", "message": fmt.Sprintf("No commits between %s and %s", base, head)})
		return
	}
	if g.openFor(head) != nil {
		ghError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "code": "custom", "message": fmt.Sprintf("A pull request already exists for %s:%s.", g.owner(), head)})
		return
	}
	p := g.add(head, base, title, text)
	w.Header().Set("Location", fmt.Sprintf("%s/repos/%s/pulls/%d", api, g.repo, p.Number))
	writeJSON(w, http.StatusCreated, g.pull(p, api, true))
}

func (g *GitHub) edit(w http.ResponseWriter, r *http.Request, body []byte, p *PullRequest, api string) {
	m, ok := decodeBody(r, body)
	if !ok {
		ghError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	title, hasTitle := str(m, "title")
	text, hasBody := str(m, "body")
	state, hasState := str(m, "state")
	base, hasBase := str(m, "base")
	switch {
	case hasTitle && title == "":
		ghError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "field": "title", "code": "missing_field"})
		return
	case hasState && state != "open" && state != "closed":
		ghError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "field": "state", "code": "invalid"})
		return
	case p.State == StateMerged && (hasState || hasBase):
		ghError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "code": "custom", "message": "Cannot change a merged pull request"})
		return
	case hasBase && p.State != StateOpen:
		ghError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "field": "base", "code": "invalid", "message": "Cannot change base branch of closed pull request."})
		return
	case hasState && state == "open" && p.State == StateClosed && g.openFor(p.Head) != nil:
		ghError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "code": "custom", "message": fmt.Sprintf("A pull request already exists for %s:%s.", g.owner(), p.Head)})
		return
	}
	now := g.tick()
	if hasTitle {
		p.Title = title
	}
	if hasBody {
		p.Body = text
	}
	if hasBase {
		p.Base, p.BaseSHA = base, g.sha(base)
	}
	if hasState {
		switch {
		case state == "closed" && p.State == StateOpen:
			p.State, p.ClosedAt = StateClosed, now
		case state == "open" && p.State == StateClosed:
			p.State, p.ClosedAt, p.HeadSHA = StateOpen, time.Time{}, g.sha(p.Head)
		}
	}
	p.UpdatedAt = now
	writeJSON(w, http.StatusOK, g.pull(p, api, true))
}

// pull renders p as GitHub does: full for a single pull request, the
// "simple" form without merged and mergeable for lists.
func (g *GitHub) pull(p *PullRequest, api string, full bool) map[string]any {
	owner := g.owner()
	name := g.repo[len(owner)+1:]
	repo := map[string]any{"name": name, "full_name": g.repo, "owner": map[string]any{"login": owner}, "html_url": g.URL() + "/" + g.repo}
	mergeCommit := fakeSHA("test-merge", strconv.Itoa(p.Number), p.HeadSHA, p.BaseSHA)
	if p.State == StateMerged {
		mergeCommit = p.MergeCommit
	}
	state := "open"
	if p.State != StateOpen {
		state = "closed"
	}
	out := map[string]any{
		"url":              fmt.Sprintf("%s/repos/%s/pulls/%d", api, g.repo, p.Number),
		"id":               1000 + p.Number,
		"node_id":          "PR_" + strconv.Itoa(p.Number),
		"html_url":         fmt.Sprintf("%s/%s/pull/%d", g.URL(), g.repo, p.Number),
		"number":           p.Number,
		"state":            state,
		"locked":           false,
		"title":            p.Title,
		"body":             strOrNil(p.Body),
		"user":             map[string]any{"login": "scribe-bot", "type": "Bot"},
		"created_at":       p.CreatedAt.Format(time.RFC3339),
		"updated_at":       p.UpdatedAt.Format(time.RFC3339),
		"closed_at":        timeOrNil(p.ClosedAt),
		"merged_at":        timeOrNil(p.MergedAt),
		"merge_commit_sha": mergeCommit,
		"draft":            false,
		"head":             map[string]any{"label": owner + ":" + p.Head, "ref": p.Head, "sha": p.HeadSHA, "user": map[string]any{"login": owner}, "repo": repo},
		"base":             map[string]any{"label": owner + ":" + p.Base, "ref": p.Base, "sha": p.BaseSHA, "user": map[string]any{"login": owner}, "repo": repo},
	}
	if full {
		out["merged"] = p.State == StateMerged
		out["mergeable"] = nil
		out["mergeable_state"] = "unknown"
		if p.State == StateOpen {
			out["mergeable"], out["mergeable_state"] = true, "clean"
		}
		out["merged_by"] = nil
		if p.State == StateMerged {
			out["merged_by"] = map[string]any{"login": "octocat"}
		}
	}
	return out
}
