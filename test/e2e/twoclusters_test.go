package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// newAppClusterLoop boots the loop on the real node with applier and the
// Argo Workflows engine, pushes the stand-ins of the demo services' images
// and Scribe's probe, starts the app cluster,
// installs Scribe by its chart and creates ns with its Repository.
func newAppClusterLoop(t *testing.T, applier scribev1.ApplierKind, ns string) (*Stack, *AppCluster) {
	t.Helper()
	skipWithoutLoop(t)
	s := StartOpts(t, StackOptions{Applier: applier, RealNode: true, ArgoWorkflows: true})
	if err := s.Node.PushStandIns(context.Background(), s.logf); err != nil {
		t.Fatal(err)
	}
	if err := s.Node.PushProbe(context.Background(), s.logf); err != nil {
		t.Fatal(err)
	}
	a := s.StartAppCluster(t)
	var values []string
	if applier == scribev1.ApplierArgoCD {
		// Scribe registers the target clusters with Argo CD.
		values = append(values, "argocdClusters.register=true", "argocdClusters.namespace="+ArgoCDNamespace)
	}
	s.InstallScribe(t, InstallOptions{Values: values})
	newNamespaceAndRepository(t, s, ns)
	// The loop catalog's demo-edge installs into edge: the platform
	// grants the namespace that destination, and the Repository allows
	// it.
	policy := &scribev1.TenantPolicy{}
	if err := s.Client.Get(context.Background(), types.NamespacedName{Name: "tenant-" + ns}, policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.DestinationNamespaces = append(policy.Spec.DestinationNamespaces, "edge")
	if err := s.Client.Update(context.Background(), policy); err != nil {
		t.Fatal(err)
	}
	repo := &scribev1.Repository{}
	if err := s.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "default"}, repo); err != nil {
		t.Fatal(err)
	}
	repo.Spec.AllowedNamespaces = append(repo.Spec.AllowedNamespaces, "edge")
	if err := s.Client.Update(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	return s, a
}

// playClusterAPI does what Cluster API and its provider do once a cluster
// is up, and nothing else: the Cluster's status says Available, its
// MachinePool's Running, and the Secret <cluster>-kubeconfig (key value, owned by the Cluster) holds a
// kubeconfig for the app cluster.
func playClusterAPI(t *testing.T, s *Stack, a *AppCluster, cl *unstructured.Unstructured) {
	t.Helper()
	playClusterAPIWith(t, s, a.Kubeconfig, cl)
}

// playClusterAPIWith is playClusterAPI with the kubeconfig the provider
// writes.
func playClusterAPIWith(t *testing.T, s *Stack, kubeconfig []byte, cl *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	cl.Object["status"] = map[string]any{
		"observedGeneration": cl.GetGeneration(),
		"phase":              "Provisioned",
		"conditions": []any{map[string]any{
			"type": "Available", "status": "True", "reason": "Available", "message": "",
			"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339), "observedGeneration": cl.GetGeneration(),
		}},
	}
	if err := s.Client.Status().Update(ctx, cl); err != nil {
		t.Fatalf("play Cluster API's status of Cluster %s: %v", cl.GetName(), err)
	}
	// The cluster's node pool has joined its nodes (Argo CD's health
	// check of a MachinePool reads its phase).
	pool := &unstructured.Unstructured{}
	pool.SetAPIVersion(cl.GetAPIVersion())
	pool.SetKind("MachinePool")
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: cl.GetNamespace(), Name: cl.GetName() + "-pool"}, pool); err != nil {
		t.Fatalf("the Cluster's MachinePool: %v", err)
	}
	pool.Object["status"] = map[string]any{
		"observedGeneration": pool.GetGeneration(), "phase": "Running",
		"replicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1),
	}
	if err := s.Client.Status().Update(ctx, pool); err != nil {
		t.Fatalf("play Cluster API's status of MachinePool %s: %v", pool.GetName(), err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: cl.GetName() + "-kubeconfig", Namespace: cl.GetNamespace(),
			Labels:          map[string]string{"cluster.x-k8s.io/cluster-name": cl.GetName()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: cl.GetAPIVersion(), Kind: cl.GetKind(), Name: cl.GetName(), UID: cl.GetUID()}},
		},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": kubeconfig},
	}
	if err := s.Client.Create(ctx, secret); err != nil {
		t.Fatalf("play Cluster API's kubeconfig Secret: %v", err)
	}
}

// TestLoopExperimentDeliversToASecondCluster: the gateway tutorial's shape
// across two clusters. An Experiment whose app target is a gke cluster,
// with a hub target that depends on it and a validation workflow on the
// hub that probes the app target's address. Scribe commits the Cluster API objects; the test
// plays Cluster API (the Cluster Available, its kubeconfig Secret), which
// cannot run here, with the cluster's API server unreachable at first:
// the Experiment says TargetUnreachable, naming the server. Once it
// answers, the applier (Flux through the Kustomization's
// kubeConfig.secretRef; Argo CD through the cluster Secret Scribe's
// controller writes from the kubeconfig Secret, never into Git) delivers
// the demo services to the second cluster, whose own node runs their pods,
// the LoadBalancer Service's address is read back into the workflow's
// params, the real engine runs the probe on the hub's node against the
// second cluster, and the Experiment is Complete. The app target's
// telemetry reaches a real collector on the hub under its tenant
// (checkTelemetryReachesTheHub). A dependent hub target's
// workflow component, the catalog's k6 loadgen (its image a stand-in for
// k6, see PushK6), loads the same address to success. A variant on a
// cluster of its own whose validation asks the app for a route it does
// not serve ends Failed with its Workflow's reason. No credential of the cluster reaches a
// commit. Deleting the Experiment prunes the component from the second
// cluster and, with Argo CD, removes the registration.
func TestLoopExperimentDeliversToASecondCluster(t *testing.T) {
	t.Parallel()
	appliers(t, testSecondCluster)
}

func testSecondCluster(t *testing.T, applier scribev1.ApplierKind) {
	ns := "remote"
	// A collector that cannot be built fails the test: it does not skip.
	collector, err := buildDir(t.Logf, "build-otelcol.sh")
	if err != nil {
		t.Fatalf("the OpenTelemetry Collector (hack/build-otelcol.sh): %v", err)
	}
	s, a := newAppClusterLoop(t, applier, ns)
	ctx := context.Background()
	// The hub's collector, where the app target's telemetry goes, and the
	// collector image the catalog's otel-collector names.
	if err := s.Node.PushCollector(ctx, s.logf, collector); err != nil {
		t.Fatal(err)
	}
	hub := a.StartHubCollector(t, collector)
	const tenant = "team-a"
	exp := &scribev1.Experiment{
		ObjectMeta: metav1.ObjectMeta{Name: "across", Namespace: ns},
		Spec: scribev1.ExperimentSpec{
			Description: "the demo services on a second cluster",
			Targets: []scribev1.Target{
				{
					Name: "app", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterGKE, Project: "scribe-e2e"},
					Components:    []scribev1.Component{{App: "demo-services"}, {App: "demo-edge"}},
					Observability: &scribev1.Observability{Enabled: true, Tenant: tenant},
				},
				// A hub target delivered only once the app target is
				// ready.
				{Name: "checks", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Components: []scribev1.Component{{App: "depends-probe"}}, Depends: []string{"app"}},
			},
			// The validation runs on the hub and probes the app
			// target's address, as its LoadBalancer Service reports it.
			Workflow: &scribev1.ExperimentWorkflow{Engine: scribev1.EngineArgo, Template: "gateway-validation",
				Params: &apiextensionsv1.JSON{Raw: []byte(`{"ingressUrl": "http://{{ targets.app.address }}/", "gatewayUrl": "http://{{ targets.app.address }}/", "paths": "/", "requests": "10"}`)}},
			Observability: &scribev1.HubObservability{
				Endpoint: hub.Endpoint,
				// Grafana's datasource names it; nothing queries it here.
				MetricsURL: "http://" + net.JoinHostPort(appLinkHost, "9009") + "/prometheus",
			},
		},
	}
	// The tutorial's load generator: a hub target running the catalog's
	// k6 WorkflowTemplate against the app target's address.
	if err := s.Node.PushK6(ctx, s.logf); err != nil {
		t.Fatal(err)
	}
	exp.Spec.Targets = append(exp.Spec.Targets, scribev1.Target{
		Name: "loadgen", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Depends: []string{"app"},
		Components: []scribev1.Component{{Workflow: "k6-http-loadgen",
			Params: &apiextensionsv1.JSON{Raw: []byte(`{"targetUrl": "http://{{ targets.app.address }}/", "users": "1", "duration": "5s"}`)}}},
	})
	// The variant whose app fails its validation: its own cluster (the
	// same API server at another address, as a second provider's
	// kubeconfig names it), its edge app, and a validation asking the
	// app for a route its load balancer does not serve (port 8081).
	broken := &scribev1.Experiment{
		ObjectMeta: metav1.ObjectMeta{Name: "across-broken", Namespace: ns},
		Spec: scribev1.ExperimentSpec{
			Description: "a validation the app on the second cluster fails",
			Targets: []scribev1.Target{{
				Name: "app", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterGKE, Project: "scribe-e2e"},
				Components: []scribev1.Component{{App: "demo-edge"}},
			}},
			Workflow: &scribev1.ExperimentWorkflow{Engine: scribev1.EngineArgo, Template: "gateway-validation",
				Params: &apiextensionsv1.JSON{Raw: []byte(`{"ingressUrl": "http://{{ targets.app.address }}/", "gatewayUrl": "http://{{ targets.app.address }}:8081/", "paths": "/", "requests": "10"}`)}},
		},
	}
	_, brokenKubeconfig := a.AnotherAddress(t)
	for _, e := range []*scribev1.Experiment{exp, broken} {
		if err := s.Client.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now()

	// Stage 1: the applier creates the Cluster API objects on the hub.
	cl := &unstructured.Unstructured{}
	cl.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	cl.SetKind("Cluster")
	poll(t, 3*time.Minute, "the Cluster and its MachinePool applied from stage 1", func() (bool, string) {
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: exp.Name + "-app"}, cl)
		if err == nil {
			pool := &unstructured.Unstructured{}
			pool.SetAPIVersion(cl.GetAPIVersion())
			pool.SetKind("MachinePool")
			err = s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: exp.Name + "-app-pool"}, pool)
		}
		e := &scribev1.Experiment{}
		_ = s.Client.Get(ctx, client.ObjectKeyFromObject(exp), e)
		return err == nil, fmt.Sprintf("%v; %s", err, describeExperiment(e))
	})
	clusterAt := time.Since(created)

	// The provider reports the cluster up, but its API server does not
	// answer (yet).
	a.APIForward.Down()
	playClusterAPI(t, s, a, cl)
	// The broken variant's cluster is up and answers at its own address.
	brokenCl := &unstructured.Unstructured{}
	brokenCl.SetAPIVersion(cl.GetAPIVersion())
	brokenCl.SetKind("Cluster")
	poll(t, 3*time.Minute, "the broken variant's Cluster and its MachinePool applied", func() (bool, string) {
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: broken.Name + "-app"}, brokenCl)
		if err == nil {
			// Argo CD may apply the Cluster a moment before its MachinePool.
			pool := &unstructured.Unstructured{}
			pool.SetAPIVersion(brokenCl.GetAPIVersion())
			pool.SetKind("MachinePool")
			err = s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: broken.Name + "-app-pool"}, pool)
		}
		return err == nil, fmt.Sprint(err)
	})
	playClusterAPIWith(t, s, brokenKubeconfig, brokenCl)
	e := waitExperimentFor(t, s, 4*time.Minute, ns, exp.Name, "TargetUnreachable", func(e *scribev1.Experiment) bool {
		ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
		return ready != nil && ready.Reason == controller.ReasonTargetUnreachable
	})
	ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
	if !strings.Contains(ready.Message, a.Server) || !strings.Contains(ready.Message, "target app") || e.Status.Phase != scribev1.ExperimentProvisioning {
		t.Fatalf("unreachable, but: %s", describeExperiment(e))
	}
	if app := targetStatus(e, "app"); app.Reason != controller.ReasonTargetUnreachable {
		t.Fatalf("status.targets = %+v", e.Status.Targets)
	}
	t.Logf("%s: reported: %s", applier, ready.Message)
	if err := a.APIForward.Up(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()

	e = waitExperimentFor(t, s, 6*time.Minute, ns, exp.Name, "the Experiment Complete", func(e *scribev1.Experiment) bool {
		// Failed is final only for the workflow's verdict: an applier's
		// failure is read again.
		ready := apimeta.FindStatusCondition(e.Status.Conditions, scribev1.ReadyCondition)
		return e.Status.Phase == scribev1.ExperimentComplete ||
			e.Status.Phase == scribev1.ExperimentFailed && ready != nil && ready.Reason == controller.ReasonWorkflowFailed
	})
	run := workflowNamed(t, s, ns, e.Status.Workflow)
	if e.Status.Phase != scribev1.ExperimentComplete {
		pod, log := workflowPod(t, s, run)
		t.Fatalf("the Experiment ended %s; the validation pod %s's log:\n%s", describeExperiment(e), pod.Name, log)
	}
	t.Logf("%s: Experiment created → Cluster applied %s; the API server back → Complete %s", applier,
		clusterAt.Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))

	// The app target's address, read back from its LoadBalancer Service
	// on the second cluster, is what the validation probed: the engine
	// ran it on the hub's node, and it reached the second cluster's pods.
	addr := targetStatus(e, "app").Address
	if !strings.HasPrefix(addr, "10.213.10.") {
		t.Fatalf("status.targets[app].address = %q, want the LoadBalancer's address in %s", addr, appLoadBalancers)
	}
	args, _, _ := unstructured.NestedSlice(run.Object, "spec", "arguments", "parameters")
	if !strings.Contains(fmt.Sprint(args), "http://"+addr+"/") {
		t.Fatalf("the Workflow's parameters %v do not carry the address %s", args, addr)
	}
	pod, log := workflowPod(t, s, run)
	if pod.Spec.NodeName != nodeName || !strings.Contains(log, "0 of 10 requests differ") {
		t.Fatalf("the probe ran on %q; its log:\n%s", pod.Spec.NodeName, log)
	}
	t.Logf("%s: the probe on the hub asked the app cluster at %s: %s", applier, addr, strings.TrimSpace(log))
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: owned(ns, exp.Name, "depends-probe")}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the dependent hub target's component: %v", err)
	}

	// The load generator, a workflow component of a dependent hub target,
	// ran the catalog's k6 script on the hub's node against the same
	// address until its duration was up, every request answered.
	if len(e.Status.Runs) != 1 || e.Status.Runs[0].Target != "loadgen" {
		t.Fatalf("status.runs = %+v, want the loadgen target's Workflow", e.Status.Runs)
	}
	var load *unstructured.Unstructured
	poll(t, 3*time.Minute, "the loadgen Workflow Succeeded", func() (bool, string) {
		load = workflowNamed(t, s, ns, &e.Status.Runs[0])
		phase, _, _ := unstructured.NestedString(load.Object, "status", "phase")
		msg, _, _ := unstructured.NestedString(load.Object, "status", "message")
		if phase == "Failed" || phase == "Error" {
			pod, log := workflowPod(t, s, load)
			t.Fatalf("the loadgen Workflow %s: %s; pod %s's log:\n%s", phase, msg, pod.Name, log)
		}
		return phase == "Succeeded", phase + " " + msg
	})
	args, _, _ = unstructured.NestedSlice(load.Object, "spec", "arguments", "parameters")
	if !strings.Contains(fmt.Sprint(args), "http://"+addr+"/") {
		t.Fatalf("the loadgen Workflow's parameters %v do not carry the address %s", args, addr)
	}
	// k6's summary is the step's output parameter, as the engine keeps it.
	var summary string
	nodes, _, _ := unstructured.NestedMap(load.Object, "status", "nodes")
	for _, n := range nodes {
		params, _, _ := unstructured.NestedSlice(n.(map[string]any), "outputs", "parameters")
		for _, p := range params {
			if p := p.(map[string]any); p["name"] == "summary" {
				summary, _ = p["value"].(string)
			}
		}
	}
	if !strings.Contains(summary, `"http_req_failed"`) || !strings.Contains(summary, `"rate<0.05": false`) {
		t.Fatalf("the loadgen Workflow's output parameter summary is not k6's summary with its threshold passed: %.500s", summary)
	}
	loadPod, loadLog := workflowPod(t, s, load)
	if loadPod.Spec.NodeName != nodeName || !strings.Contains(loadLog, "http_req_failed................: 0.00%") {
		t.Fatalf("the loadgen ran on %q; its log:\n%s", loadPod.Spec.NodeName, loadLog)
	}
	t.Logf("%s: the loadgen on the hub loaded the app cluster at %s: %s", applier, addr, strings.TrimSpace(loadLog))
	logWorkflowTimes(t, s, load)

	// The broken variant ends Failed with its Workflow's reason: the
	// engine ran the probe, whose requests to the unserved route failed.
	b := waitExperimentFor(t, s, 4*time.Minute, ns, broken.Name, "the broken variant Failed", func(e *scribev1.Experiment) bool {
		return e.Status.Phase == scribev1.ExperimentFailed || e.Status.Phase == scribev1.ExperimentComplete
	})
	brokenRun := workflowNamed(t, s, ns, b.Status.Workflow)
	brokenPhase, _, _ := unstructured.NestedString(brokenRun.Object, "status", "phase")
	brokenMsg, _, _ := unstructured.NestedString(brokenRun.Object, "status", "message")
	brokenReady := apimeta.FindStatusCondition(b.Status.Conditions, scribev1.ReadyCondition)
	brokenPod, brokenLog := workflowPod(t, s, brokenRun)
	if b.Status.Phase != scribev1.ExperimentFailed || brokenPhase != "Failed" || brokenMsg == "" ||
		brokenReady == nil || brokenReady.Reason != controller.ReasonWorkflowFailed || !strings.Contains(brokenReady.Message, brokenMsg) {
		t.Fatalf("the broken variant ended %s, its Workflow %s (%q); the probe's log:\n%s", describeExperiment(b), brokenPhase, brokenMsg, brokenLog)
	}
	if brokenAddr := targetStatus(b, "app").Address; !strings.HasPrefix(brokenAddr, "10.213.10.") || brokenAddr == addr ||
		!strings.Contains(brokenLog, "10 of 10 requests differ") || !strings.Contains(brokenLog, brokenAddr+":8081") {
		t.Fatalf("the broken variant's probe (pod %s) asked %q; its log:\n%s", brokenPod.Name, brokenAddr, brokenLog)
	}
	t.Logf("%s: the broken variant Failed: %s", applier, brokenReady.Message)
	var walk []string
	for _, st := range e.Status.Stages {
		walk = append(walk, fmt.Sprintf("stage %d committed +%s", st.Stage, st.CommittedAt.Sub(e.CreationTimestamp.Time)))
	}
	t.Logf("%s: Experiment created → %s (commits: 1 s resolution; the test held the cluster unreachable in between)", applier, strings.Join(walk, ", "))

	// The app target's telemetry reaches the hub's collector under its
	// tenant.
	checkTelemetryReachesTheHub(t, s, a, hub, applier, ns, tenant)

	// The demo services run on the second cluster's node, not on the hub.
	for _, name := range []string{owned(ns, exp.Name, "demo-http"), owned(ns, exp.Name, "demo-grpc")} {
		d := &appsv1.Deployment{}
		if err := a.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: name}, d); err != nil {
			t.Fatalf("Complete, but the component's Deployment %s is not on the app cluster: %v", name, err)
		}
		if d.Status.ReadyReplicas < 1 {
			t.Fatalf("Deployment %s on the app cluster: %d ready", name, d.Status.ReadyReplicas)
		}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: name}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			t.Fatalf("Deployment %s on the hub: %v", name, err)
		}
	}
	pods := &corev1.PodList{}
	if err := a.Client.List(ctx, pods, client.InNamespace("demo")); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != appNodeName || p.Status.Phase != corev1.PodRunning {
			t.Fatalf("pod %s: %s", p.Name, podState(&p))
		}
	}

	// With Argo CD, the registration Scribe wrote: the destination's
	// name, the server, scoped to the Experiment's AppProject.
	var registration *corev1.Secret
	if applier == scribev1.ApplierArgoCD {
		list := &corev1.SecretList{}
		if err := s.Client.List(ctx, list, client.InNamespace(ArgoCDNamespace), client.MatchingLabels{"argocd.argoproj.io/secret-type": "cluster", "scribe.dev/experiment": exp.Name}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 {
			t.Fatalf("%d Argo CD cluster Secrets for the Experiment", len(list.Items))
		}
		registration = &list.Items[0]
		if got := string(registration.Data["name"]); got != ns+"/"+exp.Name+"/app" || string(registration.Data["server"]) != a.Server {
			t.Fatalf("registration %s: name %q server %q", registration.Name, got, registration.Data["server"])
		}
	}

	// No credential of the cluster is in any commit.
	kc, err := clientcmd.Load(a.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", s.RepoURL, work)
	history := publishtest.Git(t, work, "log", "-p", "--all")
	for name, u := range kc.AuthInfos {
		for what, secret := range map[string][]byte{"client key": u.ClientKeyData, "client certificate": u.ClientCertificateData, "token": []byte(u.Token)} {
			if len(secret) == 0 {
				continue
			}
			if strings.Contains(history, string(secret)) || strings.Contains(history, base64.StdEncoding.EncodeToString(secret)) {
				t.Fatalf("the %s of user %s is in the repository's history", what, name)
			}
		}
	}

	// Deleting it prunes the component from the second cluster, and the
	// registration goes once the applier has pruned.
	for _, del := range []*scribev1.Experiment{e, b} {
		if err := s.Client.Delete(ctx, del); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 4*time.Minute, "the component pruned from the app cluster", func() (bool, string) {
		gone := apierrors.IsNotFound(s.Client.Get(ctx, client.ObjectKeyFromObject(exp), &scribev1.Experiment{}))
		err := a.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: owned(ns, exp.Name, "demo-http")}, &appsv1.Deployment{})
		return gone && apierrors.IsNotFound(err), fmt.Sprintf("experiment gone=%v; Deployment on the app cluster: %v", gone, err)
	})
	if registration != nil {
		err := s.Client.Get(ctx, client.ObjectKeyFromObject(registration), &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("the Argo CD cluster Secret %s outlived the Experiment: %v", registration.Name, err)
		}
	}
}

// workflowNamed returns the Workflow a status (status.workflow or one of
// status.runs) names.
func workflowNamed(t *testing.T, s *Stack, ns string, ws *scribev1.WorkflowStatus) *unstructured.Unstructured {
	t.Helper()
	if ws == nil || ws.Name == "" {
		t.Fatal("the Experiment's status names no Workflow")
	}
	run := &unstructured.Unstructured{}
	run.SetAPIVersion("argoproj.io/v1alpha1")
	run.SetKind("Workflow")
	if err := s.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: ws.Name}, run); err != nil {
		t.Fatalf("the Workflow %q the Experiment names: %v", ws.Name, err)
	}
	return run
}

// targetStatus is the Experiment's status of target name.
func targetStatus(e *scribev1.Experiment, name string) scribev1.TargetStatus {
	for _, ts := range e.Status.Targets {
		if ts.Name == name {
			return ts
		}
	}
	return scribev1.TargetStatus{}
}
