package render

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/scribe-gitops/scribe/internal/credurl"
)

// checkArtifactPrefix checks the repository prefix of per-custom-resource
// artifacts (publish.applier.fluxArtifact.url): oci://host[:port]/path,
// with no credentials, tag or digest, and a path that makes a valid OCI
// repository name once a sync object's name is appended.
func checkArtifactPrefix(raw string) error {
	if err := credurl.Check(raw); err != nil {
		return err
	}
	rest, ok := strings.CutPrefix(raw, "oci://")
	if !ok {
		return fmt.Errorf("%q must start with oci://", raw)
	}
	host, repo, _ := strings.Cut(strings.TrimSuffix(rest, "/"), "/")
	if host == "" || repo == "" {
		return fmt.Errorf("%q must name a registry host and a repository path: oci://host/path", raw)
	}
	if strings.ContainsAny(repo, ":@") {
		return fmt.Errorf("%q: the prefix carries no tag or digest (each artifact is <prefix>/<name>:latest)", raw)
	}
	if _, err := name.NewRepository(host+"/"+repo+"/x", name.StrictValidation); err != nil {
		return fmt.Errorf("%q is not an OCI repository prefix: %w", raw, err)
	}
	return nil
}
