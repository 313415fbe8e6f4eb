package credurl

import (
	"fmt"
	"net/url"
	"strings"
)

// Within reports whether raw is one of the URLs a credential bound to
// prefix may be sent to: the same scheme and host (port included, user
// info ignored: the SSH login is not a boundary), and a path equal to
// prefix's or below it on a segment boundary, so that a prefix
// https://git.example.com/team-a covers .../team-a/app.git but not
// .../team-a-evil/app.git. The scp form (git@host:path) is read as
// ssh://git@host/path. A URL whose path could climb out of the prefix
// once a server decodes or cleans it (a ".." segment, an encoded dot or
// slash) or that carries a query or fragment is never within.
func Within(prefix, raw string) (bool, error) {
	p, err := boundURL(prefix)
	if err != nil {
		return false, fmt.Errorf("prefix %s: %w", Redact(prefix), err)
	}
	u, err := boundURL(raw)
	if err != nil {
		return false, nil //nolint:nilerr // a URL that cannot be bound is simply not within
	}
	if !strings.EqualFold(p.Scheme, u.Scheme) || !strings.EqualFold(p.Host, u.Host) {
		return false, nil
	}
	pp := strings.TrimSuffix(p.Path, "/")
	return u.Path == pp || strings.HasPrefix(u.Path, pp+"/"), nil
}

// boundURL parses raw for Within.
func boundURL(raw string) (*url.URL, error) {
	s := strings.TrimSpace(raw)
	if !strings.Contains(s, "://") {
		if m := scpLike.FindStringSubmatchIndex(s); m != nil && !strings.ContainsAny(s[:m[1]], `/\`) {
			s = "ssh://" + s[:m[1]-1] + "/" + strings.TrimPrefix(s[m[1]:], "/")
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("want scheme://host[/path]")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("want no query or fragment")
	}
	lower := strings.ToLower(u.EscapedPath())
	if strings.Contains(lower, "%2e") || strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") || strings.Contains(u.Path, `\`) {
		return nil, fmt.Errorf("want no encoded dot, slash or backslash in the path")
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == ".." || seg == "." {
			return nil, fmt.Errorf("want no . or .. segment in the path")
		}
	}
	return u, nil
}

// SameRepository reports whether a and b name the same repository path
// (org/repo), whatever the scheme, login, host, port, case, or a trailing
// ".git" or slash: a Flux source or Argo CD often reaches the server
// Scribe pushes to by another name (an ssh host, an in-cluster Service).
// A URL that cannot be parsed, or that names no path, names no
// repository.
func SameRepository(a, b string) bool {
	ua, err := boundURL(a)
	if err != nil {
		return false
	}
	ub, err := boundURL(b)
	if err != nil {
		return false
	}
	key := func(u *url.URL) string {
		p := strings.Trim(u.Path, "/")
		return strings.ToLower(strings.TrimSuffix(p, ".git"))
	}
	return key(ua) != "" && key(ua) == key(ub)
}
