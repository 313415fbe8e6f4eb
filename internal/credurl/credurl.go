// Package credurl is Scribe's one rule for repository and registry URLs
// that are stored or shown: they carry no credentials. Credentials come
// only from Secrets, --secret-dir, the SCRIBE_GIT_* variables and
// --docker-config; a URL with user info that may be a credential is
// refused (Check), and every URL that reaches a message, a status field,
// an Event, a log line, a rendered object or a cache is passed through
// Redact first.
//
// The user name of an ssh:// URL or of the scp form (git@host:path) is the
// SSH login, not a secret, and is kept: Flux and Argo CD need it to reach
// the repository. A password there is a credential. Any user info of every
// other scheme (https, http, oci, file, ...) is a credential: forges take a
// token as the user name as readily as as the password.
package credurl

import (
	"errors"
	"regexp"
	"strings"
)

// ErrCredentials is wrapped by Check's error.
var ErrCredentials = errors.New("the URL carries credentials in its user info")

// scpLike is the scp form [user@]host:path as go-git reads it (its user is
// everything up to the first @).
var scpLike = regexp.MustCompile(`^(?:([^@]+)@)?([^:\s]+):`)

// parts splits raw into what comes before the user info, the user info
// (without its @) and the rest. ok is false when raw has no user info. It
// reads raw byte by byte rather than through net/url, so a URL net/url
// refuses (a stray %, a space) is split all the same.
func parts(raw string) (prefix, userinfo, rest string, sshLogin, ok bool) {
	if i := strings.Index(raw, "://"); i > 0 && validScheme(raw[:i]) {
		scheme := strings.ToLower(raw[:i])
		start := i + 3
		end := len(raw)
		if j := strings.IndexAny(raw[start:], "/?#"); j >= 0 {
			end = start + j
		}
		at := strings.LastIndex(raw[start:end], "@")
		if at < 0 {
			return "", "", "", false, false
		}
		ssh := scheme == "ssh" || scheme == "git+ssh" || scheme == "ssh+git"
		return raw[:start], raw[start : start+at], raw[start+at+1:], ssh, true
	}
	if m := scpLike.FindStringSubmatchIndex(raw); m != nil && m[2] >= 0 && !strings.ContainsAny(raw[:m[3]], `/\`) {
		return "", raw[m[2]:m[3]], raw[m[3]+1:], true, true
	}
	return "", "", "", false, false
}

// validScheme says whether s is an RFC 3986 scheme.
func validScheme(s string) bool {
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// Redact returns raw without its credentials: the user info of every
// scheme but SSH is dropped, and of an SSH URL only the login is kept. A
// URL that carries none is returned as it is.
func Redact(raw string) string {
	prefix, userinfo, rest, sshLogin, ok := parts(raw)
	if !ok {
		return raw
	}
	if sshLogin {
		if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass || user != "" {
			if user == "" {
				return prefix + rest
			}
			return prefix + user + "@" + rest
		}
	}
	return prefix + rest
}

// Check refuses a URL that carries credentials: a password anywhere, or
// any user info of a scheme other than SSH. The error shows the URL
// redacted, never the credentials.
func Check(raw string) error {
	_, userinfo, _, sshLogin, ok := parts(raw)
	if !ok {
		return nil
	}
	if sshLogin && !strings.Contains(userinfo, ":") {
		return nil
	}
	return &credError{shown: Redact(raw)}
}

type credError struct{ shown string }

func (e *credError) Error() string {
	return ErrCredentials.Error() + " (" + e.shown + ")"
}

func (e *credError) Unwrap() error { return ErrCredentials }
