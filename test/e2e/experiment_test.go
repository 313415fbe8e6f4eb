package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/controller"
)

// hubExperiment delivers one catalog app to the hub, without a workflow.
func hubExperiment(ns, name, app string) *scribev1.Experiment {
	return &scribev1.Experiment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: scribev1.ExperimentSpec{
			Description: "catalog app " + app + " on the hub",
			Targets: []scribev1.Target{
				{Name: "app", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Components: []scribev1.Component{{App: app}}},
			},
		},
	}
}

// describeExperiment is the state printed while waiting.
func describeExperiment(e *scribev1.Experiment) string {
	s := fmt.Sprintf("phase=%s revision=%.12s", e.Status.Phase, e.Status.Revision)
	if c := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition); c != nil {
		s += fmt.Sprintf(" ready=%s/%s: %s", c.Status, c.Reason, c.Message)
	}
	return s
}

// waitExperiment polls the Experiment until done says so, and returns it.
func waitExperiment(t *testing.T, s *Stack, ns, name, what string, done func(*scribev1.Experiment) bool) *scribev1.Experiment {
	t.Helper()
	e := &scribev1.Experiment{}
	poll(t, 3*time.Minute, what, func() (bool, string) {
		if err := s.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, e); err != nil {
			return false, err.Error()
		}
		return done(e), describeExperiment(e)
	})
	return e
}

// TestLoopHubExperimentWalksToComplete: Scribe reads the catalog from a Flux
// source, commits the Experiment, the applier (Flux or Argo CD) applies it
// and then the component it delivers (from the catalog repository), and
// the Experiment is Complete only after both.
func TestLoopHubExperimentWalksToComplete(t *testing.T) {
	appliers(t, testHubExperiment)
}

func testHubExperiment(t *testing.T, applier scribev1.ApplierKind) {
	ns := "experiment"
	s := newLoopWith(t, applier, ns)
	ctx := context.Background()
	exp := hubExperiment(ns, "gateway-tutorial", "demo-services")
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	var phases []scribev1.ExperimentPhase
	e := waitExperiment(t, s, ns, exp.Name, "the Experiment Complete", func(e *scribev1.Experiment) bool {
		if n := len(phases); e.Status.Phase != "" && (n == 0 || phases[n-1] != e.Status.Phase) {
			phases = append(phases, e.Status.Phase)
		}
		return e.Status.Phase == scribev1.ExperimentComplete
	})
	t.Logf("phases seen: %v", phases)

	// Complete only after the applier applied Scribe's commit ...
	applied, err := s.AppliedRevision(ctx, "experiment", ns, exp.Name)
	if err != nil {
		t.Fatal(err)
	}
	if applied != e.Status.Revision {
		t.Fatalf("Complete, but %s applied %q, not Scribe's %s", applier, applied, e.Status.Revision)
	}
	// ... and installed the component from the catalog repository.
	cm := &corev1.ConfigMap{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo-apps", Name: "demo-services"}, cm); err != nil {
		t.Fatalf("Complete, but the component's ConfigMap is not in the apiserver: %v", err)
	}
	if ts := e.Status.Targets; len(ts) != 1 || len(ts[0].Components) != 1 || !ts[0].Components[0].Ready {
		t.Fatalf("Complete, but the target's components are %+v", ts)
	}

	// Deleting it commits the removal; the applier prunes the sync object,
	// whose inventory holds the component's delivery, which prunes the
	// component (with Argo CD: the Applications' resources finalizers).
	if err := s.Client.Delete(ctx, e); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "the Experiment gone and its component pruned by "+string(applier), func() (bool, string) {
		gone := apierrors.IsNotFound(s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: exp.Name}, &scribev1.Experiment{}))
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo-apps", Name: "demo-services"}, &corev1.ConfigMap{})
		return gone && apierrors.IsNotFound(err), fmt.Sprintf("experiment gone=%v; component ConfigMap: %v", gone, err)
	})
}

// TestLoopExperimentWithBrokenComponentPathFails: the catalog entry's path
// does not exist in its source; the applier reports it (Flux's
// kustomize-controller, Argo CD's ComparisonError), and the Experiment ends
// Failed with the applier's own error in its status.
func TestLoopExperimentWithBrokenComponentPathFails(t *testing.T) {
	appliers(t, testBrokenComponentPath)
}

func testBrokenComponentPath(t *testing.T, applier scribev1.ApplierKind) {
	ns := "broken"
	s := newLoopWith(t, applier, ns)
	ctx := context.Background()
	exp := hubExperiment(ns, "bad-path", "broken-path")
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	e := waitExperiment(t, s, ns, exp.Name, "the Experiment Failed", func(e *scribev1.Experiment) bool {
		return e.Status.Phase == scribev1.ExperimentFailed
	})
	ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
	fluxErr := "kustomization path not found"
	if applier == scribev1.ApplierArgoCD {
		fluxErr = "app path does not exist"
	}
	if ready == nil || ready.Reason != controller.ReasonComponentFailed || !strings.Contains(ready.Message, fluxErr) {
		t.Fatalf("Failed without %s's error in Ready: %s", applier, describeExperiment(e))
	}
	if ts := e.Status.Targets; len(ts) != 1 || ts[0].Phase != scribev1.ExperimentFailed || len(ts[0].Components) != 1 ||
		!strings.Contains(ts[0].Components[0].Message, fluxErr) {
		t.Fatalf("the target does not carry %s's error: %+v", applier, ts)
	}
	t.Logf("Failed: %s", ready.Message)
}
