package controller_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// The Repository CRD refuses, at admission, a URL that carries credentials
// (which would be stored in etcd, shown by kubectl and written into the
// sync objects), a spec.git.path that Git refuses in a tree or that
// leaves the repository, and per-CR artifacts with a tag in their prefix,
// with Argo CD or with pull requests; the same values without the fault
// are accepted.
func TestRepositoryCRDRefusesCredentialsInURLsAndPathsGitRefuses(t *testing.T) {
	e := testEnv(t)
	ctx := t.Context()
	ns := e.namespace(t, "crd-hostile-")
	git := func(url, path string) scribev1.RepositorySpec {
		return scribev1.RepositorySpec{Git: &scribev1.GitRepositorySpec{URL: url, Path: path}, Applier: scribev1.ApplierSpec{Kind: scribev1.ApplierFlux, Namespace: "flux-system", Name: "scribe"}}
	}
	for _, tc := range []struct {
		name    string
		spec    scribev1.RepositorySpec
		refused string // "" when accepted
	}{
		{"https password", git("https://user:s3cret@git.example.com/org/r.git", "."), "must not carry credentials"},
		{"https token as user name", git("https://s3cret@git.example.com/org/r.git", "."), "must not carry credentials"},
		{"ssh password", git("ssh://git:s3cret@git.example.com/org/r.git", "."), "must not carry credentials"},
		{"oci password", scribev1.RepositorySpec{OCI: &scribev1.OCIRepositorySpec{URL: "oci://robot:s3cret@registry.example.com/fleet"}, Applier: scribev1.ApplierSpec{Kind: scribev1.ApplierFlux, Namespace: "flux-system", Name: "scribe"}}, "must not carry credentials"},
		{"path .git", git("https://git.example.com/org/r.git", ".git"), ".git component"},
		{"path .git/hooks", git("https://git.example.com/org/r.git", ".git/hooks"), ".git component"},
		{"path x/.GIT", git("https://git.example.com/org/r.git", "x/.GIT"), ".git component"},
		{"path .git with a trailing dot", git("https://git.example.com/org/r.git", "x/.git./y"), ".git component"},
		{"path with a backslash", git("https://git.example.com/org/r.git", `clusters\dev`), "backslash"},
		{"path leaving the repository", git("https://git.example.com/org/r.git", "a/../../b"), "stay inside the repository"},
		{"artifacts with a password", withArtifacts(git("https://git.example.com/org/r.git", "."), "oci://robot:s3cret@registry.example.com/fleet"), "must not carry credentials"},
		{"artifacts with a tag", withArtifacts(git("https://git.example.com/org/r.git", "."), "oci://registry.example.com/fleet:v1"), "spec.git.artifacts.url"},
		{"artifacts with Argo CD", func() scribev1.RepositorySpec {
			r := withArtifacts(git("https://git.example.com/org/r.git", "."), "oci://registry.example.com/fleet")
			r.Applier.Kind = scribev1.ApplierArgoCD
			return r
		}(), "needs spec.applier.kind Flux"},
		{"artifacts with pull requests", func() scribev1.RepositorySpec {
			r := withArtifacts(git("https://git.example.com/org/r.git", "."), "oci://registry.example.com/fleet")
			r.Git.PullRequest = &scribev1.PullRequestSpec{Provider: "gitea", SecretRef: scribev1.LocalObjectReference{Name: "forge"}}
			return r
		}(), "cannot be used with spec.git.pullRequest"},
		{"artifacts", withArtifacts(git("https://git.example.com/org/r.git", "."), "oci://registry.example.com:5000/fleet/team-a"), ""},
		{"ssh login", git("ssh://git@git.example.com/org/r.git", "clusters/dev"), ""},
		{"path with .github and .gitignore-like names", git("https://git.example.com/org/r.git", ".github/x.git/.gitx"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &scribev1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, GenerateName: "r-"}, Spec: tc.spec}
			err := e.c.Create(ctx, r)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("create = %v, want Invalid with %q", err, tc.refused)
			}
			// The refusal goes only to whoever sent the value (the
			// apiserver quotes it); nothing is stored.
		})
	}
}

// withArtifacts adds spec.git.artifacts with url to a Git Repository spec.
func withArtifacts(r scribev1.RepositorySpec, url string) scribev1.RepositorySpec {
	r.Git.Artifacts = &scribev1.ArtifactsSpec{URL: url}
	return r
}
