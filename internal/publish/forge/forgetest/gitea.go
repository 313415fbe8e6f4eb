package forgetest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Gitea is a fake Gitea API (https://gitea.com/api/swagger):
//
//	GET   /api/v1/version
//	GET   /api/v1/repos/{owner}/{repo}/pulls?state=&sort=&page=&limit=
//	POST  /api/v1/repos/{owner}/{repo}/pulls           201; 409 when one is open for the head and base
//	GET   /api/v1/repos/{owner}/{repo}/pulls/{index}
//	PATCH /api/v1/repos/{owner}/{repo}/pulls/{index}   201; title, body, base, state
//
// Requests other than /version need "Authorization: token <token>" or
// "Bearer <token>" (or ?access_token=); others get 401.
type Gitea struct {
	*fake
}

// GiteaVersion is the version the fake reports.
const GiteaVersion = "1.22.6"

// giteaRepoID is the id of the fake's repository.
const giteaRepoID = 9

// NewGitea starts a fake Gitea, closed when the test ends.
func NewGitea(tb testing.TB, opts ...Option) *Gitea {
	tb.Helper()
	g := &Gitea{fake: newFake(tb, opts)}
	g.serve = g.handle
	g.start()
	return g
}

// APIURL is the server's root; the Gitea SDK appends /api/v1.
func (g *Gitea) APIURL() string { return g.URL() }

func (g *Gitea) apiError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{"message": message, "url": g.URL() + "/api/swagger"})
}

func (g *Gitea) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	segs := segments(r.URL.EscapedPath())
	if len(segs) == 3 && segs[0] == "api" && segs[1] == "v1" && segs[2] == "version" && r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, map[string]any{"version": GiteaVersion})
		return
	}
	tok := bearer(r, "token", "Bearer")
	if tok == "" {
		tok = r.URL.Query().Get("access_token")
	}
	if tok == "" || tok != g.token {
		g.apiError(w, http.StatusUnauthorized, "invalid username, password or token")
		return
	}
	if len(segs) < 6 || len(segs) > 7 || segs[0] != "api" || segs[1] != "v1" || segs[2] != "repos" || segs[5] != "pulls" ||
		!strings.EqualFold(segs[3]+"/"+segs[4], g.repo) {
		writeJSON(w, http.StatusNotFound, map[string]any{"errors": []string{}, "message": "The target couldn't be found.", "url": g.URL() + "/api/swagger"})
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(segs) == 6 {
		switch r.Method {
		case http.MethodGet:
			g.list(w, r)
		case http.MethodPost:
			g.create(w, r, body)
		default:
			g.apiError(w, http.StatusMethodNotAllowed, "method not allowed")
		}
		return
	}
	n, err := strconv.Atoi(segs[6])
	p := g.get(n)
	if err != nil || p == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"errors": []string{}, "message": "The target couldn't be found.", "url": g.URL() + "/api/swagger"})
		return
	}
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, g.pull(p))
	case http.MethodPatch:
		g.edit(w, r, body, p)
	default:
		g.apiError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

func (g *Gitea) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	switch state {
	case "":
		state = "open"
	case "open", "closed", "all":
	default:
		g.apiError(w, http.StatusUnprocessableEntity, "invalid state")
		return
	}
	var match []*PullRequest
	for _, p := range g.prs {
		if (state == "open" && p.State != StateOpen) || (state == "closed" && p.State == StateOpen) {
			continue
		}
		match = append(match, p)
	}
	// The default sort lists newest first; "oldest" reverses it, other
	// sorts are treated as the default.
	if q.Get("sort") != "oldest" {
		match = sortNewest(match)
	}
	per := intParam(q, "limit", 30, 50)
	pg := intParam(q, "page", 1, 0)
	items, more := page(match, pg, per)
	w.Header().Set("X-Total-Count", strconv.Itoa(len(match)))
	if more {
		next := *r.URL
		nq := next.Query()
		nq.Set("page", strconv.Itoa(pg+1))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, g.URL(), next.RequestURI()))
	}
	out := make([]map[string]any, 0, len(items))
	for _, p := range items {
		out = append(out, g.pull(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gitea) create(w http.ResponseWriter, r *http.Request, body []byte) {
	m, ok := decodeBody(r, body)
	if !ok {
		g.apiError(w, http.StatusUnprocessableEntity, "invalid JSON body")
		return
	}
	head, _ := str(m, "head")
	base, _ := str(m, "base")
	title, _ := str(m, "title")
	text, _ := str(m, "body")
	for _, f := range []struct{ name, v string }{{"Head", head}, {"Base", base}, {"Title", title}} {
		if f.v == "" {
			g.apiError(w, http.StatusUnprocessableEntity, "["+f.name+"]: Required")
			return
		}
	}
	if head == base {
		g.apiError(w, http.StatusUnprocessableEntity, "Invalid PullRequest: There are no changes between the head and the base")
		return
	}
	for _, o := range g.prs {
		if o.State == StateOpen && o.Head == head && o.Base == base {
			g.apiError(w, http.StatusConflict, fmt.Sprintf("pull request already exists for these targets [id: %d, issue_id: %d, head_repo_id: %d, base_repo_id: %d, head_branch: %s, base_branch: %s]",
				o.Number, o.Number, giteaRepoID, giteaRepoID, head, base))
			return
		}
	}
	writeJSON(w, http.StatusCreated, g.pull(g.add(head, base, title, text)))
}

func (g *Gitea) edit(w http.ResponseWriter, r *http.Request, body []byte, p *PullRequest) {
	m, ok := decodeBody(r, body)
	if !ok {
		g.apiError(w, http.StatusUnprocessableEntity, "invalid JSON body")
		return
	}
	title, _ := str(m, "title")
	text, hasBody := str(m, "body")
	base, _ := str(m, "base")
	state, hasState := str(m, "state")
	if hasState && state != "open" && state != "closed" {
		g.apiError(w, http.StatusUnprocessableEntity, "invalid state")
		return
	}
	if p.State == StateMerged && hasState {
		g.apiError(w, http.StatusPreconditionFailed, "cannot change state of a merged pull request")
		return
	}
	now := g.tick()
	if title != "" {
		p.Title = title
	}
	if hasBody {
		p.Body = text
	}
	if base != "" && base != p.Base {
		if p.State != StateOpen {
			g.apiError(w, http.StatusUnprocessableEntity, "cannot change base of a closed pull request")
			return
		}
		p.Base, p.BaseSHA = base, g.sha(base)
	}
	switch {
	case hasState && state == "closed" && p.State == StateOpen:
		p.State, p.ClosedAt = StateClosed, now
	case hasState && state == "open" && p.State == StateClosed:
		p.State, p.ClosedAt, p.HeadSHA = StateOpen, time.Time{}, g.sha(p.Head)
	}
	p.UpdatedAt = now
	writeJSON(w, http.StatusCreated, g.pull(p))
}

// pull renders p as Gitea does.
func (g *Gitea) pull(p *PullRequest) map[string]any {
	owner := g.repo[:strings.Index(g.repo, "/")]
	user := map[string]any{"id": 3, "login": "scribe-bot", "username": "scribe-bot"}
	repo := map[string]any{"id": giteaRepoID, "name": g.repo[len(owner)+1:], "full_name": g.repo, "owner": map[string]any{"login": owner}}
	var mergeCommit, mergedBy any
	if p.State == StateMerged {
		mergeCommit, mergedBy = p.MergeCommit, user
	}
	state := "open"
	if p.State != StateOpen {
		state = "closed"
	}
	html := fmt.Sprintf("%s/%s/pulls/%d", g.URL(), g.repo, p.Number)
	headRef := p.Head
	if g.gone[p.Head] {
		// Gitea 1.26 (services/convert/pull.go): the head branch is gone.
		headRef = fmt.Sprintf("refs/pull/%d/head", p.Number)
	}
	return map[string]any{
		"id":                        200 + p.Number,
		"url":                       html,
		"number":                    p.Number,
		"user":                      user,
		"title":                     p.Title,
		"body":                      p.Body,
		"labels":                    []any{},
		"milestone":                 nil,
		"assignee":                  nil,
		"assignees":                 nil,
		"requested_reviewers":       nil,
		"requested_reviewers_teams": nil,
		"state":                     state,
		"draft":                     false,
		"is_locked":                 false,
		"comments":                  0,
		"html_url":                  html,
		"diff_url":                  html + ".diff",
		"patch_url":                 html + ".patch",
		"mergeable":                 p.State == StateOpen,
		"merged":                    p.State == StateMerged,
		"merged_at":                 timeOrNil(p.MergedAt),
		"merge_commit_sha":          mergeCommit,
		"merged_by":                 mergedBy,
		"allow_maintainer_edit":     false,
		"base":                      map[string]any{"label": p.Base, "ref": p.Base, "sha": p.BaseSHA, "repo_id": giteaRepoID, "repo": repo},
		"head":                      map[string]any{"label": p.Head, "ref": headRef, "sha": p.HeadSHA, "repo_id": giteaRepoID, "repo": repo},
		"merge_base":                p.BaseSHA,
		"due_date":                  nil,
		"created_at":                p.CreatedAt.Format(time.RFC3339),
		"updated_at":                p.UpdatedAt.Format(time.RFC3339),
		"closed_at":                 timeOrNil(p.ClosedAt),
		"pin_order":                 0,
	}
}
