package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/ocisink"
	"github.com/scribe-gitops/scribe/render"
)

// artifactTarget is where a Repository's per-custom-resource artifacts go
// (spec.git.artifacts): each custom resource's directory, pushed to
// <prefix>/<sync object name>:latest after the commit that changed it, is
// what its own Flux OCIRepository reads.
type artifactTarget struct {
	prefix       string
	insecure     bool
	dockerConfig []byte
}

// artifactsFor fills in t's and render's per-custom-resource artifacts
// from repo's spec.git.artifacts; nothing without it.
func (r *Resolver) artifactsFor(ctx context.Context, repo *scribev1.Repository, t *Target, in *render.Publish) error {
	a := repo.Spec.Git.Artifacts
	if a == nil {
		return nil
	}
	if in.Applier.Kind != scribev1.ApplierFlux {
		return &reasonError{reason: string(publish.ReasonInvalid), err: fmt.Errorf(
			"repository %s/%s: spec.git.artifacts needs spec.applier.kind Flux (Argo CD reads the branch)", repo.Namespace, repo.Name)}
	}
	if repo.Spec.Git.PullRequest != nil {
		return &reasonError{reason: string(publish.ReasonInvalid), err: fmt.Errorf(
			"repository %s/%s: spec.git.artifacts cannot be used with spec.git.pullRequest: a merge on the forge would push no artifact", repo.Namespace, repo.Name)}
	}
	// Plain HTTP only to a loopback registry, as for spec.oci.
	loopback := loopbackRegistry(a.URL)
	// One key per Git repository, branch and path under the prefix:
	// Repositories of two clusters sharing a prefix never overwrite each
	// other's artifacts.
	sum := sha256.Sum256([]byte(repo.Spec.Git.URL + "\x00" + in.Applier.Revision + "\x00" + in.Path))
	prefix := strings.TrimSuffix(a.URL, "/") + "/" + hex.EncodeToString(sum[:4])
	if _, err := ocisink.New(ocisink.Options{URL: prefix + "/x", Insecure: loopback}); err != nil {
		return &reasonError{reason: string(publish.ReasonInvalid), err: fmt.Errorf(
			"repository %s/%s: spec.git.artifacts.url: %w", repo.Namespace, repo.Name, err)}
	}
	at := &artifactTarget{prefix: prefix, insecure: loopback}
	if a.SecretRef != nil {
		s, err := r.Secret(ctx, repo.Namespace, a.SecretRef.Name, a.URL, "spec.git.artifacts.secretRef")
		if err != nil {
			return err
		}
		at.dockerConfig = s[corev1.DockerConfigJsonKey]
	}
	t.Artifacts = at
	in.Applier.FluxArtifact = &render.FluxArtifactSource{URL: prefix, Insecure: loopback}
	return nil
}

// artifactFiles are the files of b under its custom resource's directory,
// at their repository paths (the publish path joined, as in its sync
// file): what the sync Kustomization's path applies.
func artifactFiles(b *render.Bundle) (map[string][]byte, error) {
	prefix, ok := strings.CutSuffix(b.SyncFile, b.Dir+".sync.yaml")
	if !ok || b.Dir == "" {
		return nil, fmt.Errorf("bundle of %s: its sync file %q is not beside its directory %q", publish.ObjectRef(b.Source), b.SyncFile, b.Dir)
	}
	files := map[string][]byte{}
	for _, f := range b.Files {
		if strings.HasPrefix(f.Path, b.Dir+"/") {
			files[prefix+f.Path] = f.Data
		}
	}
	return files, nil
}

// pushArtifact pushes the custom resource's directory of c as its own
// artifact, named after its sync object, with res's commit as its
// revision (Flux reports it as the Kustomization's
// lastAppliedOriginRevision), and remembers its digest for the read-back.
// It reports whether it pushed. A removal deletes the artifact instead
// (the root Kustomization prunes the OCIRepository with the sync file),
// so that a custom resource created later under the same name never
// starts from it; a registry that refuses deletes is logged, not fatal.
func (p *Publisher) pushArtifact(ctx context.Context, t *Target, sync scribev1.ObjectIdentity, c publish.Change, res publish.Result) (bool, error) {
	if t.Artifacts == nil || sync.Name == "" {
		return false, nil
	}
	sink, err := ocisink.New(ocisink.Options{
		URL:              t.Artifacts.prefix + "/" + sync.Name + ":latest",
		Insecure:         t.Artifacts.insecure,
		DockerConfigJSON: t.Artifacts.dockerConfig,
		Revision:         res.Revision,
		Transport:        p.Resolver.tenantTransport(),
	})
	if err != nil {
		return false, &reasonError{reason: string(publish.ReasonInvalid), err: fmt.Errorf("spec.git.artifacts.url: %w", err)}
	}
	if c.Delete {
		if err := sink.Remove(ctx); err != nil {
			log.FromContext(ctx).Info("the removed custom resource's artifact stays in the registry", "artifact", sink.URL(), "error", err.Error())
		}
		return false, nil
	}
	if c.Bundle == nil {
		return false, nil
	}
	if !res.Changed && p.artifacts.holds(c.Source, c.Bundle.Digest) {
		// A publish that found its content committed (a reconcile that
		// read its status before the last write of it) after this
		// process pushed that content: the artifact's commit is an
		// ancestor of res's with the same directory, which the
		// read-back accepts (health: origin revision). Pushing again
		// would only make Flux apply the same content once more.
		return false, nil
	}
	files, err := artifactFiles(c.Bundle)
	if err != nil {
		return false, err
	}
	pushed, err := sink.Replace(ctx, files)
	if err != nil {
		return false, fmt.Errorf("push the artifact of commit %s: %w", res.Commit, err)
	}
	p.artifacts.put(c.Source, res.Commit, pushed.Commit, c.Bundle.Digest)
	return true, nil
}

// pushedArtifacts remembers, per custom resource, the last artifact
// Scribe pushed for it: its digest, the commit it carries and the
// bundle's digest. A Kustomization's lastAttemptedRevision (an artifact
// digest) is ours when it is that artifact: a custom resource's status
// records a commit only after its artifact was pushed, so the last
// artifact pushed holds the content of the commit its status records.
type pushedArtifacts struct {
	mu sync.Mutex
	m  map[string]pushedArtifact
}

type pushedArtifact struct{ commit, digest, bundle string }

// maxPushedArtifacts bounds pushedArtifacts: one entry per custom
// resource, about 200 bytes, so twice the 10,000 CRs measured.
const maxPushedArtifacts = 20000

func (a *pushedArtifacts) put(src scribev1.ObjectIdentity, commit, digest, bundle string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil || len(a.m) > maxPushedArtifacts {
		a.m = map[string]pushedArtifact{}
	}
	a.m[publish.ObjectRef(src)] = pushedArtifact{commit: health.RevisionHash(commit), digest: health.RevisionHash(digest), bundle: bundle}
}

// carries reports whether digest is the artifact Scribe last pushed for
// src.
func (a *pushedArtifacts) carries(src scribev1.ObjectIdentity, digest string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	got, ok := a.m[publish.ObjectRef(src)]
	return ok && got.digest == digest
}

// holds reports whether the artifact Scribe last pushed for src holds
// the bundle of digest bundle.
func (a *pushedArtifacts) holds(src scribev1.ObjectIdentity, bundle string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	got, ok := a.m[publish.ObjectRef(src)]
	return ok && bundle != "" && got.bundle == bundle
}
