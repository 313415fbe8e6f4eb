package controller_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// teamCatalog adds team-cache and overrides demo-services (on purpose:
// override: true).
const teamCatalog = `package catalog

entries: {
	"demo-services": {kind: "app", override: true, namespace: "demo", source: {type: "git", url: "https://git.example.com/platform/catalog", ref: branch: "main", path: "./apps/demo-services"}, #Params: {}}
	"team-cache": {kind: "app", namespace: "cache", source: {type: "oci", url: "oci://registry.example.com/team/cache", tag: "1.2.3"}, #Params: {}}
}
`

// TestRepositoryCatalogFromAFluxSource: a Repository's spec.catalog names a
// GitRepository that has no artifact yet, so CatalogReady is False (and
// Ready still True: Workloads do not need the catalog) and an Experiment
// using a catalog-only component waits with CatalogNotReady and no commit.
// Once source-controller (played by the test) stores the artifact, the
// Repository reports the catalog's revision and entries, and the Experiment
// is committed with the user's entry.
func TestRepositoryCatalogFromAFluxSource(t *testing.T) {
	f := newFixture(t)
	blob, digest := controller.Artifact(t, map[string]string{"catalog/entries.cue": teamCatalog})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(blob) }))
	t.Cleanup(srv.Close)

	src := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "team-catalog", Namespace: f.ns},
		Spec:       sourcev1.GitRepositorySpec{URL: "https://git.example.com/team/catalog", Interval: metav1.Duration{Duration: time.Minute}},
	}
	if err := f.e.c.Create(f.ctx(), src); err != nil {
		t.Fatal(err)
	}
	f.repo.Spec.Catalog = &scribev1.CatalogSource{Kind: "GitRepository", Name: "team-catalog", Path: "./catalog"}
	f.repo.Spec.AllowedNamespaces = []string{"cache", "demo"}
	// The platform grants the namespace those destinations, and vouches
	// for the team's catalog, which overrides demo-services.
	f.grant(t, scribev1.TenantPolicySpec{DestinationNamespaces: []string{"cache", "demo"},
		CatalogSources: []scribev1.CatalogSourceReference{{Kind: "GitRepository", Namespace: f.ns, Name: "team-catalog"}}})
	f.startExperimentController(t)
	exp := hubExperiment(f.ns, "cache-test")
	exp.Spec.Workflow = nil
	exp.Spec.Targets = exp.Spec.Targets[:1]
	exp.Spec.Targets[0].Components = []scribev1.Component{{App: "team-cache"}}
	if err := f.e.c.Create(f.ctx(), exp); err != nil {
		t.Fatal(err)
	}

	repoState := func(r *scribev1.Repository) string {
		var b strings.Builder
		for _, c := range r.Status.Conditions {
			b.WriteString(c.Type + "=" + string(c.Status) + "/" + c.Reason + ": " + c.Message + "; ")
		}
		if r.Status.Catalog != nil {
			b.WriteString("catalog at " + r.Status.Catalog.Revision + ": " + strings.Join(r.Status.Catalog.Entries, ","))
		}
		return b.String()
	}
	repo := &scribev1.Repository{}
	waitFor(t, "the Repository Ready with its catalog not ready", func() (bool, string) {
		if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "default"}, repo); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(repo.Status.Conditions, scribev1.CatalogReadyCondition)
		return apimeta.IsStatusConditionTrue(repo.Status.Conditions, scribev1.ReadyCondition) &&
			c != nil && c.Status == metav1.ConditionFalse && c.Reason == controller.ReasonCatalogNotReady, repoState(repo)
	})
	waitFor(t, "the Experiment waiting for the catalog", func() (bool, string) {
		e := f.experiment(t, exp.Name)
		c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
		return c != nil && c.Reason == controller.ReasonCatalogNotReady && strings.Contains(c.Message, "has no artifact yet"), expState(e)
	})
	if commits := f.scribeCommits(t, experimentObject(f.ns, exp.Name)); len(commits) != 0 {
		t.Fatalf("committed %v without its catalog", commits)
	}

	// source-controller stores the artifact.
	const revision = "main@sha1:1111111111111111111111111111111111111111"
	src.Status.ObservedGeneration = src.Generation
	src.Status.Artifact = &meta.Artifact{Path: "gitrepository/team-catalog.tar.gz", URL: srv.URL + "/team-catalog.tar.gz", Revision: revision, Digest: digest, LastUpdateTime: metav1.Now()}
	src.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason,
		Message: "stored artifact for revision " + revision, ObservedGeneration: src.Generation, LastTransitionTime: metav1.Now()}}
	if err := f.e.c.Status().Update(f.ctx(), src); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Repository's catalog ready", func() (bool, string) {
		if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "default"}, repo); err != nil {
			return false, err.Error()
		}
		// The patch helper writes conditions and the rest of status in two
		// patches: wait for both.
		return apimeta.IsStatusConditionTrue(repo.Status.Conditions, scribev1.CatalogReadyCondition) && repo.Status.Catalog != nil, repoState(repo)
	})
	if st := repo.Status.Catalog; st == nil || st.Revision != revision || st.Digest != digest ||
		!slices.Contains(st.Entries, "app/team-cache") || !slices.Contains(st.Entries, "app/demo-services") || !slices.Contains(st.Entries, "workflow/k6-http-loadgen") {
		t.Fatalf("status.catalog: %+v", repo.Status.Catalog)
	}
	// The components are committed at stage 2, once Flux applied stage 1.
	f.applyStage(t, exp.Name, scribev1.StageClusters)
	e := f.waitStage(t, exp.Name, scribev1.StageComponents)
	if file := f.fileAt(t, e.Status.Revision, "clusters/dev/"+f.ns+"/experiment/"+exp.Name+"/ocirepository-"+exp.Name+"-app-team-cache.yaml"); !strings.Contains(file, "oci://registry.example.com/team/cache") {
		t.Fatalf("the committed component source is not the user catalog's:\n%s", file)
	}
}

// TestRepositoryCatalogPastItsBound: a Repository's catalog whose CUE runs
// away (the list.Range) is evaluated in the bounded checker, not in
// the controller: CatalogReady turns False with CatalogInvalid saying which
// bound it exceeded, and the controller goes on serving.
func TestRepositoryCatalogPastItsBound(t *testing.T) {
	f := newFixture(t)
	blob, digest := controller.Artifact(t, map[string]string{"catalog/entries.cue": "package catalog\n\nimport \"list\"\n\nentries: {}\nx: list.Range(0, 5e7, 1)\n"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(blob) }))
	t.Cleanup(srv.Close)

	src := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "runaway", Namespace: f.ns},
		Spec:       sourcev1.GitRepositorySpec{URL: "https://git.example.com/team/catalog", Interval: metav1.Duration{Duration: time.Minute}},
	}
	if err := f.e.c.Create(f.ctx(), src); err != nil {
		t.Fatal(err)
	}
	const revision = "main@sha1:2222222222222222222222222222222222222222"
	src.Status.ObservedGeneration = src.Generation
	src.Status.Artifact = &meta.Artifact{Path: "gitrepository/runaway.tar.gz", URL: srv.URL + "/runaway.tar.gz", Revision: revision, Digest: digest, LastUpdateTime: metav1.Now()}
	src.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason,
		Message: "stored artifact for revision " + revision, ObservedGeneration: src.Generation, LastTransitionTime: metav1.Now()}}
	if err := f.e.c.Status().Update(f.ctx(), src); err != nil {
		t.Fatal(err)
	}
	f.repo.Spec.Catalog = &scribev1.CatalogSource{Kind: "GitRepository", Name: "runaway", Path: "./catalog"}
	f.startExperimentController(t)

	repo := &scribev1.Repository{}
	waitForLong(t, 90*time.Second, 200*time.Millisecond, "CatalogReady False with CatalogInvalid naming the bound", func() (bool, string) {
		if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "default"}, repo); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(repo.Status.Conditions, scribev1.CatalogReadyCondition)
		if c == nil {
			return false, "no CatalogReady condition"
		}
		return c.Status == metav1.ConditionFalse && c.Reason == controller.ReasonCatalogInvalid &&
			(strings.Contains(c.Message, "memory limit") || strings.Contains(c.Message, "timeout")), c.Reason + ": " + c.Message
	})
}
