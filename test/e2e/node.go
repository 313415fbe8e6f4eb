package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// The real node: containerd, runc and the CNI bridge plugin from Debian, and
// a kubelet and kube-proxy built from the control plane's module, on this
// machine. One node per machine (a lock file in the cache keeps a second
// test process off it) and one loop on it at a time: a kubelet registers
// with one kube-apiserver, and kube-proxy owns the host's KUBE-* chains.
// Loops that need real pods (health, readiness, restarts, Scribe as a pod)
// wait for it; the rest run on kwok in parallel.
//
// Its layout on the host, all removed by Close:
//   - state under one temporary folder: containerd's root, state and socket,
//     the CNI config and IPAM store, the kubelet's root-dir (a bind mount)
//     and pod logs;
//   - the bridge nodeBridge with nodeGateway on nodeSubnet;
//   - iptables chains kube-proxy and the kubelet make (KUBE-*);
//   - cgroups /kubepods in every hierarchy;
//   - sysctls the kubelet, kube-proxy and the bridge plugin set (restored);
//   - paths the components hard-code (/var/lib/kubelet/device-plugins,
//     /run/containerd/s, /var/lib/cni), removed when they were not there
//     before.
//
// hoststate.go snapshots the host before and checks it after.

const (
	nodeName    = "scribe-node"
	nodeBridge  = "scribe0"
	nodeSubnet  = "10.213.7.0/24"
	nodeGateway = "10.213.7.1"
	// pauseImage is the sandbox image, pushed to the node's registry.
	pauseImage = "scribe-e2e/pause:1"
)

// mirroredRegistries are served by the node's registry first: the demo
// app stands in for the fixtures' ghcr.io/example/* images and the
// catalog's docker.io images (PushStandIns), which this machine cannot
// pull.
var mirroredRegistries = map[string]string{"ghcr.io": "https://ghcr.io", "docker.io": "https://registry-1.docker.io"}

// Node is the machine's real node, started by AcquireNode.
type Node struct {
	// Registry is the node's OCI registry (host:port on 127.0.0.1): the
	// kubelet pulls every image of the loop from it.
	Registry string
	// Gateway is the bridge's address on the host: what pods reach the
	// host's servers (git, the API server's forwarder) at.
	Gateway string
	// Locked is when this process got the machine's node lock (another
	// process's tests may hold it first).
	Locked time.Time

	dir        string
	bins       string // kubelet, kube-proxy
	containerd *exec.Cmd
	reg        *http.Server
	logf       func(string, ...any)
	lock       *os.File
	created    []string // host paths the node created, removed on Close
	images     nodeImages
	sysctlFile string // the host's sysctls before the node, restored on Close
}

// nodeHolder is the machine's node of this test process, started on first
// use and closed by TestMain; busy serializes the loops on it.
var nodeHolder struct {
	mu   sync.Mutex
	node *Node
	err  error
	busy sync.Mutex
	// before is the host as TestMain read it before any test, for the
	// sysctls to restore.
	before *hostState
	// lock is the machine's node lock of a closed node, held until
	// TestMain has compared the host with before: released earlier,
	// another process waiting for it starts its node while the check
	// reads the host, and the check reports that node's processes.
	lock *os.File
}

// NodeRequired reports whether the real node must run (CI sets
// SCRIBE_NODE_REQUIRED=1): then a machine that cannot run it fails the
// tests that need it, instead of skipping them.
func NodeRequired() bool { return os.Getenv("SCRIBE_NODE_REQUIRED") == "1" }

// nodeUnavailable says why this machine cannot run the real node, or "".
func nodeUnavailable() string {
	if os.Geteuid() != 0 {
		return "the real node needs root (kubelet, containerd, the bridge and iptables)"
	}
	var missing []string
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc", "iptables", "ip", "ctr"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		missing = append(missing, "/usr/lib/cni/bridge")
	}
	if len(missing) > 0 {
		return "missing " + strings.Join(missing, ", ") + " (hack/node-packages.sh installs them)"
	}
	return ""
}

// AcquireNode returns the machine's real node, starting it on first use,
// and holds it for t: one loop at a time. It skips t when the machine
// cannot run the node, naming what is missing, or fails under
// SCRIBE_NODE_REQUIRED=1.
func AcquireNode(t testing.TB) *Node {
	t.Helper()
	if why := nodeUnavailable(); why != "" {
		if NodeRequired() {
			t.Fatalf("SCRIBE_NODE_REQUIRED=1: %s", why)
		}
		t.Skipf("no real node: %s", why)
	}
	nodeHolder.busy.Lock()
	t.Cleanup(nodeHolder.busy.Unlock)
	nodeHolder.mu.Lock()
	defer nodeHolder.mu.Unlock()
	if nodeHolder.node == nil && nodeHolder.err == nil {
		nodeHolder.node, nodeHolder.err = startNode(t.Logf)
	}
	if nodeHolder.err != nil {
		t.Fatalf("start the real node: %v", nodeHolder.err)
	}
	return nodeHolder.node
}

// closeNode stops the machine's node if this process started one.
func closeNode() error {
	nodeHolder.mu.Lock()
	defer nodeHolder.mu.Unlock()
	if nodeHolder.node == nil {
		return nil
	}
	// The lock stays held after the node closes (releaseNodeLock).
	nodeHolder.lock, nodeHolder.node.lock = nodeHolder.node.lock, nil
	err := nodeHolder.node.Close()
	nodeHolder.node = nil
	return err
}

// releaseNodeLock releases the node lock of the node closeNode closed
// (the process's exit releases it too).
func releaseNodeLock() {
	nodeHolder.mu.Lock()
	defer nodeHolder.mu.Unlock()
	if nodeHolder.lock != nil {
		_ = nodeHolder.lock.Close() // releases the flock
		nodeHolder.lock = nil
	}
}

// closeNodeAndRestore closes the node and restores the sysctls TestMain
// read before the run.
func closeNodeAndRestore() error {
	err := closeNode()
	nodeHolder.mu.Lock()
	before := nodeHolder.before
	nodeHolder.mu.Unlock()
	if before != nil {
		err = errors.Join(err, restoreSysctls(*before))
	}
	return err
}

func startNode(logf func(string, ...any)) (_ *Node, err error) {
	start := time.Now()
	cache, err := cacheDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	// One node per machine: another test process (make demo beside make
	// test) waits here rather than fight over the bridge and iptables.
	lock, err := os.OpenFile(filepath.Join(cache, "node.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	logf("real node: waiting for the machine's node lock %s", lock.Name())
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	locked := time.Now()
	bins, err := buildDir(logf, "build-control-plane.sh", "kubelet", "kube-proxy")
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	dir, err := os.MkdirTemp("", "scribe-node-")
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	sysctlFile := filepath.Join(cache, "node-sysctls.json")
	n := &Node{dir: dir, bins: bins, logf: logf, lock: lock, Gateway: nodeGateway, Locked: locked}
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	// A previous process that was SIGKILLed may have left its node
	// behind: sweep what a node of ours leaves before making a new one.
	sweepStaleNodes(logf, bins)
	// The host's sysctls as the node found them, kept in the cache until
	// the node closes: a process killed before its teardown leaves them
	// for the next node to restore.
	if b, err := os.ReadFile(sysctlFile); err == nil {
		var was hostState
		if json.Unmarshal(b, &was) == nil {
			logf("real node: restoring the sysctls a killed process left changed")
			_ = restoreSysctls(was)
			// They are the host's own: what this run must leave (TestMain
			// read the host after the killed run). AcquireNode holds
			// nodeHolder.mu.
			if nodeHolder.before != nil {
				for k, v := range was.Sysctls {
					nodeHolder.before.Sysctls[k] = v
				}
			}
		}
	}
	if b, err := json.Marshal(hostState{Sysctls: readHostState().Sysctls}); err == nil && os.WriteFile(sysctlFile, b, 0o644) == nil {
		n.sysctlFile = sysctlFile
	}
	for _, p := range []string{"/var/lib/kubelet", "/run/containerd", "/var/lib/cni", "/opt/containerd", "/var/log/containers", "/var/log/pods"} {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			n.created = append(n.created, p)
		}
	}
	if err := n.startRegistry(); err != nil {
		return nil, err
	}
	if err := n.push(context.Background(), logf, pauseApp(), n.Registry+"/"+pauseImage); err != nil {
		return nil, fmt.Errorf("push the pause image: %w", err)
	}
	if err := n.makeBridge(); err != nil {
		return nil, err
	}
	if err := n.startContainerd(); err != nil {
		return nil, err
	}
	logf("real node: containerd, the bridge %s (%s) and the registry %s are up in %s", nodeBridge, nodeGateway, n.Registry, time.Since(start).Round(time.Millisecond))
	return n, nil
}

func cacheDir() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "scribe"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "scribe"), nil
}

func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.dir}, elem...)...) }

// startRegistry serves go-containerregistry's registry on 127.0.0.1.
func (n *Node) startRegistry() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	n.Registry = ln.Addr().String()
	n.reg = &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = n.reg.Serve(ln) }()
	return nil
}

// makeBridge creates the bridge with the gateway address before any pod,
// so the API server's forwarder can listen there; the CNI bridge plugin
// then uses it as it is.
func (n *Node) makeBridge() error {
	mac, err := bridgeMAC(nodeGateway)
	if err != nil {
		return err
	}
	if err := runQuiet("ip", "link", "add", nodeBridge, "address", mac, "type", "bridge"); err != nil {
		return err
	}
	if err := runQuiet("ip", "addr", "add", nodeGateway+"/24", "dev", nodeBridge); err != nil {
		return err
	}
	return runQuiet("ip", "link", "set", nodeBridge, "up")
}

func (n *Node) startContainerd() error {
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/certs.d/" + n.Registry, "cni/net.d", "cni/ipam", "opt"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return err
		}
	}
	// The node's registry, and a mirror of it for the registries whose
	// example images the fixtures name (ghcr.io/example/web:1 is the demo
	// app, pushed as example/web:1): containerd asks the mirror first, as
	// in an air-gapped cluster.
	hosts := map[string]string{n.Registry: "http://" + n.Registry}
	for r, upstream := range mirroredRegistries {
		hosts[r] = upstream
	}
	for dir, server := range hosts {
		toml := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", server, "http://"+n.Registry)
		if err := os.MkdirAll(n.path("containerd/certs.d", dir), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(n.path("containerd/certs.d", dir, "hosts.toml"), []byte(toml), 0o644); err != nil {
			return err
		}
	}
	conflist := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "scribe-node", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}}
]}
`, nodeBridge, n.path("cni/ipam"), nodeSubnet, nodeGateway)
	if err := os.WriteFile(n.path("cni/net.d/10-scribe-node.conflist"), []byte(conflist), 0o644); err != nil {
		return err
	}
	cfg := containerdConfig(n.path("containerd/root"), n.path("containerd/state"), n.sock(), n.path("opt"),
		n.Registry+"/"+pauseImage, n.path("cni/net.d"), n.path("containerd/certs.d"))
	if err := os.WriteFile(n.path("containerd/config.toml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	logFile, err := os.Create(n.path("containerd.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command("containerd", "--config", n.path("containerd/config.toml"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start containerd: %w", err)
	}
	n.containerd = cmd
	return waitContainerd(n.sock(), func() string { return tail(n.path("containerd.log"), 20) })
}

// waitContainerd waits up to 30 s for containerd to answer on sock.
func waitContainerd(sock string, log func() string) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out, err := exec.Command("ctr", "--address", sock, "version").CombinedOutput(); err == nil && bytes.Contains(out, []byte("Server:")) {
			return nil
		}
	}
	return fmt.Errorf("containerd did not answer on %s within 30s; its log:\n%s", sock, log())
}

// containerdConfig is a node's containerd configuration: its own root,
// state, sockets and plugin folder, the pause image, the CNI config folder
// and the registry hosts folder.
func containerdConfig(root, state, sock, opt, pause, cniConf, certsDir string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  # The VM lacks CAP_SYS_RESOURCE: without this every sandbox fails.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[8]q
`, root, state, sock, sock+".ttrpc", opt, pause, cniConf, certsDir)
}

func (n *Node) sock() string { return n.path("containerd", "containerd.sock") }

// Close stops the node and restores the host: it is safe to call on a
// half-started node.
func (n *Node) Close() error {
	var errs []error
	if n.containerd != nil && n.containerd.Process != nil {
		_ = syscall.Kill(-n.containerd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = n.containerd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-n.containerd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	// The shims outlive containerd (they are their own sessions): kill
	// every process that names this node's folder, then the mounts.
	killProcsMentioning(n.dir)
	if err := unmountUnder(n.dir); err != nil {
		errs = append(errs, err)
	}
	if err := runQuiet("ip", "link", "del", nodeBridge); err != nil && linkExists(nodeBridge) {
		errs = append(errs, err)
	}
	removeKubeChains()
	removeCgroups("kubepods")
	for i := len(n.created) - 1; i >= 0; i-- {
		if err := os.RemoveAll(n.created[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if n.reg != nil {
		_ = n.reg.Close()
	}
	if err := os.RemoveAll(n.dir); err != nil {
		errs = append(errs, err)
	}
	if n.sysctlFile != "" {
		if b, err := os.ReadFile(n.sysctlFile); err == nil {
			var was hostState
			if json.Unmarshal(b, &was) == nil {
				if err := restoreSysctls(was); err != nil {
					errs = append(errs, err)
				}
			}
		}
		_ = os.Remove(n.sysctlFile)
	}
	if n.lock != nil {
		_ = n.lock.Close() // releases the flock
	}
	return errors.Join(errs...)
}

// sweepStaleNodes removes what a node of a killed process left: its
// processes, mounts, bridge, chains and cgroups. The node lock is held, so
// no live node is touched.
func sweepStaleNodes(logf func(string, ...any), bins string) {
	stale, _ := filepath.Glob(filepath.Join(os.TempDir(), "scribe-node-*"))
	for _, d := range stale {
		logf("real node: removing a node a previous process left in %s", d)
		killProcsMentioning(d)
		_ = unmountUnder(d)
		_ = os.RemoveAll(d)
	}
	// A kubelet or kube-proxy of a killed loop names the loop's folder,
	// not the node's: with the node lock held, any process running these
	// binaries is stale (a live kube-proxy would keep writing KUBE-*
	// chains).
	killed := killProcsRunning(filepath.Join(bins, "kubelet"), filepath.Join(bins, "kube-proxy"))
	if killed > 0 {
		logf("real node: stopped %d kubelet and kube-proxy processes a previous process left", killed)
	}
	if linkExists(nodeBridge) {
		_ = runQuiet("ip", "link", "del", nodeBridge)
	}
	if len(stale) > 0 || killed > 0 {
		_ = exec.Command(filepath.Join(bins, "kube-proxy"), "--cleanup").Run()
		removeKubeChains()
		removeCgroups("kubepods")
	}
}

// killProcsRunning SIGKILLs every process whose executable is one of bins
// and returns how many there were.
func killProcsRunning(bins ...string) int {
	want := map[string]bool{}
	for _, b := range bins {
		want[b] = true
	}
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && want[exe] {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	}
	return n
}

func runQuiet(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
