package forge

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Kinds of failure. Every error a Client returns is an *Error; test its kind
// with errors.Is, for example errors.Is(err, forge.ErrAuth).
var (
	// ErrAuth is a refused token: 401 (missing, invalid or expired) or 403
	// (not allowed to do this in this repository).
	ErrAuth = errors.New("authentication failed")
	// ErrNotFound is a 404: the repository or the pull request does not
	// exist, or the token cannot see it.
	ErrNotFound = errors.New("not found")
	// ErrValidation is a request the forge (422, 400) or this package
	// rejected as invalid.
	ErrValidation = errors.New("validation failed")
	// ErrConflict is a 409, such as a second open merge request for a
	// source branch.
	ErrConflict = errors.New("conflict")
	// ErrRateLimited is a request refused by the forge's rate limit.
	ErrRateLimited = errors.New("rate limited")
)

// Error is a failed forge operation. Its message names the provider, the
// operation and the repository, then the forge's status and message, for
// example
//
//	github: open pull request scribe/ns/workload/web → main in acme/exp: 401 Bad credentials (authentication failed: the token is invalid or expired)
type Error struct {
	// Provider is github, gitlab or gitea.
	Provider string
	// Op says what was being done, for example
	// "open pull request scribe/ns/workload/web → main".
	Op string
	// Repo is owner/repo, or GitLab's project path.
	Repo string
	// StatusCode is the HTTP status, 0 when no response arrived or the
	// request was rejected before it was sent.
	StatusCode int
	// Message is the forge's error message, or the transport error.
	Message string
	// Err is the underlying error from the SDK or transport, if any.
	Err error

	kind error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s in %s", e.Provider, e.Op, e.Repo)
	switch {
	case e.StatusCode != 0 && e.Message != "":
		fmt.Fprintf(&b, ": %d %s", e.StatusCode, e.Message)
	case e.StatusCode != 0:
		fmt.Fprintf(&b, ": %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	case e.Message != "":
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if h := e.hint(); h != "" {
		fmt.Fprintf(&b, " (%s)", h)
	}
	return b.String()
}

// Unwrap exposes the kind (ErrAuth, ErrNotFound, …) and the underlying
// error to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// hint explains the kinds of failure a user can act on.
func (e *Error) hint() string {
	if e.StatusCode == 0 {
		return ""
	}
	switch e.kind {
	case ErrAuth:
		if e.StatusCode == http.StatusForbidden {
			return "authentication failed: the token is not allowed to do this in the repository"
		}
		return "authentication failed: the token is invalid or expired"
	case ErrNotFound:
		return "not found: the repository or pull request does not exist, or the token cannot see it"
	case ErrRateLimited:
		return "rate limited: retry later"
	}
	return ""
}

// kindOf maps an HTTP status to a kind.
func kindOf(status int) error {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return ErrAuth
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusUnprocessableEntity, http.StatusBadRequest:
		return ErrValidation
	case http.StatusConflict:
		return ErrConflict
	case http.StatusTooManyRequests:
		return ErrRateLimited
	}
	return nil
}

// newError builds the *Error for a failed exchange: status is 0 when no
// response arrived, message the forge's message (a leading repeat of the
// status code is dropped).
func newError(provider, op, repo string, status int, message string, err error) *Error {
	message = strings.TrimSpace(message)
	if status/100 == 2 {
		// A success whose body could not be read: report the error alone.
		status, message = 0, ""
	}
	if status != 0 {
		message = strings.TrimSpace(strings.TrimPrefix(message, strconv.Itoa(status)))
	}
	if status == 0 && message == "" && err != nil {
		message = err.Error()
	}
	return &Error{Provider: provider, Op: op, Repo: repo, StatusCode: status, Message: message, Err: err, kind: kindOf(status)}
}

// invalid is the *Error for a request rejected before it was sent.
func invalid(provider, op, repo string, err error) *Error {
	return &Error{Provider: provider, Op: op, Repo: repo, Message: err.Error(), kind: ErrValidation}
}

// hasStatus reports whether err is an *Error with the given status.
func hasStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == status
}
