package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// laggingCache is the manager's client with a cache that lags behind for
// one Workload: once armed, the next read of it answers the copy the test
// gave (the object as the cache last saw it before its deletion), as an
// informer that has not caught up does; then reads go to the cache again.
type laggingCache struct {
	client.Client
	key types.NamespacedName

	mu    sync.Mutex
	stale *scribev1.Workload
	armed bool
	// reconciles is how many Workload reconciles had ended when the stale
	// read was answered (-1: not yet).
	reconciles float64
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if w, ok := obj.(*scribev1.Workload); ok && key == c.key {
		c.mu.Lock()
		armed := c.armed
		if armed {
			c.armed = false
			c.reconciles = workloadReconciles()
			c.stale.DeepCopyInto(w)
		}
		c.mu.Unlock()
		if armed {
			return nil
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// arm makes the next read of the Workload answer stale.
func (c *laggingCache) arm(stale *scribev1.Workload) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stale, c.armed, c.reconciles = stale.DeepCopy(), true, -1
}

// staleReconcileDone reports that the stale read was answered and a
// Workload reconcile ended since: the one that read it (the test has one
// Workload, whose reconciles do not overlap).
func (c *laggingCache) staleReconcileDone() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := workloadReconciles()
	return c.reconciles >= 0 && now > c.reconciles, fmt.Sprintf("stale read answered: %t; reconciles then %v, now %v", c.reconciles >= 0, c.reconciles, now)
}

// workloadReconciles is how many Workload reconciles ended in this
// process.
func workloadReconciles() float64 { return reconcileTotal("workload") }

// reconcileTotal is how many reconciles of the named controller ended in
// this process (controller-runtime's reconcile_total).
func reconcileTotal(name string) float64 {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	var n float64
	for _, mf := range families {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// startLagging runs the controller with a lagging cache for the Workload
// name.
func (f *fixture) startLagging(t *testing.T, name string) (*laggingCache, func()) {
	t.Helper()
	lc := &laggingCache{key: types.NamespacedName{Namespace: f.ns, Name: name}}
	newClient := func(cfg *rest.Config, opts client.Options) (client.Client, error) {
		c, err := client.New(cfg, opts)
		lc.Client = c
		return lc, err
	}
	stop, _ := startManager(t, f.e.cfg, cacheFor(f.ns), newClient, controller.Options{Poll: 150 * time.Millisecond, Concurrency: 2, CommitInterval: -1})
	return lc, stop
}

// TestNoCommitOfADeletedWorkloadLandsAfterItsRemoval: a Workload is
// changed and deleted while no controller runs. The controller publishes
// its removal; then its cache answers the Workload as it was before the
// deletion (changed, not being deleted), first in the process that
// published the removal, then in a new one that did not. Neither
// publishes the change: the only commits of the Workload are its first
// one and its removal, and none of its files is on main.
func TestNoCommitOfADeletedWorkloadLandsAfterItsRemoval(t *testing.T) {
	f := newFixture(t)
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	w := workload(f.ns, "v1")
	w.Spec.Rollout = nil
	_, stop := f.startLagging(t, "web")
	if err := f.e.c.Create(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
	first := f.waitWorkload(t, "the first commit", func(w *scribev1.Workload) bool { return w.Status.Revision != "" }).Status.Revision
	// Flux applied it: the removal waits for Flux to prune it.
	f.playFlux(t, kustomizationName("Workload", f.ns, "web"), first, true, "", "")
	stop()

	// Changed, then deleted, with no controller running.
	w = f.workload(t)
	w.Spec.Versions[0].Image = "ghcr.io/example/web:v1.1"
	if err := f.e.c.Update(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
	stale := f.workload(t) // what a lagging cache still holds
	if err := f.e.c.Delete(f.ctx(), stale.DeepCopy()); err != nil {
		t.Fatal(err)
	}

	// The controller publishes the removal, and waits for the prune.
	lc, stop := f.startLagging(t, "web")
	removal := f.waitWorkload(t, "the removal commit", func(w *scribev1.Workload) bool {
		return w.Status.Phase == scribev1.WorkloadDeleting && w.Status.Revision != first
	}).Status.Revision
	f.checkOnlyCommits(t, "web", first, removal)

	// Its cache lags: the reconcile reads the changed Workload as if it
	// were not being deleted.
	lc.arm(stale)
	waitFor(t, "the reconcile of the stale Workload", lc.staleReconcileDone)
	f.checkOnlyCommits(t, "web", first, removal)

	// A new process, which did not publish the removal, starts from the
	// same stale view.
	stop()
	lc, _ = f.startLagging(t, "web")
	lc.arm(stale)
	waitFor(t, "the new process's reconcile of the stale Workload", lc.staleReconcileDone)
	f.checkOnlyCommits(t, "web", first, removal)

	// Flux prunes: the Workload goes, and nothing of it is on main.
	f.deleteKustomization(t, kustomizationName("Workload", f.ns, "web"))
	waitFor(t, "the Workload gone", func() (bool, string) {
		err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, &scribev1.Workload{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
	f.checkOnlyCommits(t, "web", first, removal)
}

// checkOnlyCommits checks that the Workload's commits on main are want,
// in order, and that when the last is its removal, main holds none of its
// files.
func (f *fixture) checkOnlyCommits(t *testing.T, name string, want ...string) {
	t.Helper()
	got := f.scribeCommits(t, "Workload/"+f.ns+"/"+name)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("commits of Workload %s/%s: %v; want only %v (a commit after its removal?)", f.ns, name, got, want)
	}
	head := f.head(t)
	dir := "clusters/dev/" + f.ns + "/workload/" + name
	if files := f.filesAt(t, head, dir); len(files) > 0 || f.fileAt(t, head, dir+".sync.yaml") != "" {
		t.Fatalf("main (%s) still holds files of the removed Workload %s/%s: %v", head, f.ns, name, files)
	}
}
