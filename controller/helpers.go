package controller

import (
	"fmt"
	"strings"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/render"
)

// The ground floor of the package: small helpers the reconcilers, the
// pure decisions (rollout.go, stages.go, pipeline.go) and the finalizer
// share. This file uses nothing else of the package but the Target type
// (publisher.go), so no decision file reaches up into a reconciler for
// them.

// fmtTraffic writes a traffic split as "v1=90%,v2=10%".
func fmtTraffic(tr []scribev1.VersionWeight) string {
	parts := make([]string, 0, len(tr))
	for _, t := range tr {
		parts = append(parts, fmt.Sprintf("%s=%d%%", t.Version, t.Weight))
	}
	return strings.Join(parts, ",")
}

// shortRev is a revision cut to twelve characters, as logs and messages show it.
func shortRev(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// minDuration is the shorter of a and b.
func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// generated records where the bundle went and what it holds.
func generated(t *Target, b *render.Bundle) *scribev1.GeneratedResources {
	g := &scribev1.GeneratedResources{Objects: append([]scribev1.ObjectIdentity{b.Sync}, b.Objects...)}
	p := t.Input.Path
	if p == "" || p == "." {
		g.Path = b.Dir
	} else {
		g.Path = p + "/" + b.Dir
	}
	return g
}

// baseOpts are the Git options for the branch pull requests target.
func baseOpts(t *Target) gitsink.Options {
	o := *t.GitOpts
	if b := t.Repo.Spec.Git.PullRequest.Base; b != "" {
		o.Branch = b
	}
	return o
}
