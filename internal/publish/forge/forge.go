// Package forge opens and tracks the pull requests of Scribe's pull-request
// mode through a forge's REST API: GitHub (and GitHub Enterprise), GitLab
// merge requests and Gitea pull requests.
//
// The git side pushes each custom resource's change to its own branch
// (scribe/<namespace>/<kind>/<name>); this package keeps exactly one open
// pull request for that branch, reads its state back (open, closed, merged
// and the merge commit) and finds the latest one after a restart. It never
// touches git itself.
package forge

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// State is the state of a pull request as Scribe sees it.
type State string

const (
	// StateOpen is a pull request that can still be merged or closed
	// (GitLab's "opened" and "locked").
	StateOpen State = "open"
	// StateClosed is a pull request closed without merging.
	StateClosed State = "closed"
	// StateMerged is a merged pull request.
	StateMerged State = "merged"
)

// Provider names accepted in Options.Provider.
const (
	ProviderGitHub = "github"
	ProviderGitLab = "gitlab"
	ProviderGitea  = "gitea"
)

// PullRequest is a pull request (GitLab: merge request) as read from the
// forge.
type PullRequest struct {
	// Number is the pull request's number in its repository (GitLab: the
	// merge request's iid).
	Number int
	// URL is the pull request's web page.
	URL string
	// State is open, closed or merged.
	State State
	// HeadBranch is the branch the changes come from; BaseBranch the one
	// they go into.
	HeadBranch, BaseBranch string
	// HeadSHA is the commit the head branch pointed at when the forge last
	// looked.
	HeadSHA string
	// MergeCommit is the commit that landed on the base branch; set only
	// when State is StateMerged (GitLab: the merge commit, else the squash
	// commit, else the head commit of a fast-forward merge).
	MergeCommit string
	// Title and Body are the pull request's title and description.
	Title, Body string
}

// Request asks for a pull request from Head into Base.
type Request struct {
	// Head is the branch with the changes, for example
	// scribe/<namespace>/<kind>/<name>. It lives in the same repository.
	Head string
	// Base is the branch the changes are to be merged into.
	Base string
	// Title is required; Body may be empty.
	Title, Body string
}

// Client opens and reads pull requests in one repository. Implementations
// are safe for concurrent use.
type Client interface {
	// Ensure opens a pull request Head→Base, or updates the title and body
	// of the open one for Head, so that exactly one pull request is open
	// per head branch. An open pull request for Head into another base is
	// retargeted to Base rather than duplicated. Nothing is written when
	// the open pull request already says what r says.
	Ensure(ctx context.Context, r Request) (PullRequest, error)
	// Get reads a pull request by number: its state, whether it is merged
	// and the merge commit.
	Get(ctx context.Context, number int) (PullRequest, error)
	// Latest returns the most recently created pull request from head into
	// base in any state, or nil when there is none. It is used after a
	// restart and to notice that a pull request was merged or closed.
	Latest(ctx context.Context, head, base string) (*PullRequest, error)
	// Close closes the open pull request number without merging it, with
	// note (why) as the first paragraph of its description, in one
	// request. A pull request that is no longer open is returned as it is.
	Close(ctx context.Context, number int, note string) (PullRequest, error)
}

// Options configure New.
type Options struct {
	// Provider is "github", "gitlab" or "gitea".
	Provider string
	// RepoURL is the repository's git clone URL:
	// https://host/owner/repo(.git), git@host:owner/repo.git or
	// ssh://git@host[:port]/owner/repo.git. The repository (GitLab: the
	// full project path, subgroups included) and the default API URL are
	// derived from it.
	RepoURL string
	// APIURL overrides the API root. Defaults: https://api.github.com/ for
	// github.com, https://host/api/v3/ for GitHub Enterprise,
	// https://host/api/v4 for GitLab and https://host for Gitea (the client
	// adds /api/v1). The host of an ssh RepoURL is reached over https. Set
	// it when the forge is served under a path prefix or on another port.
	APIURL string
	// Token is the API token (GitHub: personal access or installation
	// token; GitLab: personal, project or group access token; Gitea:
	// access token). Surrounding white space, such as the trailing newline
	// of a Secret written with echo, is ignored. It may be empty only when
	// HTTPClient authenticates requests itself.
	Token string
	// HTTPClient is used for every request; it is copied, never modified.
	// Nil means a client with a 30 second timeout.
	HTTPClient *http.Client
}

// userAgent is sent with every request.
const userAgent = "scribe-gitops-forge"

// defaultTimeout bounds one HTTP exchange when Options.HTTPClient is nil.
const defaultTimeout = 30 * time.Second

// New returns a Client for the repository in opts. It checks the options
// and derives the repository and API URL without contacting the forge.
func New(opts Options) (Client, error) {
	provider := strings.ToLower(strings.TrimSpace(opts.Provider))
	switch provider {
	case ProviderGitHub, ProviderGitLab, ProviderGitea:
	case "":
		return nil, fmt.Errorf("forge: no provider given (want %s, %s or %s)", ProviderGitHub, ProviderGitLab, ProviderGitea)
	default:
		return nil, fmt.Errorf("forge: unsupported provider %q (want %s, %s or %s)", opts.Provider, ProviderGitHub, ProviderGitLab, ProviderGitea)
	}
	ep, err := resolve(provider, opts.RepoURL, opts.APIURL)
	if err != nil {
		return nil, fmt.Errorf("forge: %s: %w", provider, err)
	}
	token := strings.TrimSpace(opts.Token)
	if token == "" && opts.HTTPClient == nil {
		return nil, fmt.Errorf("forge: %s: no API token for %s", provider, ep.repo)
	}
	var hc http.Client
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient
	} else {
		hc.Timeout = defaultTimeout
	}
	switch provider {
	case ProviderGitHub:
		return newGitHub(ep, token, &hc)
	case ProviderGitLab:
		return newGitLab(ep, token, &hc)
	default:
		return newGitea(ep, token, &hc), nil
	}
}

// validate checks r before any request is sent.
func (r Request) validate() error {
	switch {
	case strings.TrimSpace(r.Head) == "":
		return fmt.Errorf("head branch is empty")
	case strings.TrimSpace(r.Base) == "":
		return fmt.Errorf("base branch is empty")
	case r.Head == r.Base:
		return fmt.Errorf("head and base are the same branch %q", r.Head)
	case strings.TrimSpace(r.Title) == "":
		return fmt.Errorf("title is empty")
	}
	return nil
}

// maxPages bounds how many pages of pull requests a lookup reads.
const maxPages = 20

// pickOpen chooses the pull request Ensure keeps when several are open for
// one head (made by hand, or before this package kept them unique): the
// oldest one into base, else the oldest one.
func pickOpen(prs []PullRequest, base string) *PullRequest {
	var best *PullRequest
	for i := range prs {
		p := &prs[i]
		switch {
		case best == nil:
			best = p
		case (p.BaseBranch == base) != (best.BaseBranch == base):
			if p.BaseBranch == base {
				best = p
			}
		case p.Number < best.Number:
			best = p
		}
	}
	return best
}

// newest returns the pull request with the highest number, or nil.
func newest(prs []PullRequest) *PullRequest {
	var best *PullRequest
	for i := range prs {
		if best == nil || prs[i].Number > best.Number {
			best = &prs[i]
		}
	}
	if best == nil {
		return nil
	}
	out := *best
	return &out
}

// closedBody is the description of a pull request closed with note: the
// note, then the description it had.
func closedBody(note, body string) string {
	note = strings.TrimSpace(note)
	if note == "" {
		return body
	}
	if body == "" {
		return note
	}
	return note + "\n\n" + body
}

// upToDate reports whether the open pull request p already says what r says.
func upToDate(p PullRequest, r Request) bool {
	return p.Title == r.Title && p.Body == r.Body && p.BaseBranch == r.Base
}
