package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/crds"
)

// The app cluster: a second cluster beside the loop's hub, the target an
// Experiment provisions and delivers to, with real pods. It has its own
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler (on
// 127.0.0.1, like the hub's), and its own node: a kubelet, kube-proxy and
// containerd in a network namespace of their own, so neither the node's
// ports nor kube-proxy's iptables rules meet the hub node's (two
// kube-proxies in one network namespace would delete each other's
// chains). The hub reaches it the way a provisioned cluster is reached:
//
//   - its API server through AppCluster.Server, an address on the host's
//     end of the namespace's veth (forwarded to its 127.0.0.1 port), which
//     the host's processes (Flux, Argo CD) and the hub's pods both reach;
//     the kubeconfig a Cluster API provider would write names it;
//   - its pods and Services through the host's routes into the namespace
//     (flat networking, as in a VPC).
//
// Its host footprint, all removed by close: the namespace (its veth, the
// bridge appBridge and its iptables go with it: it lives as long as its
// holder process), the cgroups /appCgroupRoot in every hierarchy, the
// state folder (containerd's root, the kubelet's root-dir, CNI state),
// and the sysctls the node's parts set (restored with the real node's).
const (
	appNodeName = "scribe-app-node"
	// appBridge is the pods' bridge inside the namespace.
	appBridge     = "scribe1"
	appPodSubnet  = "10.213.8.0/24"
	appPodGateway = "10.213.8.1"
	// The veth between the host and the namespace: the host's end holds
	// appLinkHost (where the API server and registry are forwarded), the
	// namespace's end appLinkNode (the node's IP).
	appVethHost = "scribe-app0"
	appVethNode = "scribe-app1"
	appLinkHost = "10.213.9.1"
	appLinkNode = "10.213.9.2"
	// appServiceRange is the app cluster's Service range, routed from the
	// host into the namespace (the hub's is 10.96.0.0/16).
	appServiceRange = "10.97.0.0/16"
	appServiceIP    = "10.97.0.1"
	// appLoadBalancers is the range the loop, playing the cloud's load
	// balancer controller, gives the app cluster's LoadBalancer Services:
	// routed from the host to the app node, whose kube-proxy serves them.
	appLoadBalancers = "10.213.10.0/24"
	// appCgroupRoot is the app kubelet's cgroup root: its pods live in
	// /scribe-app/kubepods, apart from the hub node's /kubepods.
	appCgroupRoot = "scribe-app"
	// appStatePrefix names the app node's state folder under the temporary
	// folder; a killed process's is swept by the next.
	appStatePrefix = "scribe-appnode-"
)

// AppCluster is the loop's second cluster (StartAppCluster).
type AppCluster struct {
	Config *rest.Config
	Client client.Client
	// Server is the API server's URL as a provider's kubeconfig gives it:
	// reachable from the host and from the hub's pods.
	Server string
	// Kubeconfig is a cluster-admin kubeconfig for Server: what Cluster
	// API writes into the Secret <cluster>-kubeconfig.
	Kubeconfig []byte
	// APIForward carries Server to the API server: take it Down to make
	// the cluster unreachable.
	APIForward *Proxy

	s          *Stack
	env        *envtest.Environment
	dir        string
	holder     *exec.Cmd // keeps the network namespace alive
	regForward *Proxy
	named      []string // the app cluster's processes, by their loop names
	closeOnce  sync.Once
	// stopIngresses stops publishing the Ingresses' status.
	stopIngresses context.CancelFunc
}

// StartAppCluster starts the app cluster beside a loop on the real node and
// installs on the hub the Cluster API CRDs its targets are provisioned
// with; t.Cleanup stops it before the loop.
func (s *Stack) StartAppCluster(t testing.TB) *AppCluster {
	t.Helper()
	if s.Node == nil {
		t.Fatal("the app cluster needs the real node: StackOptions.RealNode")
	}
	a := &AppCluster{s: s}
	closer := func() { a.closeOnce.Do(a.close) }
	// The loop's stop closes it too (Ctrl-C skips the test's cleanups).
	s.mu.Lock()
	s.closers = append(s.closers, closer)
	s.mu.Unlock()
	t.Cleanup(closer)
	if err := a.start(context.Background()); err != nil {
		t.Fatalf("start the app cluster: %v", err)
	}
	return a
}

func (a *AppCluster) start(ctx context.Context) (err error) {
	s := a.s
	start := time.Now()
	sweepStaleAppNodes(s.logf)
	cp, err := buildDir(s.logf, "build-control-plane.sh", "kube-controller-manager", "kube-scheduler")
	if err != nil {
		return err
	}
	// Cluster API's and its GCP provider's CRDs on the hub: an
	// Experiment's gke target commits a Cluster and its infrastructure.
	var capi []string
	for _, p := range []string{"cluster-api", "capg"} {
		files, err := crds.Files(ctx, p)
		if err != nil {
			return err
		}
		capi = append(capi, files...)
	}
	if _, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Paths: capi, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute}); err != nil {
		return fmt.Errorf("install Cluster API's CRDs on the hub: %w", err)
	}
	if a.dir, err = os.MkdirTemp("", appStatePrefix); err != nil {
		return err
	}
	if err := a.makeNetns(); err != nil {
		return err
	}

	a.env = &envtest.Environment{BinaryAssetsDirectory: cp, ControlPlaneStopTimeout: 15 * time.Second}
	a.env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", appServiceRange)
	if err := prepareAPIServerFor(a.env, a.dir, appLinkHost, appServiceIP); err != nil {
		return err
	}
	s.logf("app cluster: starting etcd and kube-apiserver")
	if a.Config, err = a.env.Start(); err != nil {
		return fmt.Errorf("the app cluster's kube-apiserver: %w", err)
	}
	local, err := urlHostPort(a.Config.Host)
	if err != nil {
		return err
	}
	_, apiPort, _ := net.SplitHostPort(local)
	if a.APIForward, err = NewProxyOn(net.JoinHostPort(appLinkHost, apiPort), local); err != nil {
		return fmt.Errorf("forward the app cluster's API server: %w", err)
	}
	a.Server = "https://" + net.JoinHostPort(appLinkHost, apiPort)
	user, err := a.env.AddUser(envtest.User{Name: "app-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if a.Kubeconfig, err = withServer(kc, a.Server); err != nil {
		return err
	}
	kubeconfig := filepath.Join(a.dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, a.Kubeconfig, 0o600); err != nil {
		return err
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		return err
	}
	if a.Client, err = client.New(a.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}

	certDir := a.env.ControlPlane.APIServer.CertDir
	kcmPort, _ := s.port()
	schedPort, _ := s.port()
	if err := a.run("app-kube-controller-manager", false, filepath.Join(cp, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
		"--leader-elect=false", "--controllers=*", "--bind-address=127.0.0.1", "--secure-port="+kcmPort,
		"--use-service-account-credentials=false"); err != nil {
		return err
	}
	if err := a.run("app-kube-scheduler", false, filepath.Join(cp, "kube-scheduler"),
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+schedPort); err != nil {
		return err
	}
	if err := a.startNode(ctx, kubeconfig); err != nil {
		return err
	}
	// Its Ingresses, as the hub's are (gateway.go): the class the
	// catalog's demo services ask for, published at the node's address
	// by the loop, as an ingress controller would publish them. And its
	// LoadBalancer Services, as a cloud's controller gives them an address
	// (which cannot run here): one of appLoadBalancers each, which routes.
	ic := &unstructured.Unstructured{}
	ic.SetAPIVersion("networking.k8s.io/v1")
	ic.SetKind("IngressClass")
	ic.SetName(IngressClass)
	_ = unstructured.SetNestedField(ic.Object, IngressController, "spec", "controller")
	if err := a.Client.Create(ctx, ic); err != nil {
		return fmt.Errorf("create IngressClass %s on the app cluster: %w", IngressClass, err)
	}
	var ingressCtx context.Context
	ingressCtx, a.stopIngresses = context.WithCancel(context.Background())
	go func() {
		lbs := &loadBalancers{next: 1}
		for ingressCtx.Err() == nil {
			publishIngresses(ingressCtx, a.Client, appLinkNode, s.logf)
			lbs.publish(ingressCtx, a.Client, s.logf)
			select {
			case <-ingressCtx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	s.logf("app cluster: up in %s; API server %s, node %s (%s) with pods on %s",
		time.Since(start).Round(time.Millisecond), a.Server, appNodeName, appLinkNode, appPodSubnet)
	return nil
}

// AnotherAddress forwards a second address on the host's end of the veth
// to the app cluster's API server, and returns its URL and a kubeconfig
// for it: what a second provisioned cluster's provider would write (Argo
// CD tells clusters apart by their server URL). It closes with t.
func (a *AppCluster) AnotherAddress(t testing.TB) (server string, kubeconfig []byte) {
	t.Helper()
	local, err := urlHostPort(a.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := NewProxyOn(net.JoinHostPort(appLinkHost, "0"), local)
	if err != nil {
		t.Fatalf("forward another address to the app cluster's API server: %v", err)
	}
	t.Cleanup(fwd.Close)
	server = "https://" + fwd.Addr
	if kubeconfig, err = withServer(a.Kubeconfig, server); err != nil {
		t.Fatal(err)
	}
	return server, kubeconfig
}

// withServer returns kubeconfig with every cluster's server set to server.
func withServer(kubeconfig []byte, server string) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	return clientcmd.Write(*cfg)
}

// netns is the path of the app node's network namespace.
func (a *AppCluster) netns() string {
	return fmt.Sprintf("/proc/%d/ns/net", a.holder.Process.Pid)
}

// makeNetns creates the network namespace (held by a process that names
// the state folder, so a sweep finds it), its veth to the host and the
// host's routes to the app cluster's pods and Services.
func (a *AppCluster) makeNetns() error {
	a.holder = exec.Command("unshare", "--net", "--", "flock", filepath.Join(a.dir, "netns.lock"), "sleep", "infinity")
	a.holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.holder.Start(); err != nil {
		return fmt.Errorf("start the app node's network namespace: %w", err)
	}
	// unshare has made the namespace once the holder runs flock.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", a.holder.Process.Pid)); err == nil && strings.TrimSpace(string(b)) != "unshare" {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the app node's network namespace did not appear within 10s")
		}
	}
	pid := fmt.Sprint(a.holder.Process.Pid)
	in := func(args ...string) error {
		return runQuiet("nsenter", append([]string{"--net=" + a.netns(), "--"}, args...)...)
	}
	// The pods' bridge, made before the CNI plugin would, with a fixed
	// address (bridgeMAC says why).
	mac, err := bridgeMAC(appPodGateway)
	if err != nil {
		return err
	}
	for _, step := range []func() error{
		func() error { return in("ip", "link", "add", appBridge, "address", mac, "type", "bridge") },
		func() error { return in("ip", "addr", "add", appPodGateway+"/24", "dev", appBridge) },
		func() error { return in("ip", "link", "set", appBridge, "up") },
		func() error {
			return runQuiet("ip", "link", "add", appVethHost, "type", "veth", "peer", "name", appVethNode)
		},
		func() error { return runQuiet("ip", "link", "set", appVethNode, "netns", pid) },
		func() error { return runQuiet("ip", "addr", "add", appLinkHost+"/30", "dev", appVethHost) },
		func() error { return runQuiet("ip", "link", "set", appVethHost, "up") },
		func() error { return in("ip", "link", "set", "lo", "up") },
		func() error { return in("ip", "addr", "add", appLinkNode+"/30", "dev", appVethNode) },
		func() error { return in("ip", "link", "set", appVethNode, "up") },
		func() error { return in("ip", "route", "add", "default", "via", appLinkHost) },
		func() error { return runQuiet("ip", "route", "add", appPodSubnet, "via", appLinkNode) },
		func() error { return runQuiet("ip", "route", "add", appServiceRange, "via", appLinkNode) },
		func() error { return runQuiet("ip", "route", "add", appLoadBalancers, "via", appLinkNode) },
	} {
		if err := step(); err != nil {
			return fmt.Errorf("the app node's network: %w", err)
		}
	}
	return nil
}

// run starts one of the app cluster's processes, in the node's network
// namespace when inNetns.
func (a *AppCluster) run(name string, inNetns bool, bin string, args ...string) error {
	if inNetns {
		args = append([]string{"--net=" + a.netns(), "--", bin}, args...)
		bin = "nsenter"
	}
	a.named = append(a.named, name)
	return a.s.run(name, bin, nil, args...)
}

// startNode runs containerd, the kubelet and kube-proxy in the namespace
// and waits for the node to be Ready.
func (a *AppCluster) startNode(ctx context.Context, kubeconfig string) error {
	n := a.s.Node
	path := func(elem ...string) string { return filepath.Join(append([]string{a.dir}, elem...)...) }
	// The pods' cgroup root, in every hierarchy (the kubelet refuses a
	// root that does not exist); cpuset's needs its CPUs and memory nodes.
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hier {
		if fi, err := os.Stat(h); err != nil || !fi.IsDir() {
			continue
		}
		cg := filepath.Join(h, appCgroupRoot)
		if err := os.Mkdir(cg, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			continue // not a writable hierarchy
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				_ = os.WriteFile(filepath.Join(cg, f), b, 0o644)
			}
		}
	}
	// The registry is the host's, at 127.0.0.1, which the namespace does
	// not share: containerd reaches it (and its mirrors of ghcr.io and
	// docker.io) through a forwarder on the host's end of the veth.
	var err error
	if a.regForward, err = NewProxyOn(net.JoinHostPort(appLinkHost, "0"), n.Registry); err != nil {
		return fmt.Errorf("forward the registry: %w", err)
	}
	mirror := "http://" + a.regForward.Addr
	for _, d := range []string{"containerd/root", "containerd/state", "cni/net.d", "cni/ipam", "opt", "pod-logs"} {
		if err := os.MkdirAll(path(d), 0o755); err != nil {
			return err
		}
	}
	hosts := map[string]string{n.Registry: "http://" + n.Registry}
	for r, upstream := range mirroredRegistries {
		hosts[r] = upstream
	}
	for dir, server := range hosts {
		toml := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", server, mirror)
		if err := os.MkdirAll(path("containerd/certs.d", dir), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path("containerd/certs.d", dir, "hosts.toml"), []byte(toml), 0o644); err != nil {
			return err
		}
	}
	conflist := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "scribe-app-node", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}}
]}
`, appBridge, path("cni/ipam"), appPodSubnet, appPodGateway)
	if err := os.WriteFile(path("cni/net.d/10-scribe-app-node.conflist"), []byte(conflist), 0o644); err != nil {
		return err
	}
	sock := path("containerd", "containerd.sock")
	if err := os.WriteFile(path("containerd/config.toml"), []byte(containerdConfig(path("containerd/root"), path("containerd/state"), sock, path("opt"),
		n.Registry+"/"+pauseImage, path("cni/net.d"), path("containerd/certs.d"))), 0o644); err != nil {
		return err
	}
	if err := a.run("app-containerd", true, "containerd", "--config", path("containerd/config.toml")); err != nil {
		return err
	}
	if err := waitContainerd(sock, func() string { return a.s.Logs("app-containerd", 20) }); err != nil {
		return err
	}

	cfg := kubeletConfig("10250", "10248", sock, path("pod-logs")) + fmt.Sprintf("address: %s\ncgroupRoot: /%s\n", appLinkNode, appCgroupRoot)
	cfgPath := path("kubelet-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := a.run("app-kubelet", true, filepath.Join(n.bins, "kubelet"),
		"--config="+cfgPath, "--kubeconfig="+kubeconfig, "--root-dir="+path("kubelet"),
		"--cert-dir="+path("kubelet", "pki"), "--hostname-override="+appNodeName,
		"--node-ip="+appLinkNode, "--node-labels=scribe.dev/node=app", "--v=1"); err != nil {
		return err
	}
	if err := a.run("app-kube-proxy", true, filepath.Join(n.bins, "kube-proxy"),
		"--kubeconfig="+kubeconfig, "--hostname-override="+appNodeName, "--proxy-mode=iptables",
		"--iptables-localhost-nodeports=false", "--conntrack-max-per-core=0",
		"--bind-address=127.0.0.1", "--nodeport-addresses="+appLinkNode+"/32",
		"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256"); err != nil {
		return err
	}
	return waitNodeReady(ctx, a.Client, appNodeName, func() string { return a.s.Logs("app-kubelet", 30) })
}

// close drains the app node and stops the cluster; it is safe on a
// half-started one.
func (a *AppCluster) close() {
	s := a.s
	if a.stopIngresses != nil {
		a.stopIngresses()
	}
	if a.Client != nil {
		// Nothing makes or places new pods while the kubelet stops them.
		s.stopNamed("app-kube-controller-manager", "app-kube-scheduler")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := drainPods(ctx, a.Client, appNodeName); err != nil {
			s.logf("app cluster: drain: %v", err)
		}
		cancel()
	}
	// Stop the node's processes (the app cluster's only: the names are
	// its own) and the containers' shims, which name the state folder.
	s.stopNamed(a.named...)
	if a.dir != "" {
		killCmdlinesNaming(a.dir)
		killProcsInCgroups(appCgroupRoot)
		if err := unmountUnder(a.dir); err != nil {
			s.logf("app cluster: %v", err)
		}
	}
	// The namespace goes with its last process: the veth, the bridge,
	// the routes and the node's iptables with it.
	if a.holder != nil && a.holder.Process != nil {
		stopProcessGroup(a.holder, 5*time.Second)
	}
	if linkExists(appVethHost) {
		_ = runQuiet("ip", "link", "del", appVethHost)
	}
	removeCgroups(appCgroupRoot)
	if a.APIForward != nil {
		a.APIForward.Close()
	}
	if a.regForward != nil {
		a.regForward.Close()
	}
	if a.env != nil {
		_ = a.env.Stop()
	}
	if a.dir != "" {
		_ = os.RemoveAll(a.dir)
	}
}

// drainPods deletes every pod on node and waits until its kubelet has
// stopped them all.
func drainPods(ctx context.Context, c client.Client, node string) error {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node {
			continue
		}
		if err := c.Delete(ctx, p, client.GracePeriodSeconds(1)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for ctx.Err() == nil {
		if err := c.List(ctx, pods); err != nil {
			return err
		}
		var left []string
		for _, p := range pods.Items {
			if p.Spec.NodeName == node {
				left = append(left, p.Namespace+"/"+p.Name)
			}
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("pods still on %s after the drain", node)
}

// sweepStaleAppNodes removes what the app node of a killed process left:
// its processes (they name its state folder), its containers (in its
// cgroups), mounts, the veth and the cgroups.
func sweepStaleAppNodes(logf func(string, ...any)) {
	stale, _ := filepath.Glob(filepath.Join(os.TempDir(), appStatePrefix+"*"))
	for _, d := range stale {
		logf("app cluster: removing an app node a previous process left in %s", d)
		killCmdlinesNaming(d)
		_ = unmountUnder(d)
		_ = os.RemoveAll(d)
	}
	killProcsInCgroups(appCgroupRoot)
	if linkExists(appVethHost) {
		_ = runQuiet("ip", "link", "del", appVethHost)
	}
	removeCgroups(appCgroupRoot)
}

// loadBalancers plays a cloud's load balancer controller on the app
// cluster: each Service of type LoadBalancer without an address gets the
// next one of appLoadBalancers in status.loadBalancer.ingress, as the
// cloud's controller publishes it; the host routes that range to the app
// node, whose kube-proxy forwards it to the Service's pods.
type loadBalancers struct{ next int }

func (l *loadBalancers) publish(ctx context.Context, c client.Client, logf func(string, ...any)) {
	list := &corev1.ServiceList{}
	if err := c.List(ctx, list); err != nil {
		return
	}
	for i := range list.Items {
		svc := &list.Items[i]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) > 0 || l.next > 254 {
			continue
		}
		ip := fmt.Sprintf("10.213.10.%d", l.next)
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		if err := c.Status().Update(ctx, svc); err != nil {
			if ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				logf("load balancer: status of %s/%s: %v", svc.Namespace, svc.Name, err)
			}
			continue
		}
		l.next++
	}
}
