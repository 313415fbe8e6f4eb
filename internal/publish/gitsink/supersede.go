package gitsink

import (
	"context"
	"fmt"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/forge"
)

// CloseProposal closes the open pull request of src's branch into Base,
// with note first in its description: a change reached Base without it (a
// direct rollback), and merging it would bring back what that change
// undid. It returns the pull request it closed, nil when none was open.
// The branch is left as it is: the next proposal moves it.
func (g *Git) CloseProposal(ctx context.Context, opts Options, pr PullRequestOptions, src scribev1.ObjectIdentity, note string) (*forge.PullRequest, error) {
	if pr.Forge == nil {
		return nil, fmt.Errorf("close the pull request of %s: no forge client", publish.ObjectRef(src))
	}
	base := pr.Base
	if base == "" {
		base = opts.Branch
	}
	p, err := pr.Forge.Latest(ctx, PullRequestBranch(src), base)
	if err != nil || p == nil || p.State != forge.StateOpen {
		if err != nil {
			err = fmt.Errorf("close the pull request of %s: %w", publish.ObjectRef(src), err)
		}
		return nil, err
	}
	closed, err := pr.Forge.Close(ctx, p.Number, note)
	if err != nil {
		return nil, fmt.Errorf("close pull request #%d of %s: %w", p.Number, publish.ObjectRef(src), err)
	}
	if closed.State != forge.StateClosed {
		// Merged meanwhile: nothing was closed.
		return nil, nil
	}
	return &closed, nil
}
