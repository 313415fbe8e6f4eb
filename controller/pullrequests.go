package controller

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// workloadSummary says, for a pull request's description, what the
// Workload's intent does: the first rollout, a canary step and its
// weights, the promotion, or a rollback and why.
func workloadSummary(w *scribev1.Workload) string {
	st := &w.Status
	switch {
	case st.CanaryVersion != "" && st.StableVersion == "":
		return fmt.Sprintf("First rollout of **%s**: %s.", st.CanaryVersion, fmtTraffic(st.Traffic))
	case warming(w):
		return fmt.Sprintf("Rolling out **%s** (canary): deployed at weight 0 until it is available; step 1 of %d (weight %d) follows. %s.", st.CanaryVersion, len(steps(w)), steps(w)[0].Weight, fmtTraffic(st.Traffic))
	case st.CanaryVersion != "":
		strategy := scribev1.StrategyCanary
		if w.Spec.Rollout != nil && w.Spec.Rollout.Strategy != "" {
			strategy = w.Spec.Rollout.Strategy
		}
		return fmt.Sprintf("Rolling out **%s** (%s), step %d of %d: %s.", st.CanaryVersion, strategy, st.Step+1, len(steps(w)), fmtTraffic(st.Traffic))
	case st.Phase == scribev1.WorkloadRolledBack && st.RolledBackVersion != "":
		return fmt.Sprintf("Rolling back **%s**: %s.\n\nAll traffic returns to %s: %s.", st.RolledBackVersion, st.Message, st.StableVersion, fmtTraffic(st.Traffic))
	case st.StableVersion != "":
		return fmt.Sprintf("**%s** becomes the stable version: %s.", st.StableVersion, fmtTraffic(st.Traffic))
	}
	return ""
}

// deleteMergedBranch deletes the branch Scribe pushed for src's pull
// request once it is merged (a branch holding someone else's unmerged
// commit is kept). A failure is logged, not returned: the next proposal
// moves the branch anyway.
func (p *Publisher) deleteMergedBranch(ctx context.Context, t *Target, src scribev1.ObjectIdentity, head string) {
	opts, err := p.forgeFor(ctx, t)
	if err == nil {
		res, derr := p.Git.DeleteProposalBranch(ctx, *t.GitOpts, opts, src, head)
		if derr == nil {
			log.FromContext(ctx).V(1).Info("pull request branch after the merge", "result", string(res))
			return
		}
		err = derr
	}
	log.FromContext(ctx).Info("could not delete the merged pull request branch", "error", err.Error())
}
