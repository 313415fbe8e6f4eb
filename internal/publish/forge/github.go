package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v89/github"
)

// githubClient talks to GitHub's and GitHub Enterprise's REST API.
type githubClient struct {
	ep endpoint
	gh *github.Client
}

func newGitHub(ep endpoint, token string, hc *http.Client) (*githubClient, error) {
	opts := []github.ClientOptionsFunc{
		github.WithHTTPClient(hc),
		github.WithURLs(&ep.apiURL, &ep.apiURL),
		github.WithUserAgent(userAgent),
	}
	if token != "" {
		opts = append(opts, github.WithAuthToken(token))
	}
	gh, err := github.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("forge: github: client for %s: %w", ep.repo, err)
	}
	return &githubClient{ep: ep, gh: gh}, nil
}

// Ensure implements Client.
func (c *githubClient) Ensure(ctx context.Context, r Request) (PullRequest, error) {
	op := fmt.Sprintf("open pull request %s → %s", r.Head, r.Base)
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
	pr, resp, err := c.gh.PullRequests.Create(ctx, c.ep.owner, c.ep.name, &github.NewPullRequest{
		Title: github.Ptr(r.Title),
		Head:  github.Ptr(r.Head),
		Base:  github.Ptr(r.Base),
		Body:  github.Ptr(r.Body),
	})
	if err != nil {
		ferr := c.fail(op, resp, err)
		// Another writer opened one between our list and create.
		if hasStatus(ferr, http.StatusUnprocessableEntity) && strings.Contains(ferr.Error(), "already exists") {
			if open, lerr := c.listOpen(ctx, r.Head); lerr == nil {
				if cur := pickOpen(open, r.Base); cur != nil {
					return c.update(ctx, *cur, r)
				}
			}
		}
		return PullRequest{}, ferr
	}
	return fromGitHub(pr), nil
}

// update brings the open pull request cur in line with r.
func (c *githubClient) update(ctx context.Context, cur PullRequest, r Request) (PullRequest, error) {
	if upToDate(cur, r) {
		return cur, nil
	}
	edit := &github.PullRequest{Title: github.Ptr(r.Title), Body: github.Ptr(r.Body)}
	if cur.BaseBranch != r.Base {
		edit.Base = &github.PullRequestBranch{Ref: github.Ptr(r.Base)}
	}
	pr, resp, err := c.gh.PullRequests.Edit(ctx, c.ep.owner, c.ep.name, cur.Number, edit)
	if err != nil {
		return PullRequest{}, c.fail(fmt.Sprintf("update pull request #%d (%s → %s)", cur.Number, r.Head, r.Base), resp, err)
	}
	return fromGitHub(pr), nil
}

// Close implements Client.
func (c *githubClient) Close(ctx context.Context, number int, note string) (PullRequest, error) {
	cur, err := c.Get(ctx, number)
	if err != nil || cur.State != StateOpen {
		return cur, err
	}
	edit := &github.PullRequest{State: github.Ptr("closed"), Body: github.Ptr(closedBody(note, cur.Body))}
	pr, resp, err := c.gh.PullRequests.Edit(ctx, c.ep.owner, c.ep.name, number, edit)
	if err != nil {
		return PullRequest{}, c.fail(fmt.Sprintf("close pull request #%d", number), resp, err)
	}
	return fromGitHub(pr), nil
}

// listOpen lists the open pull requests whose head is this repository's
// branch head, into any base.
func (c *githubClient) listOpen(ctx context.Context, head string) ([]PullRequest, error) {
	return c.list(ctx, fmt.Sprintf("list open pull requests from %s", head), &github.PullRequestListOptions{
		State:       "open",
		Head:        c.ep.owner + ":" + head,
		ListOptions: github.ListOptions{PerPage: 100},
	}, maxPages)
}

func (c *githubClient) list(ctx context.Context, op string, opts *github.PullRequestListOptions, pages int) ([]PullRequest, error) {
	var out []PullRequest
	for range pages {
		prs, resp, err := c.gh.PullRequests.List(ctx, c.ep.owner, c.ep.name, opts)
		if err != nil {
			return nil, c.fail(op, resp, err)
		}
		for _, p := range prs {
			out = append(out, fromGitHub(p))
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

// Get implements Client.
func (c *githubClient) Get(ctx context.Context, number int) (PullRequest, error) {
	op := fmt.Sprintf("get pull request #%d", number)
	if number <= 0 {
		return PullRequest{}, invalid(c.ep.provider, op, c.ep.repo, errors.New("pull request numbers start at 1"))
	}
	pr, resp, err := c.gh.PullRequests.Get(ctx, c.ep.owner, c.ep.name, number)
	if err != nil {
		return PullRequest{}, c.fail(op, resp, err)
	}
	return fromGitHub(pr), nil
}

// Latest implements Client.
func (c *githubClient) Latest(ctx context.Context, head, base string) (*PullRequest, error) {
	op := fmt.Sprintf("list pull requests %s → %s", head, base)
	if head == "" || base == "" {
		return nil, invalid(c.ep.provider, op, c.ep.repo, errors.New("head and base branch are required"))
	}
	// Newest first: the first page holds the latest one.
	prs, err := c.list(ctx, op, &github.PullRequestListOptions{
		State:       "all",
		Head:        c.ep.owner + ":" + head,
		Base:        base,
		Sort:        "created",
		Direction:   "desc",
		ListOptions: github.ListOptions{PerPage: 10},
	}, 1)
	if err != nil {
		return nil, err
	}
	return newest(prs), nil
}

// fail turns an SDK error into an *Error.
func (c *githubClient) fail(op string, resp *github.Response, err error) error {
	status := 0
	if resp != nil && resp.Response != nil {
		status = resp.StatusCode
	}
	message := ""
	var rl *github.RateLimitError
	var arl *github.AbuseRateLimitError
	var er *github.ErrorResponse
	switch {
	case errors.As(err, &rl):
		message = rl.Message
	case errors.As(err, &arl):
		message = arl.Message
	case errors.As(err, &er):
		if er.Response != nil {
			status = er.Response.StatusCode
		}
		message = er.Message
		var details []string
		for _, d := range er.Errors {
			switch {
			case d.Message != "":
				details = append(details, d.Message)
			case d.Field != "" && d.Code != "":
				details = append(details, d.Field+" "+d.Code)
			}
		}
		if len(details) > 0 {
			message += ": " + strings.Join(details, "; ")
		}
	case status != 0:
		message = err.Error()
	}
	e := newError(c.ep.provider, op, c.ep.repo, status, message, err)
	if rl != nil || arl != nil {
		e.kind = ErrRateLimited
	}
	return e
}

// fromGitHub converts GitHub's pull request. List results carry merged_at
// but not merged; merge_commit_sha is a test merge until the pull request
// is merged.
func fromGitHub(p *github.PullRequest) PullRequest {
	out := PullRequest{
		Number:     p.GetNumber(),
		URL:        p.GetHTMLURL(),
		State:      StateOpen,
		HeadBranch: p.GetHead().GetRef(),
		BaseBranch: p.GetBase().GetRef(),
		HeadSHA:    p.GetHead().GetSHA(),
		Title:      p.GetTitle(),
		Body:       p.GetBody(),
	}
	switch {
	case p.GetMerged() || p.MergedAt != nil:
		out.State = StateMerged
		out.MergeCommit = p.GetMergeCommitSHA()
	case p.GetState() == "closed":
		out.State = StateClosed
	}
	return out
}
