package e2e

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// How a loop uses the real node: its kube-apiserver serves a certificate
// that pods trust for the kubernetes Service, advertises the bridge's
// gateway (forwarded to its 127.0.0.1 port), and admits pods with their
// ServiceAccount token; a kubelet and kube-proxy run against it while the
// loop holds the node.

// kubernetesServiceIP is the first address of the loop's service range
// (stack.go): the kubernetes Service.
const kubernetesServiceIP = "10.96.0.1"

// prepareAPIServer configures a loop's kube-apiserver for the real node
// before it starts.
func prepareAPIServer(env *envtest.Environment, dir string) error {
	return prepareAPIServerFor(env, dir, nodeGateway, kubernetesServiceIP)
}

// prepareAPIServerFor configures a kube-apiserver for a real kubelet before
// it starts: it advertises advertise (a host address forwarded to its
// 127.0.0.1 port) and serves a certificate for it, for serviceIP (its
// kubernetes Service) and for 127.0.0.1.
func prepareAPIServerFor(env *envtest.Environment, dir, advertise, serviceIP string) error {
	api := env.ControlPlane.GetAPIServer()
	certDir := filepath.Join(dir, "apiserver-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	// A serving certificate for every name pods and the host use: envtest's
	// own names only localhost and 127.0.0.1, which a pod reaching
	// https://10.96.0.1 (KUBERNETES_SERVICE_HOST) refuses.
	bundle, key, err := certutil.GenerateSelfSignedCertKey("kube-apiserver",
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP), net.ParseIP(advertise)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	// The bundle is the serving certificate, then its CA.
	first, rest := pem.Decode(bundle)
	if first == nil || len(rest) == 0 {
		return fmt.Errorf("generated certificate bundle has no CA")
	}
	saCert, saKey, err := certutil.GenerateSelfSignedCertKey("service-accounts", nil, nil)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"apiserver.crt": bundle, "apiserver.key": key, "sa-signer.crt": saCert, "sa-signer.key": saKey} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			return err
		}
	}
	api.CertDir = certDir
	api.CA = rest
	args := api.Configure()
	args.Set("advertise-address", advertise)
	// envtest disables the ServiceAccount admission plugin (its tests run
	// no kube-controller-manager); pods need their token.
	args.Set("disable-admission-plugins", "")
	args.Set("enable-admission-plugins", "ServiceAccount")
	return nil
}

// kwokTaint keeps pods off kwok's node in a loop on the real node.
const kwokTaint = "kwok.x-k8s.io/node"

// nodeAttachment is a kubelet and kube-proxy serving one loop.
type nodeAttachment struct {
	node    *Node
	forward *Proxy
	rootDir string
	kubelet string // the names of the loop's processes
	proxy   string
}

// attachNode runs a kubelet and kube-proxy for s against its API server and
// waits for the node to be Ready.
func (s *Stack) attachNode(ctx context.Context) error {
	n := s.Node
	start := time.Now()
	u, err := urlHostPort(s.Config.Host)
	if err != nil {
		return err
	}
	_, apiPort, _ := net.SplitHostPort(u)
	// The kubernetes Service's endpoint is the gateway at the API server's
	// port; forward it to 127.0.0.1, where the API server listens.
	fwd, err := NewProxyOn(net.JoinHostPort(nodeGateway, apiPort), u)
	if err != nil {
		return fmt.Errorf("forward %s:%s to the API server: %w", nodeGateway, apiPort, err)
	}
	a := &nodeAttachment{node: n, forward: fwd, kubelet: "kubelet", proxy: "kube-proxy"}
	s.node = a
	a.rootDir, err = os.MkdirTemp(n.dir, "kubelet-")
	if err != nil {
		return err
	}
	s.podLogs = filepath.Join(s.Dir, "pod-logs")
	kubeletPort, _ := s.port()
	healthPort, _ := s.port()
	cfg := kubeletConfig(kubeletPort, healthPort, n.sock(), s.podLogs) + "address: 127.0.0.1\n"
	if s.dns != nil {
		// The loop's cluster DNS (dns.go): pods resolve Services'
		// names.
		cfg += fmt.Sprintf("clusterDNS: [%q]\nclusterDomain: %s\n", nodeGateway, clusterDomain)
	}
	cfgPath := filepath.Join(s.Dir, "kubelet-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := s.run(a.kubelet, filepath.Join(n.bins, "kubelet"), nil,
		"--config="+cfgPath, "--kubeconfig="+s.Kubeconfig, "--root-dir="+a.rootDir,
		"--cert-dir="+filepath.Join(a.rootDir, "pki"), "--hostname-override="+nodeName,
		"--node-ip="+nodeGateway, "--node-labels=scribe.dev/node=real", "--v=1"); err != nil {
		return err
	}
	metricsPort, _ := s.port()
	proxyHealth, _ := s.port()
	if err := s.run(a.proxy, filepath.Join(n.bins, "kube-proxy"), nil,
		"--kubeconfig="+s.Kubeconfig, "--hostname-override="+nodeName, "--proxy-mode=iptables",
		"--iptables-localhost-nodeports=false", "--conntrack-max-per-core=0",
		"--bind-address=127.0.0.1", "--nodeport-addresses="+nodeSubnet,
		"--metrics-bind-address=127.0.0.1:"+metricsPort, "--healthz-bind-address=127.0.0.1:"+proxyHealth); err != nil {
		return err
	}
	if err := waitNodeReady(ctx, s.Client, nodeName, func() string { return s.Logs("kubelet", 30) }); err != nil {
		return err
	}
	s.logf("real node: %s Ready for this loop in %s", nodeName, time.Since(start).Round(time.Millisecond))
	return nil
}

// kubeletConfig is a real node's kubelet configuration without its
// address: its port and health port, containerd's socket and the pods' log
// folder.
func kubeletConfig(port, healthPort, sock, podLogs string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
port: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %s
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
staticPodPath: ""
makeIPTablesUtilChains: false
serializeImagePulls: false
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 110
`, port, healthPort, sock, podLogs)
}

func urlHostPort(host string) (string, error) {
	h := strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://")
	h = strings.TrimSuffix(h, "/")
	if _, _, err := net.SplitHostPort(h); err != nil {
		return "", fmt.Errorf("API server address %q: %w", host, err)
	}
	return h, nil
}

// waitNodeReady waits up to 60 s for node to be Ready in c's cluster; log
// is its kubelet's log, for the error.
func waitNodeReady(ctx context.Context, c client.Client, node string, log func() string) error {
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		n := &corev1.Node{}
		if err := c.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
			last = err.Error()
			continue
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				last = cond.Reason + ": " + cond.Message
			}
		}
	}
	return fmt.Errorf("node %s not Ready after 60s (%s); kubelet log:\n%s", node, last, log())
}

// detachNode empties the node of this loop's pods (the kubelet tears their
// sandboxes and networks down), stops the kubelet and kube-proxy, removes
// kube-proxy's rules and the kubelet's mounts: the next loop finds the node
// as it was.
func (s *Stack) detachNode() {
	a := s.node
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The kubelet removes a pod's logs with the pod: keep them first.
	if err := copyTree(s.podLogs, s.podLogs+"-kept"); err != nil {
		s.logf("real node: keep the pods' logs: %v", err)
	}
	if err := s.drainNode(ctx); err != nil {
		s.logf("real node: drain: %v", err)
	}
	s.stopNamed(a.proxy, a.kubelet)
	if out, err := exec.Command(filepath.Join(a.node.bins, "kube-proxy"), "--cleanup").CombinedOutput(); err != nil {
		s.logf("real node: kube-proxy --cleanup: %v: %s", err, out)
	}
	// What the kubelet did not tear down (a pod it had not seen deleted):
	// its containers go with the sandboxes through the CRI on the next
	// kubelet start, or with containerd at the node's close.
	killProcsMentioning(a.rootDir)
	if err := unmountUnder(a.rootDir); err != nil {
		s.logf("real node: %v", err)
	}
	_ = os.RemoveAll(a.rootDir)
	a.forward.Close()
	s.node = nil
}

// drainNode deletes every pod on the node and waits until the kubelet has
// stopped them all, the Deployments and controllers first scaled to
// nothing so nothing new is scheduled.
func (s *Stack) drainNode(ctx context.Context) error {
	// Stop kube-controller-manager and kube-scheduler first: nothing makes
	// or places new pods then.
	s.stopNamed("kube-controller-manager", "kube-scheduler")
	return drainPods(ctx, s.Client, nodeName)
}

// stopNamed stops the loop's processes with these names (SIGTERM, then
// SIGKILL after 10 s) and waits for them.
func (s *Stack) stopNamed(names ...string) {
	for _, name := range names {
		s.mu.Lock()
		cmd := s.named[name]
		s.mu.Unlock()
		if cmd == nil || cmd.Process == nil {
			continue
		}
		stopProcessGroup(cmd, 10*time.Second)
	}
}

// NodePodLog returns the tail of a container's log on the real node, read
// from the kubelet's pod log folder (the API server cannot reach a kubelet
// that listens on 127.0.0.1 for `kubectl logs`).
func (s *Stack) NodePodLog(ns, pod, container string, lines int) string {
	if s.podLogs == "" {
		return "no real node"
	}
	dirs, _ := filepath.Glob(filepath.Join(s.podLogs, ns+"_"+pod+"_*", container))
	if len(dirs) == 0 {
		return fmt.Sprintf("no log for %s/%s %s", ns, pod, container)
	}
	logs, _ := filepath.Glob(filepath.Join(dirs[0], "*.log"))
	if len(logs) == 0 {
		return "empty log folder " + dirs[0]
	}
	// The newest restart is the highest number.
	best, bestN := logs[0], -1
	for _, l := range logs {
		if k, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(l), ".log")); err == nil && k > bestN {
			best, bestN = l, k
		}
	}
	return tail(best, lines)
}

// errNoNode is returned by helpers that need the real node in a kwok loop.
var errNoNode = errors.New("this loop runs on kwok, not on the real node")

// RealNodeName is the real node's Node name, for pods pinned to it.
func (s *Stack) RealNodeName() (string, error) {
	if s.node == nil {
		return "", errNoNode
	}
	return nodeName, nil
}

// copyTree copies the regular files under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}
