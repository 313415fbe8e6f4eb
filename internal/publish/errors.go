package publish

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Reason classifies a publish failure. The controller uses it as the reason
// of its Ready=False condition; people read the message.
type Reason string

// Reasons for publish failures.
const (
	ReasonUnreachable    Reason = "RemoteUnreachable"
	ReasonAuthentication Reason = "AuthenticationFailed"
	ReasonNotFound       Reason = "RepositoryNotFound"
	ReasonHostKey        Reason = "HostKeyMismatch"
	ReasonRejected       Reason = "PushRejected"
	ReasonConflict       Reason = "PushConflict"
	ReasonInvalid        Reason = "InvalidChange"
	ReasonFailed         Reason = "PublishFailed"
	// ReasonCacheCorrupt: the local Git cache was damaged (a process killed
	// while it wrote, a disk error); it was dropped and fetched again once,
	// and that failed too.
	ReasonCacheCorrupt Reason = "CacheCorrupt"
	// ReasonCacheUnwritable: the local Git cache cannot be written: no
	// space left on its volume, a quota, a read-only file system or no
	// permission. Not the remote's fault, and fetching again will not help.
	ReasonCacheUnwritable Reason = "CacheUnwritable"
	// ReasonInternal: Scribe or go-git panicked; the panic was recovered
	// at the sink boundary and the cache dropped.
	ReasonInternal Reason = "InternalError"
	// ReasonSyncIndexConflict: the sync index's place holds a file Scribe
	// did not write; Scribe does not overwrite it.
	ReasonSyncIndexConflict Reason = "SyncIndexConflict"
	// ReasonObjectConflict: the change renders an object (same API group,
	// kind, namespace and name) that another custom resource already
	// publishes.
	ReasonObjectConflict Reason = "ObjectConflict"
)

// Error is a classified publish failure.
type Error struct {
	Reason Reason
	Op     string // "push to", "fetch from", …
	URL    string
	Hint   string
	Err    error
}

func (e *Error) Error() string {
	// Server answers often end in newlines; an error is one line.
	msg := fmt.Sprintf("%s %s: %s", e.Op, e.URL, strings.Join(strings.Fields(e.Err.Error()), " "))
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of err, or ReasonFailed.
func ReasonOf(err error) Reason {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return ReasonFailed
}

// classifyGitError turns a transport error into an *Error that says which
// of the usual causes it is.
func classifyGitError(op, url string, err error) error {
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	if unwritable(err) {
		return cacheUnwritable(op, url, err)
	}
	e := &Error{Reason: ReasonFailed, Op: op, URL: url, Err: err}
	msg := err.Error()
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired):
		e.Reason, e.Hint = ReasonAuthentication, "the remote wants credentials: set them in the Repository's secretRef"
	case errors.Is(err, transport.ErrAuthorizationFailed), strings.Contains(msg, "unable to authenticate"):
		e.Reason, e.Hint = ReasonAuthentication, "the remote refused the credentials from the Repository's secretRef"
	case strings.Contains(msg, "key mismatch"):
		e.Reason, e.Hint = ReasonHostKey, "the server's host key does not match known_hosts: possible man-in-the-middle, or the key was rotated"
	case strings.Contains(msg, "knownhosts: key is unknown"):
		e.Reason, e.Hint = ReasonHostKey, "the server's host key is not in known_hosts"
	case errors.Is(err, transport.ErrRepositoryNotFound):
		e.Reason, e.Hint = ReasonNotFound, "check the Repository's URL"
	case errors.As(err, &opErr), errors.As(err, &netErr), strings.Contains(msg, "connection refused"), strings.Contains(msg, "no such host"):
		e.Reason, e.Hint = ReasonUnreachable, "the remote did not answer"
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
	return &Error{Reason: ReasonCacheUnwritable, Op: op, URL: url, Err: err,
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
