package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"code.gitea.io/sdk/gitea"
)

// giteaClient talks to Gitea's pull request API. The Gitea SDK carries the
// request context in the client, so each call builds a light client of its
// own; none probes the server version.
type giteaClient struct {
	ep    endpoint
	token string
	hc    *http.Client
}

// giteaPageSize is Gitea's default MAX_RESPONSE_ITEMS.
const giteaPageSize = 50

func newGitea(ep endpoint, token string, hc *http.Client) *giteaClient {
	return &giteaClient{ep: ep, token: token, hc: hc}
}

// api returns an SDK client bound to ctx.
func (c *giteaClient) api(ctx context.Context, op string) (*gitea.Client, error) {
	g, err := gitea.NewClient(c.ep.apiURL,
		gitea.SetHTTPClient(c.hc),
		gitea.SetToken(c.token),
		gitea.SetGiteaVersion(""),
		gitea.SetContext(ctx),
		gitea.SetUserAgent(userAgent),
	)
	if err != nil {
		return nil, newError(c.ep.provider, op, c.ep.repo, 0, "", err)
	}
	return g, nil
}

// Ensure implements Client.
func (c *giteaClient) Ensure(ctx context.Context, r Request) (PullRequest, error) {
	op := fmt.Sprintf("open pull request %s → %s", r.Head, r.Base)
	if err := r.validate(); err != nil {
		return PullRequest{}, invalid(c.ep.provider, op, c.ep.repo, err)
	}
	g, err := c.api(ctx, op)
	if err != nil {
		return PullRequest{}, err
	}
	open, err := c.listOpen(g, r.Head)
	if err != nil {
		return PullRequest{}, err
	}
	if cur := pickOpen(open, r.Base); cur != nil {
		return c.update(g, *cur, r)
	}
	pr, resp, err := g.CreatePullRequest(c.ep.owner, c.ep.name, gitea.CreatePullRequestOption{
		Head:  r.Head,
		Base:  r.Base,
		Title: r.Title,
		Body:  r.Body,
	})
	if err != nil {
		ferr := c.fail(op, resp, err)
		// 409: another writer opened one between our list and create.
		if hasStatus(ferr, http.StatusConflict) {
			if open, lerr := c.listOpen(g, r.Head); lerr == nil {
				if cur := pickOpen(open, r.Base); cur != nil {
					return c.update(g, *cur, r)
				}
			}
		}
		return PullRequest{}, ferr
	}
	return fromGitea(pr), nil
}

// update brings the open pull request cur in line with r.
func (c *giteaClient) update(g *gitea.Client, cur PullRequest, r Request) (PullRequest, error) {
	if upToDate(cur, r) {
		return cur, nil
	}
	body := r.Body
	opt := gitea.EditPullRequestOption{Title: r.Title, Body: &body}
	if cur.BaseBranch != r.Base {
		opt.Base = r.Base
	}
	pr, resp, err := g.EditPullRequest(c.ep.owner, c.ep.name, int64(cur.Number), opt)
	if err != nil {
		return PullRequest{}, c.fail(fmt.Sprintf("update pull request #%d (%s → %s)", cur.Number, r.Head, r.Base), resp, err)
	}
	return fromGitea(pr), nil
}

// Close implements Client.
func (c *giteaClient) Close(ctx context.Context, number int, note string) (PullRequest, error) {
	cur, err := c.Get(ctx, number)
	if err != nil || cur.State != StateOpen {
		return cur, err
	}
	op := fmt.Sprintf("close pull request #%d", number)
	g, err := c.api(ctx, op)
	if err != nil {
		return PullRequest{}, err
	}
	body, closed := closedBody(note, cur.Body), gitea.StateClosed
	pr, resp, err := g.EditPullRequest(c.ep.owner, c.ep.name, int64(number), gitea.EditPullRequestOption{Body: &body, State: &closed})
	if err != nil {
		return PullRequest{}, c.fail(op, resp, err)
	}
	return fromGitea(pr), nil
}

// listOpen lists the open pull requests from head in this repository.
// Gitea cannot filter by branch, so it pages through the open ones.
func (c *giteaClient) listOpen(g *gitea.Client, head string) ([]PullRequest, error) {
	return c.list(g, fmt.Sprintf("list open pull requests from %s", head), gitea.StateOpen, head, "", false)
}

// list pages through the pull requests in state and keeps those from head
// (into base, if not empty). With firstHit it stops after the first page
// with a match: Gitea lists newest first.
func (c *giteaClient) list(g *gitea.Client, op string, state gitea.StateType, head, base string, firstHit bool) ([]PullRequest, error) {
	var out []PullRequest
	for page := 1; page <= maxPages; page++ {
		prs, resp, err := g.ListRepoPullRequests(c.ep.owner, c.ep.name, gitea.ListPullRequestsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: giteaPageSize},
			State:       state,
		})
		if err != nil {
			return nil, c.fail(op, resp, err)
		}
		for _, p := range prs {
			if p == nil || p.Head == nil || p.Base == nil || giteaHeadBranch(p) != head || (base != "" && p.Base.Ref != base) {
				continue
			}
			// A pull request from a fork's branch of the same name is not ours.
			if p.Head.RepoID != 0 && p.Base.RepoID != 0 && p.Head.RepoID != p.Base.RepoID {
				continue
			}
			out = append(out, fromGitea(p))
		}
		if len(prs) < giteaPageSize || (firstHit && len(out) > 0) {
			break
		}
	}
	return out, nil
}

// Get implements Client.
func (c *giteaClient) Get(ctx context.Context, number int) (PullRequest, error) {
	op := fmt.Sprintf("get pull request #%d", number)
	if number <= 0 {
		return PullRequest{}, invalid(c.ep.provider, op, c.ep.repo, errors.New("pull request numbers start at 1"))
	}
	g, err := c.api(ctx, op)
	if err != nil {
		return PullRequest{}, err
	}
	pr, resp, err := g.GetPullRequest(c.ep.owner, c.ep.name, int64(number))
	if err != nil {
		return PullRequest{}, c.fail(op, resp, err)
	}
	return fromGitea(pr), nil
}

// Latest implements Client.
func (c *giteaClient) Latest(ctx context.Context, head, base string) (*PullRequest, error) {
	op := fmt.Sprintf("list pull requests %s → %s", head, base)
	if head == "" || base == "" {
		return nil, invalid(c.ep.provider, op, c.ep.repo, errors.New("head and base branch are required"))
	}
	g, err := c.api(ctx, op)
	if err != nil {
		return nil, err
	}
	prs, err := c.list(g, op, gitea.StateAll, head, base, true)
	if err != nil {
		return nil, err
	}
	return newest(prs), nil
}

// fail turns an SDK error into an *Error; the SDK's error text is the
// server's message.
func (c *giteaClient) fail(op string, resp *gitea.Response, err error) error {
	status := 0
	message := ""
	if resp != nil && resp.Response != nil && resp.StatusCode/100 != 2 {
		status = resp.StatusCode
		message = err.Error()
	}
	return newError(c.ep.provider, op, c.ep.repo, status, message, err)
}

// fromGitea converts a Gitea pull request.
func fromGitea(p *gitea.PullRequest) PullRequest {
	out := PullRequest{
		Number: int(p.Index),
		URL:    p.HTMLURL,
		State:  StateOpen,
		Title:  p.Title,
		Body:   p.Body,
	}
	if p.Head != nil {
		out.HeadBranch, out.HeadSHA = giteaHeadBranch(p), p.Head.Sha
	}
	if p.Base != nil {
		out.BaseBranch = p.Base.Ref
	}
	switch {
	case p.HasMerged:
		out.State = StateMerged
		if p.MergedCommitID != nil {
			out.MergeCommit = *p.MergedCommitID
		}
	case p.State == gitea.StateClosed:
		out.State = StateClosed
	}
	return out
}

// giteaHeadBranch is the branch a pull request came from. Once that branch
// is deleted (after the merge), Gitea reports refs/pull/<n>/head as the
// head's ref and keeps the branch name only in its label.
func giteaHeadBranch(p *gitea.PullRequest) string {
	if strings.HasPrefix(p.Head.Ref, "refs/pull/") && p.Head.Name != "" {
		return p.Head.Name
	}
	return p.Head.Ref
}
