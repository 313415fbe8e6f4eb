package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// newGiteaNamespace creates ns with the Secrets and the "default"
// Repository of the experiments repository on Gitea: Scribe pushes with
// the user's password and opens pull requests with its token; Flux syncs
// through the GitRepository g.FluxSource.
func newGiteaNamespace(t *testing.T, s *Stack, g *Gitea, ns string) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitea-git", Namespace: ns, Annotations: map[string]string{scribev1.AllowedURLsAnnotation: g.URL + "/" + g.Owner}}, Data: map[string][]byte{"username": []byte(g.User), "password": []byte(g.Password)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitea-api", Namespace: ns, Annotations: map[string]string{scribev1.AllowedURLsAnnotation: g.URL}}, Data: map[string][]byte{"token": []byte(g.Token)}},
		&scribev1.Repository{
			ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
			Spec: scribev1.RepositorySpec{
				Git: &scribev1.GitRepositorySpec{
					URL: g.RepoURL, Branch: "main", Path: SyncPath,
					SecretRef:   &scribev1.LocalObjectReference{Name: "gitea-git"},
					PullRequest: &scribev1.PullRequestSpec{Provider: "gitea", SecretRef: scribev1.LocalObjectReference{Name: "gitea-api"}},
				},
				Applier: scribev1.ApplierSpec{Kind: "Flux", Namespace: "flux-system", Name: g.FluxSource},
			},
		},
	} {
		if err := s.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// prLoop is a Workload promoted by pull requests on Gitea.
type prLoop struct {
	t      *testing.T
	s      *Stack
	g      *Gitea
	ns     string
	branch string
}

func (l *prLoop) get() *scribev1.Workload {
	got := &scribev1.Workload{}
	_ = l.s.Client.Get(context.Background(), types.NamespacedName{Namespace: l.ns, Name: "web"}, got)
	return got
}

func (l *prLoop) describe() string {
	w := l.get()
	pr := "none"
	if p := w.Status.PullRequest; p != nil {
		pr = fmt.Sprintf("#%d %s head %.12s", p.Number, p.State, p.Head)
	}
	return describe(w) + " pr=" + pr
}

// waitPR waits for the Workload to record an open pull request that cond
// accepts, checks that the base branch is still at mainAt (nothing reached
// it before the merge) and that Gitea shows exactly that one pull request
// open from Scribe's branch, and returns it as Gitea reports it.
func (l *prLoop) waitPR(what, mainAt string, cond func(w *scribev1.Workload) bool) GiteaPull {
	l.t.Helper()
	ctx := context.Background()
	poll(l.t, 3*time.Minute, what, func() (bool, string) {
		w := l.get()
		return w.Status.PullRequest != nil && w.Status.PullRequest.State == "open" && cond(w), l.describe()
	})
	if head, err := l.g.BranchSHA(ctx, "main"); err != nil || head != mainAt {
		l.t.Fatalf("%s: main is at %s (%v), want %s: something reached the branch before a merge", what, head, err, mainAt)
	}
	open, err := l.g.Pulls(ctx, "open")
	if err != nil {
		l.t.Fatal(err)
	}
	if len(open) != 1 || open[0].Head.Ref != l.branch || open[0].Base.Ref != "main" {
		l.t.Fatalf("%s: open pull requests on Gitea = %+v", what, open)
	}
	if n := l.get().Status.PullRequest.Number; open[0].Number != n {
		l.t.Fatalf("%s: Gitea's open pull request is #%d, the Workload records #%d", what, open[0].Number, n)
	}
	return open[0]
}

// merge merges the pull request through Gitea's API and waits for Scribe
// to recognise the merge commit, Flux to apply exactly that commit, and
// Scribe to delete its branch; it returns the merge commit.
func (l *prLoop) merge(number int) string {
	l.t.Helper()
	ctx := context.Background()
	start := time.Now()
	merge, err := l.g.Merge(ctx, number)
	if err != nil {
		l.t.Fatal(err)
	}
	ks := &kustomizev1.Kustomization{}
	// Scribe recognises the merge (status.revision is the merge commit)
	// and may move on to the next step before the poll sees both at once.
	recognised := false
	poll(l.t, 3*time.Minute, fmt.Sprintf("Flux to apply the merge commit %.12s of #%d", merge, number), func() (bool, string) {
		w := l.get()
		if w.Status.Revision == merge || (w.Status.PullRequest != nil && w.Status.PullRequest.Number > number) {
			recognised = true
		}
		if err := l.s.Client.Get(ctx, types.NamespacedName{Namespace: "flux-system", Name: "workload." + l.ns + ".web"}, ks); err != nil {
			return false, err.Error() + "; " + l.describe()
		}
		return ks.Status.LastAppliedRevision == "main@sha1:"+merge && recognised,
			"applied " + ks.Status.LastAppliedRevision + "; " + l.describe()
	})
	l.t.Logf("pull request #%d merged as %.12s; Flux applied it %s after the merge call", number, merge, time.Since(start).Round(time.Millisecond))
	// The branch is gone, unless Scribe already pushed the next step's
	// commit to it (a newer pull request is open at that head).
	poll(l.t, time.Minute, "Scribe to delete its merged branch", func() (bool, string) {
		sha, err := l.g.BranchSHA(ctx, l.branch)
		next := l.get().Status.PullRequest
		reused := next != nil && next.Number > number && next.Head == sha
		return err == nil && (sha == "" || reused), fmt.Sprintf("branch %s at %q (%v)", l.branch, sha, err)
	})
	return merge
}

func (l *prLoop) condition(typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(l.get().Status.Conditions, typ)
}

func TestLoopPullRequestPromotionThroughGitea(t *testing.T) {
	t.Parallel()
	skipWithoutLoop(t)
	s := Start(t)
	g := s.StartGitea(t)
	ns := "prs"
	newGiteaNamespace(t, s, g, ns)
	startScribe(t, s)
	ctx := context.Background()
	l := &prLoop{t: t, s: s, g: g, ns: ns, branch: "scribe/" + ns + "/workload/web"}
	mainAt, err := g.BranchSHA(ctx, "main")
	if err != nil || mainAt == "" {
		t.Fatalf("main on Gitea: %q, %v", mainAt, err)
	}

	w := canaryWorkload(ns)
	w.Spec.Rollout.Steps = []scribev1.RolloutStep{{Weight: 10}, {Weight: 100}}
	w.Spec.Rollout.Promotion = scribev1.PromotionPullRequest
	if err := s.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}

	// v1: one pull request, nothing on main until it is merged.
	pr := l.waitPR("v1's pull request", mainAt, func(*scribev1.Workload) bool { return true })
	for _, want := range []string{"First rollout of **v1**: v1=100%.", "| added | `Deployment prs/web-v1` |", "| added | `HTTPRoute prs/web` |", "_none yet: this is the first step_"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("v1's pull request body lacks %q:\n%s", want, pr.Body)
		}
	}
	mainAt = l.merge(pr.Number)
	poll(t, 3*time.Minute, "v1 healthy", func() (bool, string) {
		return l.get().Status.Phase == scribev1.WorkloadHealthy, l.describe()
	})
	if r := routeWeights(ctx, s, ns, "web"); r != "web-v1=100" {
		t.Fatalf("applied HTTPRoute routes %q", r)
	}

	// v2 first deploys at weight 0 (its warm-up), by pull request too.
	updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, webV2()) })
	v1PR := pr.Number
	pr = l.waitPR("v2's warm-up pull request", mainAt, func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.PullRequest.Number != v1PR
	})
	for _, want := range []string{"Rolling out **v2** (canary): deployed at weight 0 until it is available; step 1 of 2 (weight 10) follows.", "- HTTPRoute web: web-v2 - → 0", "| added | `Deployment prs/web-v2` |"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("v2's warm-up pull request body lacks %q:\n%s", want, pr.Body)
		}
	}
	warmPR := pr.Number
	mainAt = l.merge(pr.Number)

	// v2, step 1: proposed, not applied.
	pr = l.waitPR("step 1's pull request", mainAt, func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.PullRequest.Number != warmPR
	})
	for _, want := range []string{"Rolling out **v2** (canary), step 1 of 2: v1=90%,v2=10%.", "- HTTPRoute web: web-v1 100 → 90", "- HTTPRoute web: web-v2 0 → 10"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("step 1's pull request body lacks %q:\n%s", want, pr.Body)
		}
	}
	if r := routeWeights(ctx, s, ns, "web"); r != "web-v1=100,web-v2=0" {
		t.Fatalf("an unmerged step was applied: routes %q", r)
	}

	// Closed without merge: the rollout holds, with a clear condition.
	if err := g.SetPullState(ctx, pr.Number, "closed"); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "the closed pull request to hold the rollout", func() (bool, string) {
		c, r := l.condition(scribev1.StalledCondition), l.condition(scribev1.ReadyCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "PullRequestClosed" && r != nil && r.Status == metav1.ConditionFalse && r.Reason == "PullRequestClosed", l.describe()
	})
	if msg := l.condition(scribev1.ReadyCondition).Message; !strings.Contains(msg, fmt.Sprintf("#%d was closed without merging", pr.Number)) {
		t.Errorf("Ready message %q does not say the pull request was closed", msg)
	}
	if head, _ := g.BranchSHA(ctx, "main"); head != mainAt {
		t.Fatalf("main moved to %s after a close", head)
	}
	if st := l.get().Status; st.Step != 0 || st.CanaryVersion != "v2" {
		t.Fatalf("the rollout moved after a close: %s", l.describe())
	}

	// Reopened: Scribe waits for the merge again.
	if err := g.SetPullState(ctx, pr.Number, "open"); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "the reopened pull request awaited again", func() (bool, string) {
		r, c := l.condition(scribev1.ReadyCondition), l.condition(scribev1.StalledCondition)
		return r != nil && r.Reason == "AwaitingMerge" && c == nil, l.describe()
	})

	// New content at the same step (v2's image changed): the same pull
	// request, re-pushed with a lease, its body updated.
	oldHead := pr.Head.Sha
	updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions[1].Image = "ghcr.io/example/web:2.1" })
	pr = l.waitPR("step 1's pull request re-pushed", mainAt, func(w *scribev1.Workload) bool {
		return w.Status.PullRequest.Head != oldHead && w.Status.PullRequest.Number == pr.Number
	})
	if pr.Head.Sha == oldHead {
		t.Fatalf("Gitea's pull request #%d still has head %s", pr.Number, oldHead)
	}
	step1PR := pr.Number

	// Merged: Flux applies the merge commit, and step 2's pull request
	// carries step 1's evidence.
	merge := l.merge(pr.Number)
	if r := routeWeights(ctx, s, ns, "web"); r != "web-v1=90,web-v2=10" {
		t.Fatalf("step 1 applied routes %q", r)
	}
	mainAt = merge
	pr = l.waitPR("step 2's pull request", mainAt, func(w *scribev1.Workload) bool {
		return w.Status.Step == 1 && w.Status.PullRequest.Number != step1PR
	})
	for _, want := range []string{
		"Rolling out **v2** (canary), step 2 of 2: v1=0%,v2=100%.",
		"- HTTPRoute web: web-v1 90 → 0",
		"### Evidence of the previous step",
		"Step 1 (v1=90%,v2=10%) was applied at " + merge[:12] + " and healthy from",
	} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("step 2's pull request body lacks %q:\n%s", want, pr.Body)
		}
	}
	mainAt = l.merge(pr.Number)
	if r := routeWeights(ctx, s, ns, "web"); r != "web-v1=0,web-v2=100" {
		t.Fatalf("step 2 applied routes %q", r)
	}

	// The promotion: a pull request too when its render differs from the
	// last step's (nothing to propose otherwise: main already holds it).
	step2PR := pr.Number
	poll(t, 3*time.Minute, "the promotion proposed or applied", func() (bool, string) {
		w := l.get()
		proposed := w.Status.PullRequest != nil && w.Status.PullRequest.Number != step2PR && w.Status.PullRequest.State == "open"
		return w.Status.StableVersion == "v2" && (proposed || w.Status.Phase == scribev1.WorkloadHealthy), l.describe()
	})
	wantPRs := 4 // v1, v2's warm-up, step 1, step 2
	if w := l.get(); w.Status.Phase != scribev1.WorkloadHealthy {
		pr = l.waitPR("the promotion's pull request", mainAt, func(w *scribev1.Workload) bool { return w.Status.PullRequest.Number != step2PR })
		if !strings.Contains(pr.Body, "**v2** becomes the stable version") {
			t.Errorf("the promotion's body:\n%s", pr.Body)
		}
		l.merge(pr.Number)
		wantPRs++
	}
	poll(t, 3*time.Minute, "v2 stable and healthy", func() (bool, string) {
		w := l.get()
		return w.Status.StableVersion == "v2" && w.Status.Phase == scribev1.WorkloadHealthy, l.describe()
	})
	all, err := g.Pulls(ctx, "all")
	if err != nil {
		t.Fatal(err)
	}
	merged := 0
	for _, p := range all {
		if p.Merged {
			merged++
		}
	}
	if len(all) != wantPRs || merged != wantPRs {
		t.Errorf("Gitea holds %d pull requests, %d merged; want %d and %d", len(all), merged, wantPRs, wantPRs)
	}
}
