package gitsink

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// classifyGitError turns a transport error into a *publish.Error that says which
// of the usual causes it is.
func classifyGitError(op, url string, err error) error {
	var pe *publish.Error
	if errors.As(err, &pe) {
		return err
	}
	if unwritable(err) {
		return cacheUnwritable(op, url, err)
	}
	e := &publish.Error{Reason: publish.ReasonFailed, Op: op, URL: url, Err: err}
	msg := err.Error()
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired):
		e.Reason, e.Hint = publish.ReasonAuthentication, "the remote wants credentials: set them in the Repository's secretRef"
	case errors.Is(err, transport.ErrAuthorizationFailed), strings.Contains(msg, "unable to authenticate"):
		e.Reason, e.Hint = publish.ReasonAuthentication, "the remote refused the credentials from the Repository's secretRef"
	case strings.Contains(msg, "key mismatch"):
		e.Reason, e.Hint = publish.ReasonHostKey, "the server's host key does not match known_hosts: possible man-in-the-middle, or the key was rotated"
	case strings.Contains(msg, "knownhosts: key is unknown"):
		e.Reason, e.Hint = publish.ReasonHostKey, "the server's host key is not in known_hosts"
	case errors.Is(err, transport.ErrRepositoryNotFound):
		e.Reason, e.Hint = publish.ReasonNotFound, "check the Repository's URL"
	case errors.As(err, &opErr), errors.As(err, &netErr), strings.Contains(msg, "connection refused"), strings.Contains(msg, "no such host"):
		e.Reason, e.Hint = publish.ReasonUnreachable, "the remote did not answer"
	}
	return e
}

// unwritable says whether err is the local disk refusing a write: no
// space, a quota, a read-only file system, or a local file's permission.
// go-git keeps the errno in most paths and only the text in some.
func unwritable(err error) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS) {
		return true
	}
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) && errors.Is(err, fs.ErrPermission) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "no space left on device") || strings.Contains(msg, "disk quota exceeded") || strings.Contains(msg, "read-only file system")
}

func cacheUnwritable(op, url string, err error) error {
	return &publish.Error{Reason: publish.ReasonCacheUnwritable, Op: op, URL: url, Err: err,
		Hint: "Scribe's Git cache cannot be written: free space on the volume of the cache directory (publish --cache-dir, controller --data-dir), or make it writable"}
}

// pushRejectedError is a push the remote answered with "ng".
type pushRejectedError struct {
	url, ref, reason string
}

func (e *pushRejectedError) Error() string {
	return fmt.Sprintf("push to %s: remote rejected %s: %s", e.url, e.ref, e.reason)
}

// isConflictReason says whether a rejection means "someone else moved the
// branch", in git's, GitHub's or GitLab's wording.
func isConflictReason(reason string) bool {
	for _, c := range []string{
		"fetch first", "non-fast-forward", "stale info", "incorrect old value",
		"cannot lock ref", "failed to lock", "failed to update ref", "but expected",
	} {
		if strings.Contains(reason, c) {
			return true
		}
	}
	return false
}
