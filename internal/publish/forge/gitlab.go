package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// gitlabClient talks to GitLab's merge request API; the project is
// addressed by its URL-encoded full path.
type gitlabClient struct {
	ep endpoint
	gl *gitlab.Client
}

func newGitLab(ep endpoint, token string, hc *http.Client) (*gitlabClient, error) {
	gl, err := gitlab.NewClient(token,
		gitlab.WithBaseURL(ep.apiURL),
		gitlab.WithHTTPClient(hc),
		gitlab.WithUserAgent(userAgent),
		// The SDK's retries back off up to ~12s on a refused connection;
		// the reconciler's requeue retries instead, as for the others.
		gitlab.WithoutRetries(),
	)
	if err != nil {
		return nil, fmt.Errorf("forge: gitlab: client for %s: %w", ep.repo, err)
	}
	return &gitlabClient{ep: ep, gl: gl}, nil
}

// Ensure implements Client.
func (c *gitlabClient) Ensure(ctx context.Context, r Request) (PullRequest, error) {
	op := fmt.Sprintf("open merge request %s → %s", r.Head, r.Base)
	if err := r.validate(); err != nil {
		return PullRequest{}, invalid(c.ep.provider, op, c.ep.repo, err)
	}
	open, err := c.listOpen(ctx, r.Head)
	if err != nil {
		return PullRequest{}, err
	}
	if cur := pickOpen(open, r.Base); cur != nil {
		return c.update(ctx, *cur, r)
	}
	mr, resp, err := c.gl.MergeRequests.CreateMergeRequest(c.ep.repo, &gitlab.CreateMergeRequestOptions{
		Title:        gitlab.Ptr(r.Title),
		Description:  gitlab.Ptr(r.Body),
		SourceBranch: gitlab.Ptr(r.Head),
		TargetBranch: gitlab.Ptr(r.Base),
	}, gitlab.WithContext(ctx))
	if err != nil {
		ferr := c.fail(op, resp, err)
		// 409: another writer opened one between our list and create.
		if hasStatus(ferr, http.StatusConflict) {
			if open, lerr := c.listOpen(ctx, r.Head); lerr == nil {
				if cur := pickOpen(open, r.Base); cur != nil {
					return c.update(ctx, *cur, r)
				}
			}
		}
		return PullRequest{}, ferr
	}
	return fromGitLab(&mr.BasicMergeRequest), nil
}

// update brings the open merge request cur in line with r.
func (c *gitlabClient) update(ctx context.Context, cur PullRequest, r Request) (PullRequest, error) {
	if upToDate(cur, r) {
		return cur, nil
	}
	opts := &gitlab.UpdateMergeRequestOptions{Title: gitlab.Ptr(r.Title), Description: gitlab.Ptr(r.Body)}
	if cur.BaseBranch != r.Base {
		opts.TargetBranch = gitlab.Ptr(r.Base)
	}
	mr, resp, err := c.gl.MergeRequests.UpdateMergeRequest(c.ep.repo, int64(cur.Number), opts, gitlab.WithContext(ctx))
	if err != nil {
		return PullRequest{}, c.fail(fmt.Sprintf("update merge request !%d (%s → %s)", cur.Number, r.Head, r.Base), resp, err)
	}
	return fromGitLab(&mr.BasicMergeRequest), nil
}

// Close implements Client.
func (c *gitlabClient) Close(ctx context.Context, number int, note string) (PullRequest, error) {
	cur, err := c.Get(ctx, number)
	if err != nil || cur.State != StateOpen {
		return cur, err
	}
	opts := &gitlab.UpdateMergeRequestOptions{StateEvent: gitlab.Ptr("close"), Description: gitlab.Ptr(closedBody(note, cur.Body))}
	mr, resp, err := c.gl.MergeRequests.UpdateMergeRequest(c.ep.repo, int64(number), opts, gitlab.WithContext(ctx))
	if err != nil {
		return PullRequest{}, c.fail(fmt.Sprintf("close merge request !%d", number), resp, err)
	}
	return fromGitLab(&mr.BasicMergeRequest), nil
}

// listOpen lists the open merge requests from head in this project.
func (c *gitlabClient) listOpen(ctx context.Context, head string) ([]PullRequest, error) {
	return c.list(ctx, fmt.Sprintf("list open merge requests from %s", head), &gitlab.ListProjectMergeRequestsOptions{
		State:        gitlab.Ptr("opened"),
		SourceBranch: gitlab.Ptr(head),
		ListOptions:  gitlab.ListOptions{PerPage: 100},
	}, maxPages)
}

func (c *gitlabClient) list(ctx context.Context, op string, opts *gitlab.ListProjectMergeRequestsOptions, pages int) ([]PullRequest, error) {
	var out []PullRequest
	for range pages {
		mrs, resp, err := c.gl.MergeRequests.ListProjectMergeRequests(c.ep.repo, opts, gitlab.WithContext(ctx))
		if err != nil {
			return nil, c.fail(op, resp, err)
		}
		for _, mr := range mrs {
			// A merge request from a fork's branch of the same name is not ours.
			if mr.SourceProjectID != 0 && mr.TargetProjectID != 0 && mr.SourceProjectID != mr.TargetProjectID {
				continue
			}
			out = append(out, fromGitLab(mr))
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

// Get implements Client.
func (c *gitlabClient) Get(ctx context.Context, number int) (PullRequest, error) {
	op := fmt.Sprintf("get merge request !%d", number)
	if number <= 0 {
		return PullRequest{}, invalid(c.ep.provider, op, c.ep.repo, errors.New("merge request numbers start at 1"))
	}
	mr, resp, err := c.gl.MergeRequests.GetMergeRequest(c.ep.repo, int64(number), nil, gitlab.WithContext(ctx))
	if err != nil {
		return PullRequest{}, c.fail(op, resp, err)
	}
	return fromGitLab(&mr.BasicMergeRequest), nil
}

// Latest implements Client.
func (c *gitlabClient) Latest(ctx context.Context, head, base string) (*PullRequest, error) {
	op := fmt.Sprintf("list merge requests %s → %s", head, base)
	if head == "" || base == "" {
		return nil, invalid(c.ep.provider, op, c.ep.repo, errors.New("head and base branch are required"))
	}
	mrs, err := c.list(ctx, op, &gitlab.ListProjectMergeRequestsOptions{
		State:        gitlab.Ptr("all"),
		SourceBranch: gitlab.Ptr(head),
		TargetBranch: gitlab.Ptr(base),
		OrderBy:      gitlab.Ptr("created_at"),
		Sort:         gitlab.Ptr("desc"),
		ListOptions:  gitlab.ListOptions{PerPage: 10},
	}, 1)
	if err != nil {
		return nil, err
	}
	return newest(mrs), nil
}

// fail turns an SDK error into an *Error.
func (c *gitlabClient) fail(op string, resp *gitlab.Response, err error) error {
	status := 0
	if resp != nil && resp.Response != nil {
		status = resp.StatusCode
	}
	message := ""
	var er *gitlab.ErrorResponse
	switch {
	case errors.As(err, &er):
		if er.Response != nil {
			status = er.Response.StatusCode
		}
		message = glMessage(er.Body, er.Message)
	case errors.Is(err, gitlab.ErrNotFound):
		// The SDK drops the body of a 404.
		status = http.StatusNotFound
		message = "Not Found"
	case status != 0:
		message = err.Error()
	}
	return newError(c.ep.provider, op, c.ep.repo, status, message, err)
}

// glMessage reads GitLab's error body: {"message": "…"}, {"message":
// ["…", …]}, {"message": {"field": ["…"]}} or {"error": "…"}.
func glMessage(body []byte, fallback string) string {
	var m struct {
		Message json.RawMessage `json:"message"`
		Error   string          `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil {
		return fallback
	}
	var s string
	var list []string
	var fields map[string][]string
	switch {
	case json.Unmarshal(m.Message, &s) == nil && s != "":
		return s
	case json.Unmarshal(m.Message, &list) == nil && len(list) > 0:
		return strings.Join(list, "; ")
	case json.Unmarshal(m.Message, &fields) == nil && len(fields) > 0:
		parts := make([]string, 0, len(fields))
		for k, v := range fields {
			parts = append(parts, k+" "+strings.Join(v, ", "))
		}
		sort.Strings(parts)
		return strings.Join(parts, "; ")
	case m.Error != "":
		return m.Error
	}
	return fallback
}

// fromGitLab converts a merge request. "locked" is GitLab's transient state
// while a merge is under way, so it counts as open.
func fromGitLab(mr *gitlab.BasicMergeRequest) PullRequest {
	out := PullRequest{
		Number:     int(mr.IID),
		URL:        mr.WebURL,
		State:      StateOpen,
		HeadBranch: mr.SourceBranch,
		BaseBranch: mr.TargetBranch,
		HeadSHA:    mr.SHA,
		Title:      mr.Title,
		Body:       mr.Description,
	}
	switch mr.State {
	case "merged":
		out.State = StateMerged
		switch {
		case mr.MergeCommitSHA != "":
			out.MergeCommit = mr.MergeCommitSHA
		case mr.SquashCommitSHA != "":
			out.MergeCommit = mr.SquashCommitSHA
		default:
			// Fast-forward merge: the head commit is what landed.
			out.MergeCommit = mr.SHA
		}
	case "closed":
		out.State = StateClosed
	}
	return out
}
