package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// TestDemo is `make demo`: it boots the loop on the real node with a
// second cluster beside it (its own control plane and node) and the Argo
// Workflows engine, installs Scribe from its image by its Helm chart, and
// walks the CRs a user would kubectl apply (fixtures/demo): a Workload (the
// demo app, whose pods pass real readiness probes) through a 10/50/100
// canary, and an Experiment across the two clusters: its app target, a gke
// cluster Scribe provisions through Cluster API, gets the demo services on
// the second cluster's node; its hub target depends on it; and its
// validation workflow runs on the hub, probing the app target's address.
// The loop plays only what cannot run here, and says so: Cluster API (the
// Cluster's and MachinePool's status, the kubeconfig Secret) and the
// cloud's load-balancer controller. It prints progress live (phase, step,
// weights, Scribe's commit, the revision the applier applied, the pods on
// each cluster) until the canary has reached 100% and the Experiment is
// Complete, then a summary with the stage timings.
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
	// The CRs a user would kubectl apply: fixtures/demo.
	exp := &scribev1.Experiment{}
	readFixture(t, "experiment.yaml", exp)
	w, wV2 := &scribev1.Workload{}, &scribev1.Workload{}
	readFixture(t, "workload.yaml", w)
	readFixture(t, "workload-v2.yaml", wV2)
	if exp.Namespace != ns || w.Namespace != ns || len(wV2.Spec.Versions) != len(w.Spec.Versions)+1 {
		t.Fatalf("fixtures/demo: want CRs in namespace %s and workload-v2.yaml to add one version to workload.yaml", ns)
	}
	appTarget := demoAppTarget(t, exp)

	// The hub and the second cluster; the catalog's demo-services come
	// from docker.io, which this machine cannot reach: the node's
	// registry mirrors them with stand-ins.
	s, a := newAppClusterLoop(t, applier, ns)
	ctx, stopProgress := context.WithCancel(context.Background())
	if err := s.Node.PushDemoApp(ctx, s.logf, "example/web", "1", "2", "3"); err != nil {
		t.Fatalf("the demo app's image: %v", err)
	}
	// The clock starts when the machine's node is this run's: other
	// tests may hold it first.
	lockWait := s.Node.Locked.Sub(start)
	start = s.Node.Locked
	booted := time.Since(start)
	fmt.Printf("\nThe loop is up in %s (after %s waiting for the machine's node lock): the hub (Scribe by its chart, %s, the Argo Workflows engine, the real node %s) and a second cluster (its own control plane, the real node %s, API server %s).\n"+
		"What the loop plays, since it cannot run here: Cluster API and its GCP provider (it writes the Cluster's and MachinePool's status and the Secret <cluster>-kubeconfig once the applier has applied them) "+
		"and the cloud's load-balancer controller (it gives the second cluster's LoadBalancer Services an address in %s). Everything else is the real thing.\n\n",
		booted.Round(time.Second), lockWait.Round(time.Second), applier, nodeName, appNodeName, a.Server, appLoadBalancers)
	clock := &demoClock{}
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		printProgress(ctx, s, a, clock, ns, w.Name, exp.Name, appTarget)
	}()
	t.Cleanup(func() { stopProgress(); <-progressDone })

	if err := s.Client.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	clock.start(created)
	// Stage 1: the applier creates the Cluster API objects on the hub;
	// then the loop plays Cluster API.
	cl := waitClusterApplied(t, s, ns, exp.Name+"-"+appTarget)
	clock.mark("Cluster and MachinePool applied by " + string(applier))
	fmt.Printf("%s  %-26s %s\n", time.Now().Format("15:04:05.0"), "the loop plays Cluster API",
		fmt.Sprintf("Cluster %s/%s Available, MachinePool Running, Secret %s-kubeconfig for the second cluster", ns, cl.GetName(), cl.GetName()))
	playClusterAPI(t, s, a, cl)
	clock.mark("Cluster API played (status, kubeconfig Secret)")

	// Meanwhile, the canary. Once v1 serves, steady requests through
	// Traefik and the route as the gateway accepted it show what each
	// version was served at each step.
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
	canaryStart := time.Now()
	walkCanary(t, s, w, wV2.Spec.Versions[len(wV2.Spec.Versions)-1])
	canaryTook := time.Since(canaryStart)
	time.Sleep(3 * time.Second) // the last weights, served a little longer
	var served []string
	if st, ok := <-started; ok {
		served = servedPerStep(st.rec.Stop(), st.load)
		st.load.Stop()
	}
	e := waitExperimentFor(t, s, 8*time.Minute, ns, exp.Name, "the Experiment Complete", func(e *scribev1.Experiment) bool {
		// Failed is final only for the workflow's verdict.
		ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
		return e.Status.Phase == scribev1.ExperimentComplete ||
			e.Status.Phase == scribev1.ExperimentFailed && ready != nil && ready.Reason == controller.ReasonWorkflowFailed
	})
	stopProgress()
	<-progressDone
	ctx = context.Background()
	run := workflowOf(t, s, e)
	probe, probeLog := workflowPod(t, s, run)
	if e.Status.Phase != scribev1.ExperimentComplete {
		t.Fatalf("the Experiment ended %s; the validation pod %s's log:\n%s", describeExperiment(e), probe.Name, probeLog)
	}
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

	addr := targetStatus(e, appTarget).Address
	appPods, err := demoAppPods(ctx, a)
	if err != nil {
		t.Fatalf("the second cluster's pods: %v", err)
	}
	fmt.Printf("\nThe Experiment's walk, from its creation (the loop's clock; stage commits 1 s resolution):\n%s", indent(clock.walk(e, run)+"\n"))
	fmt.Printf("\nOn the second cluster (node %s), delivered by %s through the kubeconfig Secret:\n%s", appNodeName, applier, indent(strings.Join(appPods, "\n")+"\n"))
	fmt.Printf("\nThe app target's address, read back from its LoadBalancer Service: %s. The validation workflow %s ran on the hub's node %s and probed http://%s/:\n%s",
		addr, run.GetName(), probe.Spec.NodeName, addr, indent(probeOutput(probeLog)+"\n"))
	fmt.Printf("\nSUMMARY (%s): the loop with two clusters came up and Scribe was installed by its chart in %s; "+
		"the Workload's canary 10/50/100 was applied by %s and promoted with real pods Ready at each step in %s; "+
		"the Experiment provisioned target %s as a gke cluster (the loop played Cluster API's status and kubeconfig Secret, and the cloud's load-balancer controller), "+
		"its components' %d pods run on the second cluster's node, its hub target followed, and the validation on the hub probed %s and passed: Complete %s after its creation. Total %s from the node lock.\nScribe's commits on %s:\n%s\n",
		applier, booted.Round(time.Second), applier, canaryTook.Round(time.Second), appTarget, len(appPods), addr,
		clock.since().Round(time.Second), time.Since(start).Round(time.Second), RepoName, indent(log))
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
		appKubeconfig := filepath.Join(s.Dir, "app-cluster.kubeconfig")
		if err := os.WriteFile(appKubeconfig, a.Kubeconfig, 0o600); err != nil {
			t.Fatal(err)
		}
		// The applier's own objects: kubectl refuses a list naming a
		// kind the cluster does not serve.
		applied := "kustomizations"
		if applier == scribev1.ApplierArgoCD {
			applied = "applications"
		}
		fmt.Printf("\nThe loop stays up. Try:\n  export KUBECONFIG=%s\n  kubectl get workloads,experiments,%s,clusters -A\n"+
			"  kubectl --kubeconfig %s get pods,services -A   # the second cluster\n"+
			"  kubectl apply -f fixtures/demo/workload-v2.yaml   # after adding a v3 to it: another canary\n  git clone %s\n"+
			"Ctrl-C here, or `make demo-down` elsewhere, stops everything.\n", s.Kubeconfig, applied, appKubeconfig, s.RepoURL)
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

// demoAppTarget is the name of the Experiment's one target on a
// provisioned cluster: the one the demo delivers to the second cluster.
func demoAppTarget(t *testing.T, exp *scribev1.Experiment) string {
	t.Helper()
	var remote []string
	for _, tg := range exp.Spec.Targets {
		if tg.Cluster.Type != scribev1.ClusterHub {
			remote = append(remote, tg.Name)
		}
	}
	if len(remote) != 1 {
		t.Fatalf("fixtures/demo/experiment.yaml: want one target on a provisioned cluster, got %v", remote)
	}
	return remote[0]
}

// waitClusterApplied waits for the applier to have applied the Cluster
// API Cluster name and its MachinePool (the Experiment's first stage),
// and returns the Cluster.
func waitClusterApplied(t *testing.T, s *Stack, ns, name string) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	cl := &unstructured.Unstructured{}
	cl.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	cl.SetKind("Cluster")
	poll(t, 4*time.Minute, "the Cluster and its MachinePool applied from stage 1", func() (bool, string) {
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl)
		if err == nil {
			pool := &unstructured.Unstructured{}
			pool.SetAPIVersion(cl.GetAPIVersion())
			pool.SetKind("MachinePool")
			err = s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-pool"}, pool)
		}
		return err == nil, fmt.Sprint(err)
	})
	return cl
}

// demoAppPods describes the pods of the second cluster's workload
// namespaces: name, node, phase, readiness and IP.
func demoAppPods(ctx context.Context, a *AppCluster) ([]string, error) {
	pods := &corev1.PodList{}
	if err := a.Client.List(ctx, pods); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.Namespace == "kube-system" {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s on %s: %s, ready %v, IP %s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p), p.Status.PodIP))
	}
	sort.Strings(out)
	return out, nil
}

// probeOutput is what the probe itself printed: the stdout lines of its
// container's log as the kubelet stores it (the executor's own lines go to
// stderr), or the whole log when it printed none.
func probeOutput(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if _, msg, ok := strings.Cut(l, " stdout F "); ok {
			out = append(out, msg)
		}
	}
	if len(out) == 0 {
		return strings.TrimSpace(log)
	}
	return strings.Join(out, "\n")
}

// demoClock records when the demo first saw each moment of the
// Experiment's walk, after its creation.
type demoClock struct {
	mu      sync.Mutex
	created time.Time
	names   []string
	at      map[string]time.Duration
}

func (c *demoClock) start(created time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created = created
}

// mark records what, the first time only (nothing before start).
func (c *demoClock) mark(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.created.IsZero() {
		return
	}
	if c.at == nil {
		c.at = map[string]time.Duration{}
	}
	if _, ok := c.at[what]; !ok {
		c.at[what] = time.Since(c.created)
		c.names = append(c.names, what)
	}
}

// since is the time from the Experiment's creation to now.
func (c *demoClock) since() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.created)
}

// walk is the Experiment's timeline: the moments seen, each stage's
// commit (status.stages) and the engine's own times of the workflow run,
// in order.
func (c *demoClock) walk(e *scribev1.Experiment, run *unstructured.Unstructured) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	type moment struct {
		at   time.Duration
		what string
	}
	var ms []moment
	for _, n := range c.names {
		ms = append(ms, moment{c.at[n], n})
	}
	stageNames := map[int32]string{1: "clusters", 2: "components", 3: "workflow templates", 4: "workflow run"}
	for _, st := range e.Status.Stages {
		if st.CommittedAt != nil {
			ms = append(ms, moment{st.CommittedAt.Sub(c.created), fmt.Sprintf("stage %d (%s) committed by Scribe as %s", st.Stage, stageNames[st.Stage], short(st.Commit))})
		}
	}
	for _, f := range []struct{ field, what string }{{"startedAt", "the validation workflow started by the engine"}, {"finishedAt", "the validation workflow finished"}} {
		v, _, _ := unstructured.NestedString(run.Object, "status", f.field)
		if at, err := time.Parse(time.RFC3339, v); err == nil {
			ms = append(ms, moment{at.Sub(c.created), f.what})
		}
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].at < ms[j].at })
	var lines []string
	for _, m := range ms {
		lines = append(lines, fmt.Sprintf("+%-7s %s", m.at.Round(100*time.Millisecond), m.what))
	}
	return strings.Join(lines, "\n")
}

// printProgress prints one line whenever the Workload's or the Experiment's
// state changes: phase, canary step and weights, Scribe's commit, the
// revision the applier last applied for it, the pods on the hub and on the
// second cluster, and the LoadBalancer addresses the loop gave there. It
// marks the Experiment's moments on clock.
func printProgress(ctx context.Context, s *Stack, a *AppCluster, clock *demoClock, ns, workload, experiment, appTarget string) {
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
			show("Pods Ready (hub node)", strings.Join(ds, "  "))
		}
		e := &scribev1.Experiment{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: experiment}, e); err == nil {
			var targets []string
			for _, ts := range e.Status.Targets {
				ready := 0
				for _, c := range ts.Components {
					if c.Ready {
						ready++
					}
				}
				tgt := fmt.Sprintf("%s: %s %d/%d ready", ts.Name, ts.Phase, ready, len(ts.Components))
				if ts.Address != "" {
					tgt += " address " + ts.Address
				}
				if ts.Reason != "" {
					tgt += " (" + ts.Reason + ")"
				}
				targets = append(targets, tgt)
				if ts.Name == appTarget && ts.Address != "" {
					clock.mark("target " + appTarget + "'s address read back: " + ts.Address)
				}
			}
			if e.Status.Phase != "" {
				clock.mark("Experiment " + string(e.Status.Phase))
			}
			show("Experiment "+ns+"/"+experiment, fmt.Sprintf("phase=%-12s stage=%d commit=%-7s applied=%-7s %s",
				e.Status.Phase, e.Status.Stage, short(e.Status.Revision), applied(scribev1.ExperimentKind, experiment), strings.Join(targets, "; ")))
		}
		pods := &corev1.PodList{}
		if err := a.Client.List(ctx, pods); err == nil {
			var ps []string
			all := 0
			for _, p := range pods.Items {
				if p.Namespace == "kube-system" {
					continue
				}
				all++
				if podReady(&p) {
					ps = append(ps, p.Namespace+"/"+p.Name)
				}
			}
			if all > 0 {
				sort.Strings(ps)
				show("Pods Ready (second cluster)", fmt.Sprintf("%d/%d on %s: %s", len(ps), all, appNodeName, strings.Join(ps, " ")))
				if len(ps) == all {
					clock.mark(fmt.Sprintf("%d pods Ready on the second cluster's node", all))
				}
			}
		}
		svcs := &corev1.ServiceList{}
		if err := a.Client.List(ctx, svcs); err == nil {
			var lbs []string
			for _, svc := range svcs.Items {
				if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
					ip := "pending"
					if len(svc.Status.LoadBalancer.Ingress) > 0 {
						ip = svc.Status.LoadBalancer.Ingress[0].IP
						clock.mark("the loop, as the cloud's load-balancer controller, gave Service " + svc.Namespace + "/" + svc.Name + " " + ip)
					}
					lbs = append(lbs, svc.Namespace+"/"+svc.Name+" "+ip)
				}
			}
			if len(lbs) > 0 {
				sort.Strings(lbs)
				show("LoadBalancer (second)", strings.Join(lbs, "  ")+"  (the address: the loop, playing the cloud's load-balancer controller)")
			}
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

func TestProbeOutputKeepsOnlyWhatTheProbePrinted(t *testing.T) {
	tests := []struct{ name, log, want string }{
		{"the executor's stderr lines dropped",
			"2026-11-28T03:10:13.04Z stderr F msg=\"waiting for signals\"\n2026-11-28T03:10:13.06Z stdout F 0 of 10 requests differ: passed\n2026-11-28T03:10:14.05Z stderr F msg=\"sub-process exited\"\n",
			"0 of 10 requests differ: passed"},
		{"several stdout lines kept in order",
			"t stdout F one\nt stderr F x\nt stdout F two", "one\ntwo"},
		{"no stdout line: the whole log", "  not a CRI log line\n", "not a CRI log line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := probeOutput(tc.log); got != tc.want {
				t.Errorf("probeOutput = %q, want %q", got, tc.want)
			}
		})
	}
}
