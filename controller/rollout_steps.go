package controller

// The step arithmetic of a rollout: what a Workload's spec and status say
// about its steps, traffic, pauses, warm-up and drained versions. Pure
// functions of the Workload, used by DecideRollout (rollout.go) and the
// reconciler.

import (
	"fmt"
	"strings"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func analysisInterval(w *scribev1.Workload) time.Duration {
	if a := w.Spec.Rollout; a != nil && a.Analysis != nil && a.Analysis.Interval != nil && a.Analysis.Interval.Duration > 0 {
		return a.Analysis.Interval.Duration
	}
	return 30 * time.Second
}

// steps are the rollout's steps as weights of the new version: canary uses
// spec.rollout.steps; blueGreen runs the new version dark (weight 0), then
// switches; rolling switches at once.
func steps(w *scribev1.Workload) []scribev1.RolloutStep {
	ro := w.Spec.Rollout
	if ro == nil {
		return []scribev1.RolloutStep{{Weight: 100}}
	}
	switch ro.Strategy {
	case scribev1.StrategyBlueGreen:
		var p *scribev1.RolloutPause
		if len(ro.Steps) > 0 {
			p = ro.Steps[0].Pause
		}
		return []scribev1.RolloutStep{{Weight: 0, Pause: p}, {Weight: 100}}
	case scribev1.StrategyRolling:
		return []scribev1.RolloutStep{{Weight: 100}}
	}
	if len(ro.Steps) == 0 {
		return []scribev1.RolloutStep{{Weight: 100}}
	}
	return ro.Steps
}

// warmsUp says a new canary first runs at weight 0 until its Deployment
// is available, as Argo Rollouts and Flagger scale a canary up before a
// router sends it traffic: otherwise the first step's share would reach
// pods that are not Ready yet. Blue-green starts at weight 0 anyway.
func warmsUp(w *scribev1.Workload) bool {
	ro := w.Spec.Rollout
	return ro != nil && (ro.Strategy == "" || ro.Strategy == scribev1.StrategyCanary) && steps(w)[0].Weight > 0
}

// warmUpTraffic is the warm-up's traffic: the canary at weight 0.
func warmUpTraffic(w *scribev1.Workload) []scribev1.VersionWeight {
	return []scribev1.VersionWeight{{Version: w.Status.StableVersion, Weight: 100}, {Version: w.Status.CanaryVersion, Weight: 0}}
}

// warming says the intent is a canary's warm-up.
func warming(w *scribev1.Workload) bool {
	st := &w.Status
	return warmsUp(w) && st.CanaryVersion != "" && st.StableVersion != "" && st.Step == 0 && sameTraffic(st.Traffic, warmUpTraffic(w))
}

// stepTraffic is the traffic of step i: the canary's weight and the rest
// to the stable version; all to the canary for rolling.
func stepTraffic(w *scribev1.Workload, i int) []scribev1.VersionWeight {
	s := steps(w)[i]
	if w.Spec.Rollout != nil && w.Spec.Rollout.Strategy == scribev1.StrategyRolling {
		return []scribev1.VersionWeight{{Version: w.Status.CanaryVersion, Weight: 100}}
	}
	return []scribev1.VersionWeight{{Version: w.Status.StableVersion, Weight: 100 - s.Weight}, {Version: w.Status.CanaryVersion, Weight: s.Weight}}
}

// pause is how long step holds once applied and healthy; indefinite
// says it holds until promoted (`pause: {}`). A step whose pause a
// promote request lifted (status.promotedStep) does not hold.
func pause(w *scribev1.Workload, step int32) (d time.Duration, indefinite bool) {
	s := steps(w)
	if step < 0 || int(step) >= len(s) || s[step].Pause == nil || pauseLifted(w, step) {
		return 0, false
	}
	if s[step].Pause.Duration == nil {
		return 0, true
	}
	return s[step].Pause.Duration.Duration, false
}

// pauseLifted says a promote request lifted step's pause.
func pauseLifted(w *scribev1.Workload, step int32) bool {
	return w.Status.PromotedStep != nil && *w.Status.PromotedStep == step
}

// gracePeriod is how long a drained version stays deployed.
func gracePeriod(w *scribev1.Workload) time.Duration {
	if d := w.Spec.Decommission; d != nil && d.GracePeriod != nil {
		return d.GracePeriod.Duration
	}
	return 10 * time.Minute
}

// renderedVersions are the versions the render keeps: the stable one, the
// one rolling out, and every other version until its drain has lasted the
// grace period. A version removed from the output is decommissioned: the
// applier prunes its Deployment.
func renderedVersions(w *scribev1.Workload, now time.Time) map[string]bool {
	st := &w.Status
	keep := map[string]bool{}
	drained := st.DrainStartedAt != nil && now.Sub(st.DrainStartedAt.Time) >= gracePeriod(w) && st.StableVersion != ""
	for _, v := range w.Spec.Versions {
		if !drained || v.Name == st.StableVersion || v.Name == st.CanaryVersion {
			keep[v.Name] = true
		}
	}
	newest := w.Spec.Versions[len(w.Spec.Versions)-1].Name
	if newest != st.RolledBackVersion {
		keep[newest] = true // a version about to roll out
	}
	return keep
}

// decommissionDue says how long until drained versions leave the output,
// and whether any are still rendered.
func decommissionDue(w *scribev1.Workload, now time.Time) (time.Duration, bool) {
	st := &w.Status
	if st.DrainStartedAt == nil || st.StableVersion == "" {
		return 0, false
	}
	if len(renderedVersions(w, now)) <= 1 {
		return 0, false
	}
	wait := gracePeriod(w) - now.Sub(st.DrainStartedAt.Time)
	if wait < 0 {
		wait = time.Millisecond // due now: the next pass renders without them
	}
	return wait, true
}

// stepEvidence describes the step that held until now, for the next
// step's pull request and commit.
func stepEvidence(w *scribev1.Workload, now time.Time) string {
	st := &w.Status
	var b strings.Builder
	fmt.Fprintf(&b, "Step %d (%s) was applied at %s", st.Step+1, fmtTraffic(st.Traffic), shortRev(st.Revision))
	if st.StepHealthyAt != nil {
		fmt.Fprintf(&b, " and healthy from %s to %s", st.StepHealthyAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	b.WriteString(".")
	if pr := st.PullRequest; pr != nil && pr.Number > 0 {
		fmt.Fprintf(&b, " It was merged through pull request #%d (%s).", pr.Number, pr.URL)
	}
	for _, c := range st.Checks {
		mark := "passed"
		switch {
		case c.Inconclusive:
			mark = "inconclusive"
		case !c.Passed:
			mark = "FAILED"
		}
		fmt.Fprintf(&b, "\n- check %s %s: %s", c.Name, mark, c.Message)
	}
	return b.String()
}

func hasVersion(w *scribev1.Workload, v string) bool {
	for _, x := range w.Spec.Versions {
		if x.Name == v {
			return true
		}
	}
	return false
}

func sameTraffic(a, b []scribev1.VersionWeight) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
