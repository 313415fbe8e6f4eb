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
// once a server decodes, normalises or cuts it (a . or .. segment in any
// spelling, ";" parameters, an encoded dot, slash, backslash or percent:
// see climbs) or that carries a query or fragment is never within.
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
	if err := climbs(u); err != nil {
		return nil, err
	}
	return u, nil
}

// climbs says why u's path could name something outside its own prefix
// once a server decodes, normalises or cuts it, or nil. Servers disagree
// on what a path means: one decodes %2e%2e and climbs, one decodes twice
// (%252e%252e), one drops ";params" (Tomcat, Spring: /hooks/..;/admin is
// /admin), one takes a backslash or an encoded slash for a separator. A
// bound path therefore has none of them: no . or .. segment in any
// spelling, no ";", no encoded dot, slash or backslash, no encoded
// percent (%25, the start of every double encoding), no backslash, and
// no control character.
func climbs(u *url.URL) error {
	raw := strings.ToLower(u.EscapedPath())
	for _, enc := range []string{"%25", "%2e", "%2f", "%5c"} {
		if strings.Contains(raw, enc) {
			return fmt.Errorf("want no encoded percent, dot, slash or backslash (%s) in the path", enc)
		}
	}
	if strings.ContainsAny(u.Path, `;\%`) || strings.Contains(raw, ";") {
		return fmt.Errorf("want no ';' parameters, backslash or percent sign in the path")
	}
	for _, r := range u.Path {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("want no control character in the path")
		}
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == ".." || seg == "." {
			return fmt.Errorf("want no . or .. segment in the path")
		}
	}
	return nil
}
