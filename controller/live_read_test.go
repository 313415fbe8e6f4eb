package controller_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// TestACommitTrustsTheAnswerToItsReconcilesOwnWriteInsteadOfAnUncachedRead:
// the commit of a new Workload trusts the API server's answer to the
// finalizer its reconcile just wrote, and a change's commit the answer to
// the intent its reconcile saved, instead of reading the Workload again
// past the cache (one request fewer per commit). A reconcile that wrote
// nothing is still checked by the uncached read
// (TestNoCommitOfADeletedWorkloadLandsAfterItsRemoval).
func TestACommitTrustsTheAnswerToItsReconcilesOwnWriteInsteadOfAnUncachedRead(t *testing.T) {
	f := newFixture(t)
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	path := "/apis/scribe.dev/v1alpha1/namespaces/" + f.ns + "/workloads/web"
	cfg := rest.CopyConfig(f.e.cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.TrimSuffix(req.URL.Path, "/") == path {
				reads.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	startControllerCfg(t, cfg, f.ns, controller.Options{})
	f.waitRepositoriesReady(t, []string{f.repo.Name})

	w := workload(f.ns, "v1")
	w.Spec.Rollout = nil
	if err := f.e.c.Create(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
	first := f.waitWorkload(t, "the first commit", func(w *scribev1.Workload) bool { return w.Status.Revision != "" }).Status.Revision
	if n := reads.Load(); n != 0 {
		t.Fatalf("the new Workload was read past the cache %d times before its first commit; want 0 (the finalizer patch's answer stands in)", n)
	}

	w = f.workload(t)
	w.Spec.Versions[0].Image = "ghcr.io/example/web:v1.1"
	if err := f.e.c.Update(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
	f.waitWorkload(t, "the change's commit", func(w *scribev1.Workload) bool {
		return w.Status.Revision != "" && w.Status.Revision != first
	})
	if n := reads.Load(); n != 0 {
		t.Fatalf("the change's reconcile read the Workload past the cache %d times before its commit; want 0 (the saved intent's answer stands in)", n)
	}
}
