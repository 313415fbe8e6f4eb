package controller_test

import (
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// Read-back isolation through the real controller: two tenants, each
// with its own namespace and Repository, on one branch.

// twoTenants are tenant A (the test's fixture) and tenant B, whose
// namespace is A's with "-b" appended, each with a Repository naming the
// same repository, branch and path.
func twoTenants(t *testing.T) (a, b *fixture) {
	t.Helper()
	a = newFixture(t)
	b = &fixture{e: a.e, ns: a.ns + "-b", srv: a.srv, url: a.url}
	b.createNamespace(t)
	b.repo = a.repo.DeepCopy()
	b.repo.Namespace = b.ns
	return a, b
}

// startTenants creates both Repositories and runs one controller whose
// cache holds both namespaces and Flux's.
func startTenants(t *testing.T, a, b *fixture) {
	t.Helper()
	for _, f := range []*fixture{a, b} {
		if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
			t.Fatal(err)
		}
	}
	co := controller.CacheOptions(map[string]cache.Config{a.ns: {}, b.ns: {}, "flux-system": {}})
	_, _ = startManager(t, a.e.cfg, co, nil, controller.Options{Poll: 150 * time.Millisecond, Concurrency: 2, CommitInterval: -1})
}

// playForeignSync plays an object under the custom resource's sync
// object name that is labelled as its own but applies the branch's root
// from the Repository's source (as the root Kustomization does), reported
// Ready at commit: no evidence that the custom resource's own directory
// was applied.
func (f *fixture) playForeignSync(t *testing.T, key types.NamespacedName, src scribev1.ObjectIdentity, commit string) {
	t.Helper()
	ks := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace,
			Labels: map[string]string{"scribe.dev/kind": src.Kind, "scribe.dev/namespace": src.Namespace, "scribe.dev/name": src.Name}},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: 10 * time.Minute}, Path: "./", Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "scribe", Namespace: "flux-system"}},
	}
	if err := f.e.c.Create(f.ctx(), ks); err != nil {
		t.Fatal(err)
	}
	f.playFlux(t, key, commit, true, "", "")
}

// ownSync makes the Kustomization under key the one the root
// Kustomization applies from src's sync file at commit, and plays Flux
// applying commit with it.
func (f *fixture) ownSync(t *testing.T, key types.NamespacedName, src scribev1.ObjectIdentity, commit string) {
	t.Helper()
	ks := &kustomizev1.Kustomization{}
	if err := f.e.c.Get(f.ctx(), key, ks); err != nil {
		t.Fatal(err)
	}
	ks.Spec = f.syncSpec(t, src, commit)
	if err := f.e.c.Update(f.ctx(), ks); err != nil {
		t.Fatal(err)
	}
	f.playFlux(t, key, commit, true, "", "")
}

func identity(kind, ns, name string) scribev1.ObjectIdentity {
	return scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: kind, Namespace: ns, Name: name}
}

// holdsStage checks that the Experiment stays at stage n for d.
func (f *fixture) holdsStage(t *testing.T, name string, n int32, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if e := f.experiment(t, name); e.Status.Stage != n {
			t.Fatalf("experiment %s/%s moved past stage %d without its own evidence: %s", f.ns, name, n, expState(e))
		}
	}
	if commits := f.scribeCommits(t, experimentObject(f.ns, name)); len(commits) != int(n) {
		t.Fatalf("experiment %s/%s has %d commits at stage %d: %v", f.ns, name, len(commits), n, commits)
	}
}

// TestExperimentAdvancesOnlyOnItsOwnSyncObject: two tenants' Experiments
// of the same name on one branch, and only tenant A's sync object is
// reported Ready at the tip: A's moves to stage 2, B's stays at stage 1
// and says it waits for its own sync object. An object under B's sync
// object name that applies the branch's root from the Repository's source,
// Ready at the tip, moves it neither; B's own Kustomization having applied
// B's commit does.
func TestExperimentAdvancesOnlyOnItsOwnSyncObject(t *testing.T) {
	a, b := twoTenants(t)
	a.publishCatalog(t)
	b.publishCatalog(t)
	startTenants(t, a, b)
	for _, f := range []*fixture{a, b} {
		if err := f.e.c.Create(f.ctx(), hubExperiment(f.ns, "exp")); err != nil {
			t.Fatal(err)
		}
	}
	a.waitStage(t, "exp", scribev1.StageClusters)
	bExp := b.waitStage(t, "exp", scribev1.StageClusters)

	// Flux applies the tip for tenant A only.
	tip := a.head(t)
	a.playFlux(t, kustomizationName("Experiment", a.ns, "exp"), tip, true, "", "")
	a.waitStage(t, "exp", scribev1.StageComponents)
	b.holdsStage(t, "exp", scribev1.StageClusters, 2*time.Second)
	b.waitsFor(t, "exp", "Kustomization flux-system/"+kustomizationName("Experiment", b.ns, "exp").Name+" does not exist yet")

	// Under B's name, an object applying the branch's root, Ready at the tip.
	key := kustomizationName("Experiment", b.ns, "exp")
	b.playForeignSync(t, key, identity("Experiment", b.ns, "exp"), tip)
	b.holdsStage(t, "exp", scribev1.StageClusters, 2*time.Second)
	b.waitsFor(t, "exp", `is no evidence: it applies path "./"`)

	// B's own Kustomization applied B's commit.
	b.ownSync(t, key, identity("Experiment", b.ns, "exp"), bExp.Status.Revision)
	b.waitStage(t, "exp", scribev1.StageComponents)
}

// waitsFor waits until the Experiment's Ready condition says it waits for
// its commit to be applied, with want in the message.
func (f *fixture) waitsFor(t *testing.T, name, want string) {
	t.Helper()
	waitFor(t, f.ns+"/"+name+" waiting for its own sync object", func() (bool, string) {
		e := f.experiment(t, name)
		c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == controller.ReasonApplyPending && strings.Contains(c.Message, want), expState(e)
	})
}

// TestWorkloadIsHealthyOnlyOnItsOwnSyncObject: two tenants' Workloads of
// the same name on one branch, their Deployments available, and only
// tenant A's sync object reported Ready at the tip: A's is Healthy, B's
// is not, nor when an object under B's sync object name applies the
// branch's root at the tip; B's own Kustomization having applied B's
// commit makes it Healthy.
func TestWorkloadIsHealthyOnlyOnItsOwnSyncObject(t *testing.T) {
	a, b := twoTenants(t)
	startTenants(t, a, b)
	for _, f := range []*fixture{a, b} {
		w := workload(f.ns, "v1")
		w.Spec.Rollout = nil
		if err := f.e.c.Create(f.ctx(), w); err != nil {
			t.Fatal(err)
		}
		f.deploymentReady(t, "web-v1", true)
	}
	a.waitWorkloadNamed(t, "web", "A's first commit", func(w *scribev1.Workload) bool { return w.Status.Revision != "" })
	bWeb := b.waitWorkloadNamed(t, "web", "B's first commit", func(w *scribev1.Workload) bool { return w.Status.Revision != "" })

	tip := a.head(t)
	a.playFlux(t, kustomizationName("Workload", a.ns, "web"), tip, true, "", "")
	a.waitWorkloadNamed(t, "web", "A's Workload Healthy", func(w *scribev1.Workload) bool { return w.Status.Phase == scribev1.WorkloadHealthy })
	b.notHealthy(t, "web", "does not exist yet")

	key := kustomizationName("Workload", b.ns, "web")
	b.playForeignSync(t, key, identity("Workload", b.ns, "web"), tip)
	b.notHealthy(t, "web", `is no evidence: it applies path "./"`)

	b.ownSync(t, key, identity("Workload", b.ns, "web"), bWeb.Status.Revision)
	b.waitWorkloadNamed(t, "web", "B's Workload Healthy on its own sync object", func(w *scribev1.Workload) bool { return w.Status.Phase == scribev1.WorkloadHealthy })
}

// notHealthy checks that the Workload does not become Healthy for 2 s
// and that its Ready condition then says why, with want.
func (f *fixture) notHealthy(t *testing.T, name, want string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if w := f.workloadNamed(t, name); w.Status.Phase == scribev1.WorkloadHealthy {
			t.Fatalf("%s/%s Healthy on evidence that is not its own: %s", f.ns, name, describe(w))
		}
	}
	f.waitWorkloadNamed(t, name, "Ready saying "+want, func(w *scribev1.Workload) bool {
		return strings.Contains(readyMessage(w.Status.Conditions), want)
	})
}

// createNamespace creates the fixture's namespace.
func (f *fixture) createNamespace(t *testing.T) {
	t.Helper()
	if err := f.e.c.Create(f.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) workloadNamed(t *testing.T, name string) *scribev1.Workload {
	t.Helper()
	w := &scribev1.Workload{}
	if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: name}, w); err != nil {
		t.Fatal(err)
	}
	return w
}

// readyMessage is the Ready condition's reason and message.
func readyMessage(conds []metav1.Condition) string {
	c := apimeta.FindStatusCondition(conds, scribev1.ReadyCondition)
	if c == nil {
		return ""
	}
	return c.Reason + ": " + c.Message
}
