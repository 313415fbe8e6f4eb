package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
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
// source, commits the Experiment, Flux applies it and then the component it
// delivers (from the catalog repository), and the Experiment is Complete
// only after both.
func TestLoopHubExperimentWalksToComplete(t *testing.T) {
	ns := "experiment"
	s := newLoop(t, ns)
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

	// Complete only after Flux applied Scribe's commit ...
	ks := &kustomizev1.Kustomization{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "flux-system", Name: "experiment-" + ns + "-" + exp.Name}, ks); err != nil {
		t.Fatal(err)
	}
	if ks.Status.LastAppliedRevision != "main@sha1:"+e.Status.Revision {
		t.Fatalf("Complete, but Flux applied %q, not Scribe's %s", ks.Status.LastAppliedRevision, e.Status.Revision)
	}
	// ... and installed the component from the catalog repository: the
	// demo services of Scribe's catalog/apps/demo-services, in the entry's
	// namespace demo.
	for _, name := range []string{"demo-http", "demo-grpc"} {
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: name}, &appsv1.Deployment{}); err != nil {
			t.Fatalf("Complete, but the component's Deployment %s is not in the apiserver: %v", name, err)
		}
	}
	if ts := e.Status.Targets; len(ts) != 1 || len(ts[0].Components) != 1 || !ts[0].Components[0].Ready {
		t.Fatalf("Complete, but the target's components are %+v", ts)
	}

	// Deleting it commits the removal; Flux prunes the sync object, whose
	// inventory holds the component's delivery, which prunes the component.
	if err := s.Client.Delete(ctx, e); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "the Experiment gone and its component pruned by Flux", func() (bool, string) {
		gone := apierrors.IsNotFound(s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: exp.Name}, &scribev1.Experiment{}))
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "demo-http"}, &appsv1.Deployment{})
		return gone && apierrors.IsNotFound(err), fmt.Sprintf("experiment gone=%v; component Deployment: %v", gone, err)
	})
}

// TestLoopExperimentWithBrokenComponentPathFails: the catalog entry's path
// does not exist in its source; Flux's kustomize-controller reports it, and
// the Experiment ends Failed with Flux's error in its status.
func TestLoopExperimentWithBrokenComponentPathFails(t *testing.T) {
	ns := "broken"
	s := newLoop(t, ns)
	ctx := context.Background()
	exp := hubExperiment(ns, "bad-path", "broken-path")
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	e := waitExperiment(t, s, ns, exp.Name, "the Experiment Failed", func(e *scribev1.Experiment) bool {
		return e.Status.Phase == scribev1.ExperimentFailed
	})
	ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
	const fluxErr = "kustomization path not found"
	if ready == nil || ready.Reason != controller.ReasonComponentFailed || !strings.Contains(ready.Message, fluxErr) {
		t.Fatalf("Failed without Flux's error in Ready: %s", describeExperiment(e))
	}
	if ts := e.Status.Targets; len(ts) != 1 || ts[0].Phase != scribev1.ExperimentFailed || len(ts[0].Components) != 1 ||
		!strings.Contains(ts[0].Components[0].Message, fluxErr) {
		t.Fatalf("the target does not carry Flux's error: %+v", ts)
	}
	t.Logf("Failed: %s", ready.Message)
}
