package publish

import (
	"context"
	"fmt"
	"path"
	"strings"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// Change is what one custom resource asks a sink to write: its rendered
// bundle, or, with Delete set, the removal of every path it owns.
type Change struct {
	// Source is the custom resource; it names the owned paths
	// (<namespace>/<kind>/<name>/ and <namespace>/<kind>/<name>.sync.yaml).
	Source scribev1.ObjectIdentity
	// Generation of Source that was rendered, recorded in the commit.
	Generation int64
	// Bundle is the rendered output; nil when Delete is set.
	Bundle *render.Bundle
	// Delete removes the source's owned paths.
	Delete bool
	// Reason is an optional sentence for the commit message, for example
	// why a canary is rolled back.
	Reason string
	// Summary is the intent in Markdown for a pull request's description,
	// for example the canary step and its weight; Reason when empty.
	Summary string
}

// ChangeFor makes the Change that writes b.
func ChangeFor(b *render.Bundle) Change {
	return Change{Source: b.Source, Generation: b.Generation, Bundle: b}
}

// DeleteFor makes the Change that removes the paths src owns.
func DeleteFor(src scribev1.ObjectIdentity, generation int64) Change {
	return Change{Source: src, Generation: generation, Delete: true}
}

// Result says where a change landed.
type Result struct {
	// Revision is a commit SHA (git) or a manifest digest (OCI), in the
	// form Flux reports it: "<branch>@sha1:<sha>" or "<tag>@sha256:<hex>".
	Revision string
	// Commit is the bare commit SHA or manifest digest.
	Commit string
	// Changed is false when the sink already held exactly this content and
	// nothing was written.
	Changed bool
	// SyncChanged is true when the change wrote or removed the source's
	// sync file (<dir>.sync.yaml), which the root applier applies: a new
	// or deleted custom resource, or a changed sync object. Sinks that
	// cannot tell set it whenever Changed is.
	SyncChanged bool
}

// Sink writes changes. Publish returns only when the changes are durable in
// the sink (pushed, uploaded) or have failed as a whole.
type Sink interface {
	Publish(ctx context.Context, changes ...Change) (Result, error)
}

// OwnedDir is the directory a source owns, relative to the repository path:
// <namespace>/<kind>/<name>, kind in lower case as render writes it.
func OwnedDir(src scribev1.ObjectIdentity) string {
	return src.Namespace + "/" + strings.ToLower(src.Kind) + "/" + src.Name
}

// Validate checks that a change is well formed and that every file of its
// bundle lies inside the paths the source owns.
func (c Change) Validate() error {
	id := c.Source.Kind + "/" + c.Source.Namespace + "/" + c.Source.Name
	for _, part := range []string{c.Source.Kind, c.Source.Namespace, c.Source.Name} {
		if part == "" || strings.ContainsAny(part, "/\\") || part == "." || part == ".." {
			return fmt.Errorf("change for %q: kind, namespace and name must be non-empty path segments", id)
		}
	}
	if c.Delete {
		if c.Bundle != nil {
			return fmt.Errorf("change for %s: a delete carries no bundle", id)
		}
		return nil
	}
	if c.Bundle == nil {
		return fmt.Errorf("change for %s: no bundle", id)
	}
	dir := OwnedDir(c.Source)
	if c.Bundle.Dir != dir {
		return fmt.Errorf("change for %s: bundle directory %q is not the source's %q", id, c.Bundle.Dir, dir)
	}
	for _, f := range c.Bundle.Files {
		clean := path.Clean(f.Path)
		if clean != f.Path || (!strings.HasPrefix(f.Path, dir+"/") && f.Path != dir+".sync.yaml") {
			return fmt.Errorf("change for %s: file %q is outside the owned paths %s/ and %s.sync.yaml", id, f.Path, dir, dir)
		}
	}
	return nil
}

// ObjectRef is the "Kind/namespace/name" form used in commit trailers and
// branch names.
func ObjectRef(src scribev1.ObjectIdentity) string {
	return src.Kind + "/" + src.Namespace + "/" + src.Name
}
