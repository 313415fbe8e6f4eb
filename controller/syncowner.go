package controller

import (
	"fmt"
	"path"
	"strings"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
)

// Read-back isolation: every custom resource's sync object lives where
// other tenants' do (Flux's namespace, or an Argo CD namespace), and a
// Repository of one tenant may share a branch with another's. A custom
// resource therefore advances only on a sync object that is its own: the
// one render labels with its kind, namespace and name, that applies its
// own directory, from the source render gave it. Anything else read under
// its sync object's name (an older release's name that another custom
// resource's also maps to, an object written by hand, the branch's root
// source) is no evidence for it.

// ReasonForeignSyncObject: the object under the custom resource's sync
// object name is not its own (another custom resource's, or applying
// another path or source); its status is no evidence. The verdict is
// Pending: the root applier replaces it with the custom resource's own.
const ReasonForeignSyncObject = "ForeignSyncObject"

// OwnSync is what a custom resource's own sync object shows.
type OwnSync struct {
	// Owner is the custom resource.
	Owner scribev1.ObjectIdentity
	// Path is the directory Scribe writes the custom resource's bundle
	// to (<repository path>/<namespace>/<kind>/<name>), which its sync
	// object applies.
	Path string
	// Source is the source the sync object reads, as SyncFacts.Source.
	Source string
}

// SyncFacts is what a sync object read back says about whose it is.
type SyncFacts struct {
	// Labels are the object's labels (render's scribe.dev/kind,
	// scribe.dev/namespace and scribe.dev/name name its custom resource).
	Labels map[string]string
	// Path is the directory it applies (a Flux Kustomization's
	// spec.path, an Argo CD Application's spec.source.path).
	Path string
	// Source is the source it reads: "<kind>/<namespace>/<name>" of a
	// Flux source, "<repoURL>@<targetRevision>" of an Argo CD
	// Application.
	Source string
}

// ownSyncOf is what the sync object of the custom resource src, published
// under the repository path repoPath, shows when it is src's own; source
// is the applier's (fluxSourceOf, argoSourceOf).
func ownSyncOf(src scribev1.ObjectIdentity, repoPath, source string) OwnSync {
	return OwnSync{Owner: src, Path: path.Join(repoPath, publish.OwnedDir(src)), Source: source}
}

// fluxSourceOf names a Flux source as SyncFacts.Source does.
func fluxSourceOf(kind, namespace, name string) string {
	return kind + "/" + namespace + "/" + name
}

// argoSourceOf names an Argo CD Application's source as SyncFacts.Source
// does.
func argoSourceOf(repoURL, revision string) string {
	return repoURL + "@" + revision
}

// DecideOwnSync reports whether the sync object read back is the custom
// resource's own, and if not, why: it must carry its owner's labels, apply
// its owner's directory and read its owner's source. Paths compare
// cleaned, relative to the repository's root ("./a/b" and "/a/b" are
// "a/b").
func DecideOwnSync(want OwnSync, got SyncFacts) (bool, string) {
	o := want.Owner
	for _, l := range []struct{ key, want string }{
		{"scribe.dev/kind", o.Kind}, {"scribe.dev/namespace", o.Namespace}, {"scribe.dev/name", o.Name},
	} {
		if v := got.Labels[l.key]; v != l.want {
			return false, fmt.Sprintf("it is labelled %s=%q, not %q: not the sync object of %s", l.key, v, l.want, publish.ObjectRef(o))
		}
	}
	if got.Path == "" || cleanPath(got.Path) != cleanPath(want.Path) {
		return false, fmt.Sprintf("it applies path %q, not %s's %q", got.Path, publish.ObjectRef(o), want.Path)
	}
	if got.Source != want.Source {
		return false, fmt.Sprintf("it reads source %q, not %q", got.Source, want.Source)
	}
	return true, ""
}

// cleanPath is p cleaned, relative to the repository's root.
func cleanPath(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}
