package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/credurl"
)

// CheckBound decides whether the credentials in s may be sent to url (or,
// for a signing key, sign commits pushed to url): only when s opts in with
// the scribe.dev/allowed-urls annotation, a comma- or newline-separated
// list of URL prefixes, and url is within one of them (credurl.Within).
// As with Argo CD's repository credentials, which bind a Secret to its
// URL, a Secret placed in a tenant's namespace for one remote cannot be
// pointed at another by the tenant's Repository. field is the Repository
// field that names s, for the message, which never shows the Secret's
// data.
func CheckBound(s *corev1.Secret, url, field string) error {
	ref := s.Namespace + "/" + s.Name
	raw, ok := s.Annotations[scribev1.AllowedURLsAnnotation]
	if !ok {
		return &reasonError{reason: ReasonCredentialNotBound, err: fmt.Errorf(
			"%s: secret %s is not bound to any URL: the platform binds a Secret to the remotes it may be sent to with the annotation %s (URL prefixes, such as https://git.example.com/team-a/)",
			field, ref, scribev1.AllowedURLsAnnotation)}
	}
	prefixes := strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || r == '\n' || r == ' ' || r == '\t' || r == '\r' })
	for _, p := range prefixes {
		in, err := credurl.Within(p, url)
		if err != nil {
			return &reasonError{reason: ReasonCredentialNotBound, err: fmt.Errorf("%s: secret %s: annotation %s: %w", field, ref, scribev1.AllowedURLsAnnotation, err)}
		}
		if in {
			return nil
		}
	}
	return &reasonError{reason: ReasonCredentialNotBound, err: fmt.Errorf(
		"%s: secret %s may not be sent to %s: it is bound to %s (annotation %s)",
		field, ref, credurl.Redact(url), orNone(redactAll(prefixes)), scribev1.AllowedURLsAnnotation)}
}

func redactAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = credurl.Redact(u)
	}
	return out
}
