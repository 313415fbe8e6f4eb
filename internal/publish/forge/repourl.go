package forge

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/scribe-gitops/scribe/internal/credurl"
)

// endpoint is where a Client talks to: the repository and the API root.
type endpoint struct {
	provider string
	// repo is owner/repo, or GitLab's full project path group/sub/project.
	repo string
	// owner and name split repo at its last slash.
	owner, name string
	// apiURL is the API root as the provider's SDK expects it.
	apiURL string
}

// repoRef is a parsed clone URL.
type repoRef struct {
	// scheme and host reach the forge's web and API server: the clone URL's
	// for http(s), https and the bare host name for ssh and git.
	scheme, host string
	// hostname is host without a port.
	hostname string
	// path is the repository path without slashes around it or .git.
	path string
}

// resolve derives the endpoint from a clone URL and an optional API URL.
func resolve(provider, repoURL, apiURL string) (endpoint, error) {
	ref, err := parseRepoURL(repoURL)
	if err != nil {
		return endpoint{}, err
	}
	segs := strings.Split(ref.path, "/")
	switch provider {
	case ProviderGitLab:
		if len(segs) < 2 {
			return endpoint{}, fmt.Errorf("repository URL path %q: want group/project (subgroups allowed)", ref.path)
		}
	default:
		if len(segs) != 2 {
			return endpoint{}, fmt.Errorf("repository URL path %q: want owner/repo", ref.path)
		}
	}
	ep := endpoint{
		provider: provider,
		repo:     ref.path,
		owner:    strings.Join(segs[:len(segs)-1], "/"),
		name:     segs[len(segs)-1],
	}
	if strings.TrimSpace(apiURL) != "" {
		ep.apiURL, err = parseAPIURL(provider, apiURL)
		if err != nil {
			return endpoint{}, err
		}
		return ep, nil
	}
	base := ref.scheme + "://" + ref.host
	switch provider {
	case ProviderGitHub:
		if h := strings.ToLower(ref.hostname); h == "github.com" || h == "www.github.com" {
			ep.apiURL = "https://api.github.com/"
		} else {
			ep.apiURL = base + "/api/v3/"
		}
	case ProviderGitLab:
		ep.apiURL = base + "/api/v4"
	default:
		ep.apiURL = base
	}
	return ep, nil
}

// parseRepoURL parses https://host/owner/repo(.git),
// ssh://[user@]host[:port]/owner/repo(.git), git://host/owner/repo and the
// scp-like [user@]host:owner/repo(.git). Errors never repeat credentials
// the URL may carry.
func parseRepoURL(raw string) (repoRef, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return repoRef{}, errors.New("repository URL is empty")
	}
	if err := credurl.Check(raw); err != nil {
		return repoRef{}, fmt.Errorf("repository URL: %w", err)
	}
	var ref repoRef
	var p string
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return repoRef{}, fmt.Errorf("invalid repository URL: %w", err)
		}
		shown := credurl.Redact(raw)
		if u.Host == "" || u.Hostname() == "" {
			return repoRef{}, fmt.Errorf("repository URL %q has no host", shown)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return repoRef{}, fmt.Errorf("repository URL %q: a clone URL has no query or fragment", shown)
		}
		switch scheme := strings.ToLower(u.Scheme); scheme {
		case "https", "http":
			ref.scheme, ref.host = scheme, u.Host
		case "ssh", "git", "git+ssh", "ssh+git":
			ref.scheme, ref.host = "https", u.Hostname()
		default:
			return repoRef{}, fmt.Errorf("repository URL %q: unsupported scheme %q (want https, http or ssh)", shown, u.Scheme)
		}
		ref.hostname = u.Hostname()
		p = u.Path
	} else {
		// scp-like: [user@]host:path. A slash before the colon makes it a
		// local path, which no forge serves.
		colon := strings.Index(raw, ":")
		if colon <= 0 || strings.Contains(raw[:colon], "/") {
			return repoRef{}, errors.New("repository URL is neither a URL (https://host/owner/repo) nor ssh form (git@host:owner/repo.git)")
		}
		host := raw[:colon]
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = host[at+1:]
		}
		if host == "" || strings.ContainsAny(host, " \t[]") {
			return repoRef{}, errors.New("repository URL in ssh form has no valid host (want git@host:owner/repo.git)")
		}
		ref.scheme, ref.host, ref.hostname = "https", host, host
		p = raw[colon+1:]
	}
	p = strings.Trim(p, "/")
	p = strings.TrimSuffix(p, ".git")
	p = strings.Trim(p, "/")
	if p == "" {
		return repoRef{}, errors.New("repository URL has no repository path (want owner/repo)")
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".", "..", "-":
			return repoRef{}, fmt.Errorf("repository URL path %q is not a repository path", p)
		}
		if strings.ContainsAny(seg, " \t\n?#") {
			return repoRef{}, fmt.Errorf("repository URL path %q is not a repository path", p)
		}
	}
	ref.path = p
	return ref, nil
}

// parseAPIURL checks an explicit API URL and shapes it for the provider's
// SDK.
func parseAPIURL(provider, raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if err := credurl.Check(raw); err != nil {
		return "", fmt.Errorf("API URL: %w: put credentials in the token, not the URL", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("invalid API URL: %w", err)
	}
	if s := strings.ToLower(u.Scheme); (s != "https" && s != "http") || u.Host == "" {
		return "", fmt.Errorf("API URL %q: want an absolute http(s) URL", credurl.Redact(raw))
	}
	if u.User != nil {
		return "", fmt.Errorf("API URL %q: put credentials in the token, not the URL", credurl.Redact(raw))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("API URL %q: want no query or fragment", credurl.Redact(raw))
	}
	s := u.String()
	switch provider {
	case ProviderGitHub:
		if !strings.HasSuffix(s, "/") {
			s += "/"
		}
	case ProviderGitea:
		// The Gitea SDK appends /api/v1 itself.
		s = strings.TrimSuffix(strings.TrimSuffix(s, "/"), "/api/v1")
	default:
		s = strings.TrimSuffix(s, "/")
	}
	return s, nil
}

// APIURL returns the API root a Client for provider and the repository
// repoURL talks to, apiURL if set: the URL its token is sent to.
func APIURL(provider, repoURL, apiURL string) (string, error) {
	ep, err := resolve(strings.ToLower(strings.TrimSpace(provider)), repoURL, apiURL)
	if err != nil {
		return "", fmt.Errorf("%s: %w", provider, err)
	}
	return ep.apiURL, nil
}
