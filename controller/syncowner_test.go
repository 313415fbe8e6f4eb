package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/render"
	"github.com/scribe-gitops/scribe/render/contract"
)

// TestDecideOwnSyncAcceptsOnlyTheCustomResourcesOwnSyncObject: a sync
// object is evidence for a custom resource only when it carries that
// resource's labels, applies its directory and reads its source; another
// tenant's object, one applying another path (the branch's root) or
// reading another source is not.
func TestDecideOwnSyncAcceptsOnlyTheCustomResourcesOwnSyncObject(t *testing.T) {
	b := scribev1.ObjectIdentity{APIVersion: "scribe.dev/v1alpha1", Kind: "Experiment", Namespace: "team-b", Name: "x"}
	want := ownSyncOf(b, "clusters/dev", "GitRepository/flux-system/experiment.team-b.x")
	own := map[string]string{"scribe.dev/kind": "Experiment", "scribe.dev/namespace": "team-b", "scribe.dev/name": "x", "app.kubernetes.io/managed-by": "scribe"}
	with := func(k, v string) map[string]string {
		l := map[string]string{}
		for k, v := range own {
			l[k] = v
		}
		l[k] = v
		return l
	}
	for _, tt := range []struct {
		name   string
		got    SyncFacts
		ok     bool
		reason string
	}{
		{"its own, as render writes it", SyncFacts{Labels: own, Path: "./clusters/dev/team-b/experiment/x", Source: "GitRepository/flux-system/experiment.team-b.x"}, true, ""},
		{"its own, Argo CD's path without ./", SyncFacts{Labels: own, Path: "clusters/dev/team-b/experiment/x/", Source: "GitRepository/flux-system/experiment.team-b.x"}, true, ""},
		{"its own, the repository's root as the path", SyncFacts{Labels: own, Path: "/clusters/dev/team-b/experiment/x", Source: "GitRepository/flux-system/experiment.team-b.x"}, true, ""},
		{"another namespace's custom resource of the same name", SyncFacts{Labels: with("scribe.dev/namespace", "team-a"), Path: "./clusters/dev/team-b/experiment/x", Source: "GitRepository/flux-system/experiment.team-b.x"}, false, "scribe.dev/namespace"},
		{"another name (a legacy name shared by two)", SyncFacts{Labels: with("scribe.dev/name", "b-x"), Path: "./clusters/dev/team-b/experiment/x", Source: "GitRepository/flux-system/experiment.team-b.x"}, false, "scribe.dev/name"},
		{"another kind", SyncFacts{Labels: with("scribe.dev/kind", "Workload"), Path: "./clusters/dev/team-b/experiment/x", Source: "GitRepository/flux-system/experiment.team-b.x"}, false, "scribe.dev/kind"},
		{"no labels (not render's)", SyncFacts{Path: "./clusters/dev/team-b/experiment/x", Source: "GitRepository/flux-system/experiment.team-b.x"}, false, "scribe.dev/kind"},
		{"another tenant's directory", SyncFacts{Labels: own, Path: "./clusters/dev/team-a/experiment/x", Source: "GitRepository/flux-system/experiment.team-b.x"}, false, "applies path"},
		{"the branch's root", SyncFacts{Labels: own, Path: "./", Source: "GitRepository/flux-system/experiment.team-b.x"}, false, "applies path"},
		{"a parent of its directory", SyncFacts{Labels: own, Path: "./clusters/dev/team-b", Source: "GitRepository/flux-system/experiment.team-b.x"}, false, "applies path"},
		{"no path", SyncFacts{Labels: own, Source: "GitRepository/flux-system/experiment.team-b.x"}, false, "applies path"},
		{"the Repository's root source instead of its own", SyncFacts{Labels: own, Path: "./clusters/dev/team-b/experiment/x", Source: "GitRepository/flux-system/scribe"}, false, "reads source"},
		{"another tenant's source", SyncFacts{Labels: own, Path: "./clusters/dev/team-b/experiment/x", Source: "GitRepository/flux-system/experiment.team-a.x"}, false, "reads source"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := DecideOwnSync(want, tt.got)
			if ok != tt.ok || !strings.Contains(why, tt.reason) {
				t.Fatalf("DecideOwnSync = %v, %q; want %v and a reason naming %q", ok, why, tt.ok, tt.reason)
			}
		})
	}
}

// TestAppliersGiveNoVerdictOnAnotherCustomResourcesSyncObject: under the
// sync object's name, Flux's and Argo CD's appliers read an object that
// reports our commit applied and healthy but is another custom resource's
// (or applies another path): the verdict is Pending, ForeignSyncObject,
// never Healthy; their own object at the same status is Healthy.
func TestAppliersGiveNoVerdictOnAnotherCustomResourcesSyncObject(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	src := scribev1.ObjectIdentity{Kind: "Workload", Namespace: "team-b", Name: "web"}
	labels := func(ns string) map[string]string {
		return map[string]string{"scribe.dev/kind": "Workload", "scribe.dev/namespace": ns, "scribe.dev/name": "web"}
	}
	same := func(_ context.Context, ours, applied string) (bool, error) { return ours == applied, nil }
	kustomization := func(ns, dir string) *kustomizev1.Kustomization {
		rev := "main@sha1:" + commit
		return &kustomizev1.Kustomization{
			ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "workload.team-b.web", Generation: 1, Labels: labels(ns)},
			Spec: kustomizev1.KustomizationSpec{Path: dir, Prune: true, Interval: metav1.Duration{Duration: time.Minute},
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "workload.team-b.web"}},
			Status: kustomizev1.KustomizationStatus{ObservedGeneration: 1, LastAppliedRevision: rev, LastAttemptedRevision: rev,
				Conditions: []metav1.Condition{{Type: fluxmeta.ReadyCondition, Status: metav1.ConditionTrue, Reason: fluxmeta.ReconciliationSucceededReason, ObservedGeneration: 1}}},
		}
	}
	app := func(ns, dir string) *unstructured.Unstructured {
		u := argoApp("team-b", "workload.team-b.web")
		u.SetLabels(labels(ns))
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"repoURL": "https://git.example/acme/apps.git", "targetRevision": "main", "path": dir}, "spec", "source")
		return u
	}
	fluxIn := render.Applier{Kind: scribev1.ApplierFlux, Namespace: "flux-system", Name: "scribe", SourceKind: contract.SourceGitRepository, FluxSource: &contract.FluxGitSource{URL: "https://git.example/acme/apps.git"}}
	argoIn := render.Applier{Kind: scribev1.ApplierArgoCD, Namespace: "argocd", Name: "root", RepoURL: "https://git.example/acme/apps.git", Revision: "main"}
	for _, tt := range []struct {
		name    string
		applier Applier
		sync    scribev1.ObjectIdentity
		foreign bool
		healthy bool
	}{
		{"Flux: its own Kustomization", newApplier(applierClient(t, kustomization("team-b", "./clusters/dev/team-b/workload/web")), fluxIn), scribev1.ObjectIdentity{Namespace: "flux-system", Name: "workload.team-b.web"}, false, true},
		{"Flux: another tenant's Kustomization", newApplier(applierClient(t, kustomization("team-a", "./clusters/dev/team-a/workload/web")), fluxIn), scribev1.ObjectIdentity{Namespace: "flux-system", Name: "workload.team-b.web"}, true, false},
		{"Flux: applying the branch's root", newApplier(applierClient(t, kustomization("team-b", "./")), fluxIn), scribev1.ObjectIdentity{Namespace: "flux-system", Name: "workload.team-b.web"}, true, false},
		{"Argo CD: its own Application", newApplier(applierClient(t, app("team-b", "clusters/dev/team-b/workload/web")), argoIn), scribev1.ObjectIdentity{Namespace: "team-b", Name: "workload.team-b.web"}, false, false},
		{"Argo CD: another tenant's Application", newApplier(applierClient(t, app("team-a", "clusters/dev/team-a/workload/web")), argoIn), scribev1.ObjectIdentity{Namespace: "team-b", Name: "workload.team-b.web"}, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := tt.applier.Applied(context.Background(), tt.sync, src, "clusters/dev", commit, same)
			if err != nil {
				t.Fatal(err)
			}
			if tt.foreign && (v.State != health.Pending || v.Reason != ReasonForeignSyncObject) {
				t.Fatalf("Applied = %+v; want Pending/%s", v, ReasonForeignSyncObject)
			}
			if !tt.foreign && (v.Reason == ReasonForeignSyncObject || tt.healthy && v.State != health.Healthy) {
				t.Fatalf("Applied = %+v; its own sync object refused", v)
			}
		})
	}
}
