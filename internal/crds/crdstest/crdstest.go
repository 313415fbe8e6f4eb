// Package crdstest gives tests the upstream CRDs they load into a
// kube-apiserver, with one rule for a project that cannot be found: skip,
// or fail when SCRIBE_CRDS_REQUIRED=1. Inside the repository every project
// is found (its copies in internal/crds/upstream, or the pinned Go module),
// so nothing skips there; a project is missing only for a test binary run
// outside the repository with no mirror that has it.
package crdstest

import (
	"errors"
	"os"
	"testing"

	"github.com/scribe-gitops/scribe/internal/crds"
)

// Files returns the CRD files of the named projects. When one of them is
// unavailable (see crds.UnavailableError), the test is skipped, or fails
// under SCRIBE_CRDS_REQUIRED=1; any other error fails it.
func Files(t testing.TB, projects ...string) []string {
	t.Helper()
	files, missing := Available(t, projects...)
	if len(missing) > 0 {
		t.Skip((&crds.UnavailableError{Projects: missing}).Error())
	}
	return files
}

// Available returns the CRD files of those named projects that can be found,
// and the names of those that cannot, for a test that checks what it can.
// Under SCRIBE_CRDS_REQUIRED=1 a missing project fails the test; any other
// error fails it too.
func Available(t testing.TB, projects ...string) (files, missing []string) {
	t.Helper()
	files, err := crds.Files(t.Context(), projects...)
	var unavailable *crds.UnavailableError
	switch {
	case errors.As(err, &unavailable):
		if Required() {
			t.Fatalf("%v (%s=1)", err, crds.EnvRequired)
		}
		return files, unavailable.Projects
	case err != nil:
		t.Fatal(err)
	}
	return files, nil
}

// Required reports whether SCRIBE_CRDS_REQUIRED=1: every project must be
// found.
func Required() bool {
	return os.Getenv(crds.EnvRequired) == "1"
}
