package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/publish/publishtest"
)

// TestDemo is `make demo`: it boots the loop, applies a Workload and a
// hub-only Experiment, follows both until the Workload's canary has reached
// 100% and the Experiment is Complete, and prints a summary.
func TestDemo(t *testing.T) {
	if os.Getenv("SCRIBE_DEMO") == "" {
		t.Skip("make demo sets SCRIBE_DEMO=1")
	}
	start := time.Now()
	ns := "demo"
	s := newLoop(t, ns)
	ctx := context.Background()

	exp := &scribev1.Experiment{
		ObjectMeta: metav1.ObjectMeta{Name: "gateway-tutorial", Namespace: ns},
		Spec: scribev1.ExperimentSpec{
			Description: "demo services on the hub",
			Targets: []scribev1.Target{
				{Name: "app", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Components: []scribev1.Component{{App: "demo-services"}}},
			},
		},
	}
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	walkCanary(t, s, canaryWorkload(ns))
	poll(t, 3*time.Minute, "the Experiment Complete", func() (bool, string) {
		e := &scribev1.Experiment{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: exp.Name}, e); err != nil {
			return false, err.Error()
		}
		return e.Status.Phase == scribev1.ExperimentComplete, fmt.Sprintf("phase=%s revision=%.12s", e.Status.Phase, e.Status.Revision)
	})
	work := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", s.RepoURL, work)
	log := publishtest.Git(t, work, "log", "--format=%h %s")
	t.Logf("SUMMARY: loop up, Workload canary 10/50/100 applied by Flux and promoted, Experiment Complete, in %s.\nScribe's commits on %s:\n%s",
		time.Since(start).Round(time.Second), RepoName, indent(log))
	if os.Getenv("SCRIBE_DEMO_UP") != "" {
		// make demo-up: leave the loop running for exploration.
		fmt.Printf("\nThe loop stays up. Try:\n  KUBECONFIG=%s kubectl get workloads,experiments,kustomizations -A\n  git clone %s\nCtrl-C stops everything.\n", s.Kubeconfig, s.RepoURL)
		select {}
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
