package forgetest

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// GitLab is a fake GitLab merge request API
// (https://docs.gitlab.com/api/merge_requests/):
//
//	GET  /api/v4/projects/{id}/merge_requests?state=&source_branch=&target_branch=&order_by=&sort=&per_page=&page=
//	POST /api/v4/projects/{id}/merge_requests         201; 409 when one is open for the source branch
//	GET  /api/v4/projects/{id}/merge_requests/{iid}
//	PUT  /api/v4/projects/{id}/merge_requests/{iid}   title, description, target_branch, state_event
//
// where {id} is the URL-encoded project path or ProjectID. Requests need a
// "PRIVATE-TOKEN: <token>" or "Authorization: Bearer <token>" header;
// others get 401 {"message":"401 Unauthorized"}.
type GitLab struct {
	*fake
}

// ProjectID is the numeric id of the fake's project.
const ProjectID = 42

// NewGitLab starts a fake GitLab, closed when the test ends.
func NewGitLab(tb testing.TB, opts ...Option) *GitLab {
	tb.Helper()
	g := &GitLab{fake: newFake(tb, opts)}
	g.serve = g.handle
	g.start()
	return g
}

// APIURL is the API root, http://127.0.0.1:port/api/v4.
func (g *GitLab) APIURL() string { return g.URL() + "/api/v4" }

// MergeSquashed merges the open merge request number by squashing it into
// squashSHA and fast-forwarding: merge_commit_sha stays null and
// squash_commit_sha is set, as GitLab reports it.
func (g *GitLab) MergeSquashed(number int, squashSHA string) {
	g.tb.Helper()
	g.mutate(number, func(p *PullRequest, now time.Time) {
		p.State, p.MergeCommit, p.SquashCommit, p.Squashed, p.MergedAt = StateMerged, squashSHA, squashSHA, true, now
		g.shas[p.Base] = squashSHA
	})
}

// MergeFastForward merges the open merge request number by fast-forwarding
// its target to the head: merge_commit_sha stays null.
func (g *GitLab) MergeFastForward(number int) {
	g.tb.Helper()
	g.mutate(number, func(p *PullRequest, now time.Time) {
		p.State, p.MergeCommit, p.FastForward, p.MergedAt = StateMerged, p.HeadSHA, true, now
		g.shas[p.Base] = p.HeadSHA
	})
}

const glTime = "2006-01-02T15:04:05.000Z"

func glTimeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(glTime)
}

func (g *GitLab) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	tok := r.Header.Get("PRIVATE-TOKEN")
	if tok == "" {
		tok = bearer(r, "Bearer")
	}
	if tok == "" || tok != g.token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "401 Unauthorized"})
		return
	}
	segs := segments(r.URL.EscapedPath())
	if len(segs) < 5 || len(segs) > 6 || segs[0] != "api" || segs[1] != "v4" || segs[2] != "projects" || segs[4] != "merge_requests" {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "404 Not Found"})
		return
	}
	if segs[3] != g.repo && segs[3] != strconv.Itoa(ProjectID) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Project Not Found"})
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(segs) == 5 {
		switch r.Method {
		case http.MethodGet:
			g.list(w, r)
		case http.MethodPost:
			g.create(w, r, body)
		default:
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "405 Method Not Allowed"})
		}
		return
	}
	n, err := strconv.Atoi(segs[5])
	p := g.get(n)
	if err != nil || p == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Not found"})
		return
	}
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, g.mr(p, true))
	case http.MethodPut:
		g.update(w, r, body, p)
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "405 Method Not Allowed"})
	}
}

func (g *GitLab) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	switch state {
	case "", "all", "opened", "closed", "locked", "merged":
	default:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "state does not have a valid value"})
		return
	}
	src, dst := q.Get("source_branch"), q.Get("target_branch")
	var match []*PullRequest
	for _, p := range g.prs {
		switch {
		case state != "" && state != "all" && glState(p) != state:
			continue
		case src != "" && p.Head != src, dst != "" && p.Base != dst:
			continue
		}
		match = append(match, p)
	}
	// order_by=created_at (default; updated_at is treated alike), sort=desc
	// (default) lists newest first.
	if q.Get("sort") != "asc" {
		match = sortNewest(match)
	}
	per := intParam(q, "per_page", 20, 100)
	pg := intParam(q, "page", 1, 0)
	items, more := page(match, pg, per)
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(pg))
	h.Set("X-Per-Page", strconv.Itoa(per))
	h.Set("X-Total", strconv.Itoa(len(match)))
	h.Set("X-Total-Pages", strconv.Itoa(max(1, (len(match)+per-1)/per)))
	h.Set("X-Prev-Page", "")
	if pg > 1 {
		h.Set("X-Prev-Page", strconv.Itoa(pg-1))
	}
	h.Set("X-Next-Page", "")
	if more {
		h.Set("X-Next-Page", strconv.Itoa(pg+1))
	}
	out := make([]map[string]any, 0, len(items))
	for _, p := range items {
		out = append(out, g.mr(p, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *GitLab) create(w http.ResponseWriter, r *http.Request, body []byte) {
	m, ok := decodeBody(r, body)
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "body is invalid"})
		return
	}
	src, _ := str(m, "source_branch")
	dst, _ := str(m, "target_branch")
	title, _ := str(m, "title")
	desc, _ := str(m, "description")
	for _, f := range []struct{ name, v string }{{"source_branch", src}, {"target_branch", dst}, {"title", title}} {
		if f.v == "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": f.name + " is missing"})
			return
		}
	}
	if src == dst {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": []string{"You can't use same project/branch for source and target"}})
		return
	}
	if o := g.openFor(src); o != nil {
		writeJSON(w, http.StatusConflict, map[string]any{"message": []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", o.Number)}})
		return
	}
	writeJSON(w, http.StatusCreated, g.mr(g.add(src, dst, title, desc), true))
}

func (g *GitLab) update(w http.ResponseWriter, r *http.Request, body []byte, p *PullRequest) {
	m, ok := decodeBody(r, body)
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "body is invalid"})
		return
	}
	title, hasTitle := str(m, "title")
	desc, hasDesc := str(m, "description")
	dst, hasDst := str(m, "target_branch")
	ev, hasEv := str(m, "state_event")
	switch {
	case hasTitle && title == "":
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "title is empty"})
		return
	case hasEv && ev != "close" && ev != "reopen":
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "state_event does not have a valid value"})
		return
	case hasDst && dst == p.Head:
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": []string{"You can't use same project/branch for source and target"}})
		return
	}
	now := g.tick()
	if hasTitle {
		p.Title = title
	}
	if hasDesc {
		p.Body = desc
	}
	if hasDst && p.State == StateOpen {
		p.Base, p.BaseSHA = dst, g.sha(dst)
	}
	switch {
	case hasEv && ev == "close" && p.State == StateOpen:
		p.State, p.ClosedAt = StateClosed, now
	case hasEv && ev == "reopen" && p.State == StateClosed && g.openFor(p.Head) == nil:
		p.State, p.ClosedAt, p.HeadSHA = StateOpen, time.Time{}, g.sha(p.Head)
	}
	p.UpdatedAt = now
	writeJSON(w, http.StatusOK, g.mr(p, true))
}

// glState is GitLab's name for p's state.
func glState(p *PullRequest) string {
	switch p.State {
	case StateOpen:
		return "opened"
	default:
		return string(p.State)
	}
}

// mr renders p as GitLab does; full adds the fields of a single merge
// request.
func (g *GitLab) mr(p *PullRequest, full bool) map[string]any {
	author := map[string]any{"id": 7, "username": "scribe-bot", "name": "Scribe", "state": "active"}
	var mergeCommit, squashCommit any
	if p.State == StateMerged {
		switch {
		case p.Squashed:
			squashCommit = p.SquashCommit
		case p.FastForward:
		default:
			mergeCommit = p.MergeCommit
		}
	}
	var mergedBy any
	if p.State == StateMerged {
		mergedBy = author
	}
	out := map[string]any{
		"id":                            100 + p.Number,
		"iid":                           p.Number,
		"project_id":                    ProjectID,
		"title":                         p.Title,
		"description":                   p.Body,
		"state":                         glState(p),
		"created_at":                    p.CreatedAt.UTC().Format(glTime),
		"updated_at":                    p.UpdatedAt.UTC().Format(glTime),
		"merged_by":                     mergedBy,
		"merge_user":                    mergedBy,
		"merged_at":                     glTimeOrNil(p.MergedAt),
		"closed_by":                     nil,
		"closed_at":                     glTimeOrNil(p.ClosedAt),
		"target_branch":                 p.Base,
		"source_branch":                 p.Head,
		"user_notes_count":              0,
		"upvotes":                       0,
		"downvotes":                     0,
		"author":                        author,
		"assignees":                     []any{},
		"reviewers":                     []any{},
		"source_project_id":             ProjectID,
		"target_project_id":             ProjectID,
		"labels":                        []any{},
		"draft":                         false,
		"work_in_progress":              false,
		"milestone":                     nil,
		"merge_when_pipeline_succeeds":  false,
		"merge_status":                  "can_be_merged",
		"detailed_merge_status":         "mergeable",
		"sha":                           p.HeadSHA,
		"merge_commit_sha":              mergeCommit,
		"squash_commit_sha":             squashCommit,
		"discussion_locked":             nil,
		"should_remove_source_branch":   nil,
		"force_remove_source_branch":    false,
		"squash":                        p.Squashed,
		"squash_on_merge":               p.Squashed,
		"has_conflicts":                 false,
		"blocking_discussions_resolved": true,
		"web_url":                       fmt.Sprintf("%s/%s/-/merge_requests/%d", g.URL(), g.repo, p.Number),
		"references": map[string]any{
			"short":    fmt.Sprintf("!%d", p.Number),
			"relative": fmt.Sprintf("!%d", p.Number),
			"full":     fmt.Sprintf("%s!%d", g.repo, p.Number),
		},
	}
	if full {
		out["subscribed"] = true
		out["changes_count"] = "1"
		out["user"] = map[string]any{"can_merge": true}
		out["merge_error"] = nil
		out["diff_refs"] = map[string]any{"base_sha": p.BaseSHA, "head_sha": p.HeadSHA, "start_sha": p.BaseSHA}
	}
	return out
}
