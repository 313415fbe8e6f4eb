package controller_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish/forge/forgetest"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// warmUpByPullRequest plays a new canary's warm-up in pull-request mode:
// its pull request (not previous) is merged and applied, the canary's
// Deployment available. It returns the pull request's number.
func (f *fixture) warmUpByPullRequest(t *testing.T, gh *forgetest.GitHub, branch string, previous int) int {
	t.Helper()
	got := f.waitWorkload(t, "the warm-up at weight 0 proposed", func(w *scribev1.Workload) bool {
		return w.Status.PullRequest != nil && w.Status.PullRequest.Number != previous && canaryWeight(w) == 0
	})
	for _, pr := range gh.PullRequests() {
		if pr.Number == got.Status.PullRequest.Number && !strings.Contains(pr.Body, "deployed at weight 0 until it is available") {
			t.Errorf("the warm-up's pull request does not say what it does:\n%s", pr.Body)
		}
	}
	merge := f.mergePR(t, gh, got.Status.PullRequest.Number, branch)
	f.waitWorkload(t, "the warm-up merge recognised", func(w *scribev1.Workload) bool { return w.Status.Revision == merge })
	f.deploymentReady(t, "web-"+got.Status.CanaryVersion, true)
	f.playFlux(t, kustomizationName("Workload", f.ns, "web"), merge, true, "", "")
	return got.Status.PullRequest.Number
}

// githubForPullRequests starts a fake GitHub (GitHub's REST wire format)
// and the Secret with its token, allowed for its URL, and returns the fake
// and the spec.git.pullRequest that names them.
func (f *fixture) githubForPullRequests(t *testing.T) (*forgetest.GitHub, *scribev1.PullRequestSpec) {
	t.Helper()
	gh := forgetest.NewGitHub(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: f.ns, Annotations: map[string]string{scribev1.AllowedURLsAnnotation: gh.APIURL()}}, Data: map[string][]byte{"token": []byte(gh.Token())}}
	if err := f.e.c.Create(f.ctx(), secret); err != nil {
		t.Fatal(err)
	}
	return gh, &scribev1.PullRequestSpec{Provider: "github", APIURL: gh.APIURL(), SecretRef: scribev1.LocalObjectReference{Name: "github"}}
}

// stableV1ByPullRequest creates the Workload web at v1 promoted by pull
// request, merges its pull request, plays Flux applying it healthy, and
// returns the pull request's number once v1 is Healthy.
func (f *fixture) stableV1ByPullRequest(t *testing.T, gh *forgetest.GitHub, edit func(*scribev1.Workload)) int {
	t.Helper()
	w := workload(f.ns, "v1")
	w.Spec.Rollout.Promotion = scribev1.PromotionPullRequest
	if edit != nil {
		edit(w)
	}
	if err := f.e.c.Create(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
	got := f.waitWorkload(t, "v1 proposed", func(w *scribev1.Workload) bool { return w.Status.PullRequest != nil })
	merge := f.mergePR(t, gh, got.Status.PullRequest.Number, "scribe/"+f.ns+"/workload/web")
	f.waitWorkload(t, "v1 merge recognised", func(w *scribev1.Workload) bool { return w.Status.Revision == merge })
	f.deploymentReady(t, "web-v1", true)
	f.playFlux(t, kustomizationName("Workload", f.ns, "web"), merge, true, "", "")
	f.waitWorkload(t, "v1 healthy", func(w *scribev1.Workload) bool { return w.Status.Phase == scribev1.WorkloadHealthy })
	return got.Status.PullRequest.Number
}

// step1ByPullRequest waits for v2's first step to be proposed after the
// warm-up's pull request warmPR, merges it and waits until the merge is
// recognised; it returns the pull request's number and the merge commit.
func (f *fixture) step1ByPullRequest(t *testing.T, gh *forgetest.GitHub, branch string, warmPR int) (int, string) {
	t.Helper()
	got := f.waitWorkload(t, "step 1 proposed", func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.PullRequest != nil && w.Status.PullRequest.Number != warmPR && canaryWeight(w) > 0
	})
	number := got.Status.PullRequest.Number
	merge := f.mergePR(t, gh, number, branch)
	f.waitWorkload(t, "step 1 merge recognised", func(w *scribev1.Workload) bool { return w.Status.Revision == merge })
	return number, merge
}

// mergePR merges Scribe's branch into main on the git server as a person
// pressing "Merge" does, tells the fake GitHub, and returns the merge commit.
func (f *fixture) mergePR(t *testing.T, gh *forgetest.GitHub, number int, branch string) string {
	t.Helper()
	work := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", f.url, work)
	publishtest.Git(t, work, "fetch", "--quiet", "origin", branch)
	publishtest.Git(t, work, "merge", "--quiet", "--no-ff", "-m", "Merge pull request", "FETCH_HEAD")
	publishtest.Git(t, work, "push", "--quiet", "origin", "main")
	sha := publishtest.Git(t, work, "rev-parse", "HEAD")
	gh.Merge(number, sha)
	return sha
}

func TestWorkloadPullRequestPromotionWaitsForEachMergeAndCarriesEvidence(t *testing.T) {
	f := newFixture(t)
	gh, spec := f.githubForPullRequests(t)
	f.repo.Spec.Git.PullRequest = spec
	f.startWithRepository(t)
	initial := f.head(t)
	w := workload(f.ns, "v1")
	w.Spec.Rollout.Promotion = "pullRequest"
	if err := f.e.c.Create(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
	ks := kustomizationName("Workload", f.ns, "web")
	branch := "scribe/" + f.ns + "/workload/web"

	// The first render is proposed, not committed to main.
	got := f.waitWorkload(t, "a pull request", func(w *scribev1.Workload) bool { return w.Status.PullRequest != nil })
	if head := f.head(t); head != initial {
		t.Fatalf("main moved to %s before any merge", head)
	}
	prs := gh.PullRequests()
	if len(prs) != 1 || prs[0].Head != branch || prs[0].Base != "main" {
		t.Fatalf("pull requests = %+v", prs)
	}
	merge := f.mergePR(t, gh, got.Status.PullRequest.Number, branch)
	got = f.waitWorkload(t, "the merge recognised", func(w *scribev1.Workload) bool { return w.Status.Revision == merge })
	f.deploymentReady(t, "web-v1", true)
	f.playFlux(t, ks, merge, true, "", "")
	f.waitWorkload(t, "v1 healthy", func(w *scribev1.Workload) bool { return w.Status.Phase == scribev1.WorkloadHealthy })

	// A new version: its warm-up at weight 0 and step 1 are pull requests
	// too, and step 2 waits for them.
	f.addVersion(t, "v2", nil)
	warmPR := f.warmUpByPullRequest(t, gh, branch, got.Status.PullRequest.Number)
	got = f.waitWorkload(t, "step 1 proposed", func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.PullRequest != nil && w.Status.PullRequest.Number != warmPR && canaryWeight(w) > 0
	})
	step1PR := got.Status.PullRequest.Number
	merge = f.mergePR(t, gh, step1PR, branch)
	if r := f.routeWeights(t, merge); r != "web-v1=90,web-v2=10" {
		t.Fatalf("step 1 merged routes %q", r)
	}
	f.waitWorkload(t, "step 1 merge recognised", func(w *scribev1.Workload) bool { return w.Status.Revision == merge })
	f.deploymentReady(t, "web-v2", true)
	f.playFlux(t, ks, merge, true, "", "")
	got = f.waitWorkload(t, "step 2 proposed", func(w *scribev1.Workload) bool {
		return w.Status.Step == 1 && w.Status.PullRequest != nil && w.Status.PullRequest.Number != step1PR
	})
	var body string
	for _, pr := range gh.PullRequests() {
		if pr.Number == got.Status.PullRequest.Number {
			body = pr.Body
		}
	}
	for _, want := range []string{"### Evidence", "Step 1 (v1=90%,v2=10%) was applied at " + merge[:12], "healthy from", "| changed | `HTTPRoute " + f.ns + "/web` | `clusters/dev/" + f.ns + "/workload/web/httproute-web.yaml` |", "HTTPRoute web: web-v1 90 → 50", "Rolling out **v2** (canary), step 2 of 3: v1=50%,v2=50%."} {
		if !strings.Contains(body, want) {
			t.Errorf("step 2's pull request body lacks %q:\n%s", want, body)
		}
	}
	if head := f.head(t); head != merge {
		t.Fatalf("main moved to %s without a merge", head)
	}
}
