package controller_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// TestWorkloadAskingForPullRequestsFromARepositoryWithoutThemIsStalled:
// promotion or rollback pullRequest on a Workload whose Repository has no
// spec.git.pullRequest is Stalled, the reason naming both fields, and
// nothing is committed (before, the review was skipped: every step went
// straight to the branch).
func TestWorkloadAskingForPullRequestsFromARepositoryWithoutThemIsStalled(t *testing.T) {
	f := newFixture(t)
	f.startWithRepository(t)
	head := f.head(t)
	for _, tc := range []struct {
		name  string
		set   func(r *scribev1.Rollout)
		field string
	}{
		{"promotion", func(r *scribev1.Rollout) { r.Promotion = scribev1.PromotionPullRequest }, "spec.rollout.promotion"},
		{"rollback", func(r *scribev1.Rollout) { r.Rollback = scribev1.RollbackPullRequest }, "spec.rollout.rollback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(f.ns, "v1")
			w.Name = "web-" + tc.name
			tc.set(w.Spec.Rollout)
			if err := f.e.c.Create(f.ctx(), w); err != nil {
				t.Fatal(err)
			}
			f.waitWorkloadNamed(t, w.Name, "Stalled naming both fields", func(w *scribev1.Workload) bool {
				ready := apimeta.FindStatusCondition(w.Status.Conditions, scribev1.ReadyCondition)
				return apimeta.IsStatusConditionTrue(w.Status.Conditions, scribev1.StalledCondition) &&
					ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == controller.ReasonPullRequestsNotConfigured &&
					strings.Contains(ready.Message, tc.field+" is pullRequest") && strings.Contains(ready.Message, "spec.git.pullRequest") &&
					strings.Contains(ready.Message, "Repository "+f.ns+"/default")
			})
		})
	}
	time.Sleep(time.Second)
	if now := f.head(t); now != head {
		t.Fatalf("a Workload asking for pull requests was committed directly: main moved from %s to %s", head, now)
	}
}

// TestWorkloadRollbackInPullRequestMode: with promotion pullRequest, a
// rollback is committed to main at once by default (rollback: direct), its
// message saying why, with no pull request; with rollback: pullRequest it
// is proposed like a step, main does not move until the merge, and the
// merge is what the Workload records.
func TestWorkloadRollbackInPullRequestMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode scribev1.RollbackMode
	}{{"direct", ""}, {"pullrequest", scribev1.RollbackPullRequest}} {
		mode := tc.mode
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			gh, prs := f.githubForPullRequests(t)
			f.repo.Spec.Git.PullRequest = prs
			f.startWithRepository(t)
			ks := kustomizationName("Workload", f.ns, "web")
			branch := "scribe/" + f.ns + "/workload/web"

			// v1 and step 1 of v2 go through merged pull requests.
			v1PR := f.stableV1ByPullRequest(t, gh, func(w *scribev1.Workload) { w.Spec.Rollout.Rollback = mode })
			f.addVersion(t, "v2", func(w *scribev1.Workload) {
				w.Spec.Rollout.Steps[0].Pause = scribev1.PauseFor(time.Hour)
				w.Spec.Rollout.Analysis = &scribev1.Analysis{
					Interval: &metav1.Duration{Duration: 200 * time.Millisecond}, Threshold: 2,
					Checks: []scribev1.Check{{Name: "restarts", Type: "restarts", Max: "1"}},
				}
			})
			warmPR := f.warmUpByPullRequest(t, gh, branch, v1PR)
			step1PR, step1 := f.step1ByPullRequest(t, gh, branch, warmPR)

			// v2 runs but its pod keeps crashing: the checks fail.
			f.deploymentReady(t, "web-v2", true)
			f.crashingPod(t, "web-v2")
			f.playFlux(t, ks, step1, true, "", "")

			if mode == scribev1.RollbackPullRequest {
				got := f.waitWorkload(t, "rollback proposed", func(w *scribev1.Workload) bool {
					return w.Status.Phase == scribev1.WorkloadRolledBack && w.Status.PullRequest != nil && w.Status.PullRequest.Number != step1PR
				})
				time.Sleep(time.Second)
				if head := f.head(t); head != step1 {
					t.Fatalf("main moved to %s before the rollback's pull request was merged", head)
				}
				merge := f.mergePR(t, gh, got.Status.PullRequest.Number, branch)
				if r := f.routeWeights(t, merge); r != "web-v1=100,web-v2=0" {
					t.Fatalf("rollback merged routes %q", r)
				}
				f.waitWorkload(t, "rollback merge recognised", func(w *scribev1.Workload) bool { return w.Status.Revision == merge })
				return
			}
			got := f.waitWorkload(t, "rollback committed", func(w *scribev1.Workload) bool {
				return w.Status.Phase == scribev1.WorkloadRolledBack && w.Status.Revision != "" && w.Status.Revision != step1
			})
			rollback := got.Status.Revision
			if head := f.head(t); head != rollback {
				t.Fatalf("main is at %s, not at the rollback %s", head, rollback)
			}
			if r := f.routeWeights(t, rollback); r != "web-v1=100,web-v2=0" {
				t.Fatalf("rollback commit routes %q", r)
			}
			if msg, _ := f.commitMessage(t, rollback); !strings.Contains(msg, "rollback of v2") || !strings.Contains(msg, "7 restarts") {
				t.Errorf("rollback commit message lacks the reason:\n%s", msg)
			}
			for _, pr := range gh.PullRequests() {
				if pr.Number != v1PR && pr.Number != step1PR && pr.Number > step1PR {
					t.Errorf("a direct rollback opened pull request #%d", pr.Number)
				}
			}
			if got.Status.PullRequest != nil {
				t.Errorf("status records pull request %+v for a direct rollback", got.Status.PullRequest)
			}
		})
	}
}

// waitWorkloadNamed is waitWorkload for the Workload name.
func (f *fixture) waitWorkloadNamed(t *testing.T, name, what string, cond func(w *scribev1.Workload) bool) *scribev1.Workload {
	t.Helper()
	var last *scribev1.Workload
	waitFor(t, what, func() (bool, string) {
		w := &scribev1.Workload{}
		if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: name}, w); err != nil {
			return false, err.Error()
		}
		last = w
		return cond(w), describe(w)
	})
	return last
}

// TestAbortByDirectRollbackClosesTheOpenPullRequest: in pull-request
// mode, `scribe abort` while the next step's pull request is open commits
// the rollback straight to main (spec.rollout.rollback direct) and closes
// that pull request, saying why: merged later, it would bring back the
// aborted canary.
func TestAbortByDirectRollbackClosesTheOpenPullRequest(t *testing.T) {
	f := newFixture(t)
	gh, prs := f.githubForPullRequests(t)
	f.repo.Spec.Git.PullRequest = prs
	f.startWithRepository(t)
	ks := kustomizationName("Workload", f.ns, "web")
	branch := "scribe/" + f.ns + "/workload/web"

	v1PR := f.stableV1ByPullRequest(t, gh, nil)
	f.addVersion(t, "v2", func(w *scribev1.Workload) { w.Spec.Rollout.Steps[0].Pause = &scribev1.RolloutPause{} })
	warmPR := f.warmUpByPullRequest(t, gh, branch, v1PR)
	step1PR, step1 := f.step1ByPullRequest(t, gh, branch, warmPR)
	f.playFlux(t, ks, step1, true, "", "")

	// Promoted past its pause, step 2 is proposed and waits for its merge.
	f.request(t, map[string]string{scribev1.PromoteAnnotation: "2026-11-27T21:00:00Z"})
	got := f.waitWorkload(t, "step 2 proposed", func(w *scribev1.Workload) bool {
		return w.Status.PullRequest != nil && w.Status.PullRequest.Number != step1PR && w.Status.PullRequest.State == "open"
	})
	step2PR := got.Status.PullRequest.Number

	f.request(t, map[string]string{scribev1.AbortAnnotation: "2026-11-27T21:01:00Z",
		scribev1.RequestedByAnnotation: "jane", scribev1.RequestReasonAnnotation: "p99 doubled"})
	got = f.waitWorkload(t, "rollback committed", func(w *scribev1.Workload) bool {
		return w.Status.Phase == scribev1.WorkloadRolledBack && w.Status.Revision != "" && w.Status.Revision != step1
	})
	if head := f.head(t); head != got.Status.Revision {
		t.Fatalf("main is at %s, not at the rollback %s", head, got.Status.Revision)
	}
	waitFor(t, "step 2's pull request closed", func() (bool, string) {
		for _, pr := range gh.PullRequests() {
			if pr.Number == step2PR {
				return pr.State == "closed" && strings.HasPrefix(pr.Body, "Closed by Scribe: the rollback of v2 to v1 was committed directly to main as "+got.Status.Revision[:12]),
					fmt.Sprintf("#%d %s: %q", pr.Number, pr.State, pr.Body)
			}
		}
		return false, "no such pull request"
	})
}

// request writes manual request annotations on the Workload web, as the
// CLI does.
func (f *fixture) request(t *testing.T, ann map[string]string) {
	t.Helper()
	w := &scribev1.Workload{}
	if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, w); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(w.DeepCopy())
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	maps.Copy(w.Annotations, ann)
	if err := f.e.c.Patch(f.ctx(), w, patch); err != nil {
		t.Fatal(err)
	}
}
