package controller

import scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"

// RolloutSteps are the steps a Workload's rollout walks, as the controller
// decides them from spec.rollout (strategy and steps): what status.step
// indexes. For readers of status, such as scribe get.
func RolloutSteps(w *scribev1.Workload) []scribev1.RolloutStep { return steps(w) }

// Warming says the Workload's status is a canary's warm-up: the canary at
// weight 0 until available, before the first step.
func Warming(w *scribev1.Workload) bool { return warming(w) }
