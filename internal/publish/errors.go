package publish

import (
	"errors"
	"fmt"
	"strings"
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
