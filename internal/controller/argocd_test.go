package controller_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// playArgoCD writes an Argo CD Application's status as the application
// controller does after syncing revision: the sync result, the comparison
// and the health, with the times the controller stamps.
func (f *fixture) playArgoCD(t *testing.T, key types.NamespacedName, revision string, finishedAt, reconciledAt time.Time, healthStatus string) {
	t.Helper()
	app := &unstructured.Unstructured{}
	app.SetAPIVersion("argoproj.io/v1alpha1")
	app.SetKind("Application")
	if err := f.e.c.Get(f.ctx(), key, app); err != nil {
		app.SetNamespace(key.Namespace)
		app.SetName(key.Name)
		_ = unstructured.SetNestedMap(app.Object, map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": f.url, "targetRevision": "main", "path": "clusters/dev"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": f.ns},
		}, "spec")
		if err := f.e.c.Create(f.ctx(), app); err != nil {
			t.Fatal(err)
		}
	}
	status := map[string]any{
		"sync":         map[string]any{"status": "Synced", "revision": revision},
		"health":       map[string]any{"status": healthStatus},
		"reconciledAt": reconciledAt.UTC().Format(time.RFC3339),
		"operationState": map[string]any{
			"operation":  map[string]any{"sync": map[string]any{"revision": revision}},
			"phase":      "Succeeded",
			"message":    "successfully synced (all tasks run)",
			"startedAt":  finishedAt.Add(-time.Second).UTC().Format(time.RFC3339),
			"finishedAt": finishedAt.UTC().Format(time.RFC3339),
			"syncResult": map[string]any{"revision": revision},
		},
	}
	app.Object["status"] = status
	// The Application CRD has no status subresource: status is part of the object.
	if err := f.e.c.Update(f.ctx(), app); err != nil {
		t.Fatal(err)
	}
}

func TestWorkloadWithArgoCDIgnoresHealthComputedBeforeTheSyncFinished(t *testing.T) {
	f := newFixture(t)
	f.repo.Spec.Applier = scribev1.ApplierSpec{Kind: "ArgoCD", Namespace: "argocd", Name: "scribe"}
	f.startWithRepository(t)
	if err := f.e.c.Create(f.ctx(), workload(f.ns, "v1")); err != nil {
		t.Fatal(err)
	}
	w := f.waitWorkload(t, "the first commit", func(w *scribev1.Workload) bool { return w.Status.Revision != "" })
	key := types.NamespacedName{Namespace: f.ns, Name: "workload-" + f.ns + "-web"}
	f.deploymentReady(t, "web-v1", true)
	finished := time.Now().Truncate(time.Second)
	// Healthy, but the health was computed a minute before the sync of our
	// commit finished: it describes the old state.
	f.playArgoCD(t, key, w.Status.Revision, finished, finished.Add(-time.Minute), "Healthy")
	time.Sleep(time.Second)
	w = f.workload(t)
	if w.Status.Phase == scribev1.WorkloadHealthy {
		t.Fatalf("stale Argo CD health was taken as healthy: %s", describe(w))
	}
	for _, c := range w.Status.Conditions {
		if c.Type == scribev1.ReadyCondition && c.Status == metav1.ConditionTrue {
			t.Fatalf("Ready=True on stale health: %s", describe(w))
		}
	}
	// The next refresh after the sync: now it counts.
	f.playArgoCD(t, key, w.Status.Revision, finished, finished.Add(time.Second), "Healthy")
	f.waitWorkload(t, "healthy on fresh Argo CD health", func(w *scribev1.Workload) bool {
		return w.Status.Phase == scribev1.WorkloadHealthy
	})
}
