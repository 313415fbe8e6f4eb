package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// TestDemo is `make demo`: it boots the loop on the real node, installs
// Scribe from its image by its Helm chart, applies a Workload (the demo
// app, whose pods pass real readiness probes) and a hub-only Experiment,
// prints their progress live (phase, step, weights, Scribe's commit, the
// revision the applier applied) until the Workload's canary has reached
// 100% and the Experiment is Complete, and prints a summary.
func TestDemo(t *testing.T) {
	if os.Getenv("SCRIBE_DEMO") == "" {
		t.Skip("make demo sets SCRIBE_DEMO=1")
	}
	start := time.Now()
	ns := "demo"
	// make demo APPLIER=argocd: the same walk through Argo CD.
	applier := scribev1.ApplierFlux
	if strings.EqualFold(os.Getenv("SCRIBE_DEMO_APPLIER"), "argocd") {
		applier = scribev1.ApplierArgoCD
	}
	s := newNodeLoop(t, applier, ns)
	ctx, stopProgress := context.WithCancel(context.Background())
	progressDone := make(chan struct{})
	go func() { defer close(progressDone); printProgress(ctx, s, ns, "web", "gateway-tutorial") }()
	t.Cleanup(func() { stopProgress(); <-progressDone })

	// The CRs a user would kubectl apply: fixtures/demo.
	exp := &scribev1.Experiment{}
	readFixture(t, "experiment.yaml", exp)
	w, wV2 := &scribev1.Workload{}, &scribev1.Workload{}
	readFixture(t, "workload.yaml", w)
	readFixture(t, "workload-v2.yaml", wV2)
	if exp.Namespace != ns || w.Namespace != ns || len(wV2.Spec.Versions) != len(w.Spec.Versions)+1 {
		t.Fatalf("fixtures/demo: want CRs in namespace %s and workload-v2.yaml to add one version to workload.yaml", ns)
	}
	// The catalog's demo-services come from docker.io, which this machine
	// cannot reach: the node's registry mirrors them with stand-ins.
	if err := s.Node.PushStandIns(ctx, s.logf); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	// Once v1 serves, steady requests through Traefik and the route as the
	// gateway accepted it show what each version was served at each step.
	started := make(chan struct {
		load *LoadGen
		rec  *routeRecorder
	}, 1)
	loadCtx := ctx
	go func() {
		for {
			got := &scribev1.Workload{}
			if err := s.Client.Get(loadCtx, types.NamespacedName{Namespace: ns, Name: w.Name}, got); err == nil && got.Status.StableVersion != "" {
				started <- struct {
					load *LoadGen
					rec  *routeRecorder
				}{StartLoad(s.GatewayAddr(), "web.example.com", 50), recordRoute(s, ns, "web")}
				return
			}
			select {
			case <-loadCtx.Done():
				close(started)
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	walkCanary(t, s, w, wV2.Spec.Versions[len(wV2.Spec.Versions)-1])
	time.Sleep(3 * time.Second) // the last weights, served a little longer
	var served []string
	if st, ok := <-started; ok {
		served = servedPerStep(st.rec.Stop(), st.load)
		st.load.Stop()
	}
	waitExperiment(t, s, ns, exp.Name, "the Experiment Complete", func(e *scribev1.Experiment) bool {
		return e.Status.Phase == scribev1.ExperimentComplete
	})
	stopProgress()
	<-progressDone
	ctx = context.Background()
	metrics, anonymous, err := s.ScrapeScribeMetrics(ctx)
	if err != nil {
		t.Fatalf("Scribe's secure metrics: %v", err)
	}
	if anonymous != 401 && anonymous != 403 {
		t.Fatalf("Scribe's metrics answered %d without a token, want 401 or 403", anonymous)
	}
	pod, _ := s.ScribePod(ctx)
	leader, _ := s.ScribeLeader(ctx)
	fmt.Printf("\nScribe ran as pod %s/%s on the real node %s (image %s), leader %s; its metrics endpoint answered a token with %d lines and %d without one.\n",
		ScribeNamespace, pod.Name, pod.Spec.NodeName, pod.Spec.Containers[0].Image, leader, strings.Count(metrics, "\n"), anonymous)
	work := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", s.RepoURL, work)
	log := publishtest.Git(t, work, "log", "--format=%h %s")
	fmt.Printf("\nWhat Traefik served while the route carried each step's weights (the demo app answers with its version):\n%s", indent(strings.Join(served, "\n")+"\n"))
	fmt.Printf("\nSUMMARY: the loop came up, Scribe was installed by its chart, the Workload's canary 10/50/100 was applied by %s and promoted with real pods Ready at each step, and the Experiment is Complete (its component installed from the catalog repository), in %s.\nScribe's commits on %s:\n%s\n",
		applier, time.Since(start).Round(time.Second), RepoName, indent(log))
	if os.Getenv("SCRIBE_DEMO_UP") != "" {
		// make demo-up: leave the loop running for exploration, until
		// Ctrl-C or `make demo-down` (SIGTERM to the pid in the pid file).
		pidFile := demoPIDFile()
		if err := os.MkdirAll(filepath.Dir(pidFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("\nThe loop stays up. Try:\n  export KUBECONFIG=%s\n  kubectl get workloads,experiments,kustomizations,applications -A\n"+
			"  kubectl apply -f fixtures/demo/workload-v2.yaml   # after adding a v3 to it: another canary\n  git clone %s\n"+
			"Ctrl-C here, or `make demo-down` elsewhere, stops everything.\n", s.Kubeconfig, s.RepoURL)
		select {}
	}
}

// readFixture decodes fixtures/demo/<name> strictly into obj.
func readFixture(t *testing.T, name string, obj any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "fixtures", "demo", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("fixtures/demo/%s: %v", name, err)
	}
}

// demoPIDFile is where `make demo-up` records the process `make demo-down`
// signals.
func demoPIDFile() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "scribe", "demo-up.pid")
}

// printProgress prints one line whenever the Workload's or the Experiment's
// state changes: phase, canary step and weights, Scribe's commit, and the
// revision the applier last applied for it.
func printProgress(ctx context.Context, s *Stack, ns, workload, experiment string) {
	last := map[string]string{}
	show := func(what, line string) {
		if last[what] != line {
			last[what] = line
			fmt.Printf("%s  %-26s %s\n", time.Now().Format("15:04:05.0"), what, line)
		}
	}
	applied := func(kind, name string) string {
		sha, err := s.AppliedRevision(ctx, strings.ToLower(kind), ns, name)
		if err != nil {
			return "-"
		}
		return short(sha)
	}
	for ctx.Err() == nil {
		w := &scribev1.Workload{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: workload}, w); err == nil {
			var weights []string
			for _, tr := range w.Status.Traffic {
				weights = append(weights, fmt.Sprintf("%s=%d%%", tr.Version, tr.Weight))
			}
			show("Workload "+ns+"/"+workload, fmt.Sprintf("phase=%-11s step=%-2d weights=%-16s commit=%-7s applied=%s",
				w.Status.Phase, w.Status.Step, strings.Join(weights, ","), short(w.Status.Revision), applied(scribev1.WorkloadKind, workload)))
		}
		deps := &appsv1.DeploymentList{}
		if err := s.Client.List(ctx, deps, client.InNamespace(ns)); err == nil && len(deps.Items) > 0 {
			var ds []string
			for _, d := range deps.Items {
				ds = append(ds, fmt.Sprintf("%s %d/%d", d.Name, d.Status.ReadyReplicas, d.Status.Replicas))
			}
			sort.Strings(ds)
			show("Pods Ready (real node)", strings.Join(ds, "  "))
		}
		e := &scribev1.Experiment{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: experiment}, e); err == nil {
			var comps []string
			for _, ts := range e.Status.Targets {
				for _, c := range ts.Components {
					comps = append(comps, fmt.Sprintf("%s/%s ready=%v", ts.Name, c.Name, c.Ready))
				}
			}
			show("Experiment "+ns+"/"+experiment, fmt.Sprintf("phase=%-12s stage=%d commit=%-7s applied=%-7s %s",
				e.Status.Phase, e.Status.Stage, short(e.Status.Revision), applied(scribev1.ExperimentKind, experiment), strings.Join(comps, " ")))
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// short is the 7-character form of a commit, or "-".
func short(sha string) string {
	if sha == "" {
		return "-"
	}
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
