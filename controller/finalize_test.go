package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// TestARevokedGrantStillRemovesADeletedWorkload: a Workload committed
// while a TenantPolicy granted its Repository a destination is deleted
// after the platform deleted that policy. Its Repository is refused
// (NotPermitted), yet the removal is committed, main holds none of its
// files, and once Flux prunes its Kustomization its finalizer goes: a
// revocation never keeps a deleted custom resource's files in Git, nor
// the custom resource, forever.
func TestARevokedGrantStillRemovesADeletedWorkload(t *testing.T) {
	f := newFixture(t)
	ctx := f.ctx()
	f.repo.Spec.AllowedNamespaces = []string{"team-a-db"}
	policy := f.grant(t, scribev1.TenantPolicySpec{DestinationNamespaces: []string{"team-a-db"}})
	if err := f.e.c.Create(ctx, f.repo); err != nil {
		t.Fatal(err)
	}
	w := workload(f.ns, "v1")
	w.Spec.Rollout = nil
	if err := f.e.c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	startControllerWith(t, f.e, f.ns, controller.Options{Poll: 150 * time.Millisecond, CommitInterval: -1})
	first := f.waitWorkload(t, "the first commit", func(w *scribev1.Workload) bool { return w.Status.Revision != "" }).Status.Revision
	f.playFlux(t, kustomizationName("Workload", f.ns, "web"), first, true, "", "")

	// The platform revokes the grant: the Repository now asks for more
	// than its namespace may have.
	if err := f.e.c.Delete(ctx, policy); err != nil {
		t.Fatal(err)
	}
	waitRepositoryRefused(t, f, "default", controller.ReasonNotPermitted, "spec.allowedNamespaces[0]")

	if err := f.e.c.Delete(ctx, f.workload(t)); err != nil {
		t.Fatal(err)
	}
	removal := f.waitWorkload(t, "the removal commit despite the revoked grant", func(w *scribev1.Workload) bool {
		return w.Status.Phase == scribev1.WorkloadDeleting && w.Status.Revision != first
	}).Status.Revision
	f.checkOnlyCommits(t, "web", first, removal)

	// Flux prunes: the finalizer goes.
	f.deleteKustomization(t, kustomizationName("Workload", f.ns, "web"))
	waitFor(t, "the Workload gone", func() (bool, string) {
		err := f.e.c.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "web"}, &scribev1.Workload{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
}

// TestDeletingAWorkloadClosesItsOpenPullRequest: a Workload promoted by
// pull request is deleted while its first pull request is open. Scribe
// closes it, saying why, before it publishes the removal: merged later,
// it would put the deleted Workload's files back on main.
func TestDeletingAWorkloadClosesItsOpenPullRequest(t *testing.T) {
	f := newFixture(t)
	gh, prs := f.githubForPullRequests(t)
	f.repo.Spec.Git.PullRequest = prs
	f.startWithRepository(t)
	w := workload(f.ns, "v1")
	w.Spec.Rollout.Promotion = scribev1.PromotionPullRequest
	if err := f.e.c.Create(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
	open := f.waitWorkload(t, "v1 proposed", func(w *scribev1.Workload) bool { return w.Status.PullRequest != nil }).Status.PullRequest.Number

	if err := f.e.c.Delete(f.ctx(), f.workload(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted Workload's pull request closed", func() (bool, string) {
		for _, pr := range gh.PullRequests() {
			if pr.Number == open {
				return pr.State == "closed" && strings.HasPrefix(pr.Body, "Closed by Scribe: ") && strings.Contains(pr.Body, "was deleted"),
					fmt.Sprintf("#%d %s: %q", pr.Number, pr.State, pr.Body)
			}
		}
		return false, "no such pull request"
	})
	waitFor(t, "the Workload gone", func() (bool, string) {
		err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, &scribev1.Workload{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
	head := f.head(t)
	dir := "clusters/dev/" + f.ns + "/workload/web"
	if files := f.filesAt(t, head, dir); len(files) > 0 {
		t.Fatalf("main (%s) holds files of the deleted Workload: %v", head, files)
	}
}

// TestWorkloadsDeletedRightAfterCreationLeaveNothingOnMain: Workloads
// deleted right after they are created, while the controller works on
// them, leave none of their files (nor their sync files) on main once
// they are gone: whatever was committed of them before the deletion is
// followed by their removal, and nothing after it.
func TestWorkloadsDeletedRightAfterCreationLeaveNothingOnMain(t *testing.T) {
	f := newFixture(t)
	f.startWithRepository(t)
	const n = 12
	for i := range n {
		w := workload(f.ns, "v1")
		w.Name = fmt.Sprintf("web-%d", i)
		w.Spec.Rollout = nil
		if err := f.e.c.Create(f.ctx(), w); err != nil {
			t.Fatal(err)
		}
		if i%3 == 2 {
			// Some get a moment, so their first commit may land first.
			time.Sleep(time.Duration(i*20) * time.Millisecond)
		}
		if err := f.e.c.Delete(f.ctx(), w); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every Workload gone", func() (bool, string) {
		list := &scribev1.WorkloadList{}
		if err := f.e.c.List(f.ctx(), list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("%d left", len(list.Items))
	})
	// A later Workload's commit comes after anything still in flight.
	sentinel := workload(f.ns, "v1")
	sentinel.Name = "sentinel"
	sentinel.Spec.Rollout = nil
	if err := f.e.c.Create(f.ctx(), sentinel); err != nil {
		t.Fatal(err)
	}
	f.waitWorkloadNamed(t, "sentinel", "the sentinel's commit", func(w *scribev1.Workload) bool { return w.Status.Revision != "" })
	head := f.head(t)
	for i := range n {
		dir := fmt.Sprintf("clusters/dev/%s/workload/web-%d", f.ns, i)
		if files := f.filesAt(t, head, dir); len(files) > 0 || f.fileAt(t, head, dir+".sync.yaml") != "" {
			t.Errorf("main (%s) holds files of web-%d, deleted right after its creation: %v", head, i, files)
			dir := t.TempDir()
			publishtest.Git(t, "", "clone", "--quiet", f.url, dir)
			t.Logf("history:\n%s", publishtest.Git(t, dir, "log", "--format=%h %s%n%b", "--", fmt.Sprintf("clusters/dev/%s/workload/web-%d", f.ns, i)))
		}
	}
}
