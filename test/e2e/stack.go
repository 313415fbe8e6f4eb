// Package e2e runs Scribe's real loop on one machine: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok (so Deployments get pods
// that run and become Available), the real Flux source-controller and
// kustomize-controller, a git smart-HTTP server, and the Scribe controller.
// Everything listens on 127.0.0.1 and is built from the Go module proxy into
// a cache outside the repository (hack/build-control-plane.sh,
// hack/build-loop.sh).
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-containerregistry/pkg/registry"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/crds"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// Stack is a running loop.
type Stack struct {
	Config     *rest.Config
	Client     client.Client
	Kubeconfig string
	Git        *publishtest.GitServer
	// RepoURL is the repository's URL through GitProxy, which Flux and
	// Scribe use; take the proxy down to play a git server outage.
	RepoURL  string
	GitProxy *Proxy
	// Registry is an OCI registry (go-containerregistry's) at host:port.
	Registry string
	// Dir holds logs and state.
	Dir string
	// Applier applies what Scribe publishes: Flux (the default) or Argo
	// CD (stack_argocd.go). Flux's source-controller runs either way: it
	// serves the component catalog.
	Applier scribev1.ApplierKind
	// Node is the machine's real node when the loop runs on it (kubelet,
	// containerd, runc: node.go), nil on kwok.
	Node *Node
	// PrometheusURL is the loop's Prometheus (StackOptions.Prometheus),
	// reachable from the host and the pods.
	PrometheusURL string

	// gateway is Traefik, the loop's Gateway API implementation on the
	// real node (traffic.go); nil where the gateway is played (gateway.go).
	gateway    *realGateway
	prometheus bool
	// argoWorkflows: see StackOptions.ArgoWorkflows; dns is the loop's
	// cluster DNS it needs (dns.go).
	argoWorkflows bool
	dns           *clusterDNS
	// fluxLockdown: see StackOptions.FluxLockdown.
	fluxLockdown bool
	// fluxArgs: see StackOptions.FluxArgs.
	fluxArgs []string

	node *nodeAttachment // this loop's kubelet and kube-proxy
	// closers stop what runs beside the loop (the app cluster), first
	// when the loop stops, on Ctrl-C as at the end.
	closers []func()
	// inCluster: Scribe runs as a pod (InstallScribe), its log is the
	// container's.
	inCluster bool
	// podLogs is the real node's pod log folder for this loop (kept
	// with the loop's logs).
	podLogs          string
	controlPlaneOnly bool
	env              *envtest.Environment
	mu               sync.Mutex // guards procs, named and metrics
	procs            []*exec.Cmd
	named            map[string]*exec.Cmd
	// metrics is the Prometheus address of each Flux controller, by name.
	metrics  map[string]string
	logf     func(format string, args ...any)
	stopOnce sync.Once
}

// RepoName is the experiments repository on the git server.
const RepoName = "acme/experiments"

// SyncPath is where Scribe writes in the repository.
const SyncPath = "clusters/dev"

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// buildDir runs a build script and returns the binaries directory it prints.
func buildDir(logf func(string, ...any), script string, args ...string) (string, error) {
	logf("building or finding cached binaries: %s %s", script, strings.Join(args, " "))
	cmd := exec.Command(filepath.Join(repoRoot(), "hack", script), args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr // progress: which binary is building
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w", script, err)
	}
	return strings.TrimSpace(out.String()), nil
}

// freeAddr is a 127.0.0.1 address free when asked. Where the kernel says
// which ports it gives out on its own (Linux: ip_local_port_range, to
// connecting sockets and ":0" listeners of every process), the port is
// picked below that range: a port probed there and released cannot be
// taken by a connection or another test package's listener before the
// loop's process binds it, which a ":0" port could (CI saw kustomize-
// controller fail with "address already in use").
func freeAddr() (string, error) {
	const floor = 15000
	if low := ephemeralLow(); low > floor+1000 {
		for range 50 {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", floor+rand.IntN(low-floor)))
			if err != nil {
				continue // in use
			}
			a := l.Addr().String()
			_ = l.Close()
			return a, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// ephemeralLow is the lowest port the kernel hands out on its own, or 0
// when it cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}

// handedOut is every address a loop of this test process handed out.
// Loops run in parallel (the tests are t.Parallel), and the kernel may
// hand a just-closed port to a second loop before the first loop's
// process has bound it: two processes told the same port fail as "address
// already in use". It is the one piece of state the loops share.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// addr is a free address no other process of any loop was given.
func (s *Stack) addr() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		a, err := freeAddr()
		if err != nil {
			return "", err
		}
		if !handedOut.addrs[a] {
			handedOut.addrs[a] = true
			return a, nil
		}
	}
	return "", fmt.Errorf("no free address after 100 tries")
}

// servedAddr is a free address for a server of the loop that Scribe
// reaches (the git server's proxy, source-controller's artifact storage):
// on the real node, Scribe runs in a pod, so it is the bridge's gateway,
// which the host and the pods both reach; on kwok, 127.0.0.1.
func (s *Stack) servedAddr() (string, error) {
	if s.Node == nil {
		return s.addr()
	}
	p, err := s.port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(s.Node.Gateway, p), nil
}

func (s *Stack) port() (string, error) {
	a, err := s.addr()
	if err != nil {
		return "", err
	}
	_, p, _ := net.SplitHostPort(a)
	return p, nil
}

// Start boots the stack with Flux as the applier; t.Cleanup stops it.
func Start(t testing.TB) *Stack {
	t.Helper()
	return StartWith(t, scribev1.ApplierFlux)
}

// StartWith boots the stack with applier; t.Cleanup stops it.
func StartWith(t testing.TB, applier scribev1.ApplierKind) *Stack {
	t.Helper()
	return StartOpts(t, StackOptions{Applier: applier})
}

// StackOptions say how a loop runs.
type StackOptions struct {
	// Applier applies what Scribe publishes (default Flux).
	Applier scribev1.ApplierKind
	// RealNode runs the loop's pods on the machine's real node (kubelet,
	// containerd, runc) instead of kwok: readiness, restarts and probes
	// are real. Loops on the real node run one at a time.
	RealNode bool
	// ControlPlaneOnly starts the control plane, kwok and the node only:
	// no applier, git server, gateway, catalog or registry (tests of the
	// node itself).
	ControlPlaneOnly bool
	// FluxLockdown runs Flux as its multi-tenancy lockdown asks:
	// kustomize-controller with --no-cross-namespace-refs and a default
	// service account without rights, so a Kustomization applies only
	// what the account it names may; the platform's root Kustomization
	// names an account bound to cluster-admin.
	FluxLockdown bool
	// Prometheus runs a Prometheus that scrapes the real node's pods
	// (traffic.go); RealNode only.
	Prometheus bool
	// ArgoWorkflows runs the Argo Workflows workflow-controller against
	// the loop, its executor image in the node's registry, and the
	// loop's cluster DNS, so workflow pods run on the real node and reach
	// Services by name (stack_workflows.go); RealNode only.
	ArgoWorkflows bool
	// FluxArgs are added to source-controller's and kustomize-controller's
	// command lines (such as Flux's vertical-scaling flags).
	FluxArgs []string
}

// StartOpts boots the stack as opts say; t.Cleanup stops it.
func StartOpts(t testing.TB, opts StackOptions) *Stack {
	t.Helper()
	if opts.Applier == "" {
		opts.Applier = scribev1.ApplierFlux
	}
	s := &Stack{Dir: t.TempDir(), logf: t.Logf, Applier: opts.Applier, controlPlaneOnly: opts.ControlPlaneOnly, prometheus: opts.Prometheus && opts.RealNode, fluxLockdown: opts.FluxLockdown,
		argoWorkflows: opts.ArgoWorkflows && opts.RealNode, fluxArgs: opts.FluxArgs}
	if opts.RealNode {
		// Before the loop's own cleanups: the node is released after the
		// loop has stopped.
		s.Node = AcquireNode(t)
	}
	// Runs after stop and before the TempDir goes: a failed test keeps its
	// logs (every process's, Scribe's included) for inspection.
	t.Cleanup(func() { s.keepLogsOnFailure(t) })
	t.Cleanup(s.stop)
	// Ctrl-C (or SIGTERM) stops the whole loop, envtest's etcd and
	// kube-apiserver included, before the process exits.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	stopSignals := make(chan struct{})
	go func() {
		select {
		case <-sig:
			s.logf("interrupted: stopping the loop")
			s.stop()
			// TestMain's teardown does not run after os.Exit: the real
			// node goes here (make demo-down, Ctrl-C).
			if err := closeNodeAndRestore(); err != nil {
				s.logf("real node: %v", err)
			}
			os.Exit(130)
		case <-stopSignals:
		}
	}()
	t.Cleanup(func() { signal.Stop(sig); close(stopSignals) })
	if err := s.start(t); err != nil {
		t.Fatalf("start the loop: %v", err)
	}
	return s
}

func (s *Stack) start(t testing.TB) error {
	start := time.Now()
	cp, err := buildDir(s.logf, "build-control-plane.sh", "kube-controller-manager", "kube-scheduler")
	if err != nil {
		return err
	}
	loopArgs := []string{}
	if s.controlPlaneOnly {
		loopArgs = append(loopArgs, "kwok")
	}
	loop, err := buildDir(s.logf, "build-loop.sh", loopArgs...)
	if err != nil {
		return err
	}
	// Gateway API's CRDs (the HTTPRoute a canary commits); the Go module
	// proxy serves them, so the loop needs no mirror.
	gatewayAPI, err := crds.Files(context.Background(), "gateway-api")
	if err != nil {
		return err
	}
	// Scribe's CRDs; on the real node its chart installs them
	// (InstallScribe), as users install them.
	scribeCRDs := []string{filepath.Join(repoRoot(), "config", "crd", "bases")}
	if s.Node != nil {
		scribeCRDs = nil
	}
	if !s.controlPlaneOnly {
		// Flux's CRDs, from the controllers' modules.
		gatewayAPI = append(gatewayAPI, filepath.Join(loop, "crds"))
	}
	if s.Node != nil && !s.controlPlaneOnly {
		// Traefik's provider also watches BackendTLSPolicies and
		// TLSRoutes (the rest of the same standard channel) and programs
		// no Gateway until their informers have synced.
		dataPlane, err := crds.Files(context.Background(), "gateway-api-dataplane")
		if err != nil {
			return err
		}
		gatewayAPI = append(gatewayAPI, dataPlane...)
	}
	s.env = &envtest.Environment{
		BinaryAssetsDirectory: cp,
		CRDDirectoryPaths:     append(scribeCRDs, gatewayAPI...),
		ErrorIfCRDPathMissing: true,
		// Bounded, so Ctrl-C never waits long for a graceful apiserver.
		ControlPlaneStopTimeout: 15 * time.Second,
	}
	// Room for thousands of Services (the default /24 holds ~250, which
	// `make bench-e2e`'s 500 Workloads outgrow).
	s.env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	if s.Node != nil {
		if err := prepareAPIServer(s.env, s.Dir); err != nil {
			return err
		}
	}
	s.logf("starting etcd and kube-apiserver")
	cfg, err := s.env.Start()
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	user, err := s.env.AddUser(envtest.User{Name: "loop-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, kc, 0o600); err != nil {
		return err
	}
	s.Config = cfg
	scheme, err := controller.NewScheme()
	if err != nil {
		return err
	}
	// The loop's own checks read CRDs (the chart's, on the real node).
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	if s.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}

	certDir := s.env.ControlPlane.APIServer.CertDir
	kcmPort, _ := s.port()
	schedPort, _ := s.port()
	if err := s.run("kube-controller-manager", filepath.Join(cp, "kube-controller-manager"), nil,
		"--kubeconfig="+s.Kubeconfig, "--authentication-kubeconfig="+s.Kubeconfig, "--authorization-kubeconfig="+s.Kubeconfig,
		"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
		"--leader-elect=false", "--controllers=*", "--bind-address=127.0.0.1", "--secure-port="+kcmPort,
		"--use-service-account-credentials=false",
		// The fake node never fails; under heavy load kwok's lease renewals
		// (every 10 s of a 40 s lease) may still lag. A long grace period
		// keeps a slow machine from marking the node, and so every pod,
		// not ready for good.
		"--node-monitor-grace-period=10m"); err != nil {
		return err
	}
	if err := s.run("kube-scheduler", filepath.Join(cp, "kube-scheduler"), nil,
		"--kubeconfig="+s.Kubeconfig, "--authentication-kubeconfig="+s.Kubeconfig, "--authorization-kubeconfig="+s.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+schedPort); err != nil {
		return err
	}
	if err := s.startKwok(loop); err != nil {
		return err
	}
	ctx := context.Background()
	for _, ns := range []string{"flux-system", "gateway-system"} {
		if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if err := s.createNode(ctx); err != nil {
		return err
	}
	if s.argoWorkflows {
		if s.dns, err = startClusterDNS(net.JoinHostPort(nodeGateway, "53"), s.Client, s.logf); err != nil {
			return err
		}
	}
	if s.Node != nil {
		if err := s.attachNode(ctx); err != nil {
			return err
		}
	}
	if !s.controlPlaneOnly {
		if err := s.startRest(ctx, t); err != nil {
			return err
		}
	}
	s.logf("the loop is up in %s; kubeconfig %s", time.Since(start).Round(time.Millisecond), s.Kubeconfig)
	return nil
}

// startKwok runs kwok with its fake node's stages.
func (s *Stack) startKwok(loop string) error {
	kwokAddr, _ := s.addr()
	stages, _ := filepath.Glob(filepath.Join(loop, "kwok-stages", "*.yaml"))
	kwokArgs := []string{"--kubeconfig=" + s.Kubeconfig, "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--server-address=" + kwokAddr,
		"--cidr=10.244.0.1/16", "--node-ip=127.0.0.1",
		// A Lease renewed like a kubelet's: the heartbeat-with-lease stage
		// updates the Node's status only every 10 min, so without a lease
		// kube-controller-manager sees the node silent for its 50 s grace
		// period, marks it NotReady and every pod Ready=False for good
		// (kwok does not flip them back), and Deployments lose
		// availability in any test running longer than that.
		"--node-lease-duration-seconds=40"}
	for _, st := range stages {
		kwokArgs = append(kwokArgs, "--config="+st)
	}
	return s.run("kwok", filepath.Join(loop, "kwok"), nil, kwokArgs...)
}

// startRest starts the gateway, Flux, the git server, the catalog, the
// applier and the registry.
func (s *Stack) startRest(ctx context.Context, t testing.TB) error {
	loop, err := buildDir(s.logf, "build-loop.sh")
	if err != nil {
		return err
	}
	gwCtx, stopGateway := context.WithCancel(ctx)
	t.Cleanup(stopGateway)
	if err := s.startGateway(gwCtx); err != nil {
		return err
	}
	if s.prometheus {
		if err := s.startPrometheus(); err != nil {
			return err
		}
	}
	// Each loop's Flux gets its own TMPDIR: kustomize-controller removes
	// every kustomization-* directory in its TMPDIR when it starts (the
	// leftovers of a previous process), which in a shared /tmp deleted the
	// directories a parallel loop's kustomize-controller was building in.
	fluxEnv := []string{"KUBECONFIG=" + s.Kubeconfig, "RUNTIME_NAMESPACE=flux-system", "TMPDIR=" + filepath.Join(s.Dir, "flux-tmp")}
	storage, err := s.servedAddr()
	if err != nil {
		return err
	}
	for _, d := range []string{"storage", "flux-tmp"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d), 0o755); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"source-controller", []string{"--storage-addr=" + storage, "--storage-adv-addr=" + storage, "--storage-path=" + filepath.Join(s.Dir, "storage")}},
		{"kustomize-controller", s.kustomizeArgs()},
	} {
		m, _ := s.addr()
		h, _ := s.addr()
		s.mu.Lock()
		if s.metrics == nil {
			s.metrics = map[string]string{}
		}
		s.metrics[c.name] = m
		s.mu.Unlock()
		args := append([]string{"--metrics-addr=" + m, "--health-addr=" + h, "--enable-leader-election=false", "--watch-all-namespaces=true", "--log-level=info"}, c.args...)
		args = append(args, s.fluxArgs...)
		if err := s.run(c.name, filepath.Join(loop, c.name), fluxEnv, args...); err != nil {
			return err
		}
	}

	s.Git = publishtest.NewGitServer(t)
	direct := s.Git.InitRepo(t, RepoName, "main")
	gitAddr, err := s.servedAddr()
	if err != nil {
		return err
	}
	if s.GitProxy, err = NewProxyOn(gitAddr, strings.TrimPrefix(s.Git.URL, "http://")); err != nil {
		return err
	}
	t.Cleanup(s.GitProxy.Close)
	s.RepoURL = strings.Replace(direct, s.Git.URL, "http://"+s.GitProxy.Addr, 1)
	if err := s.createFluxSync(ctx); err != nil {
		return err
	}
	if err := s.createCatalog(ctx, t); err != nil {
		return err
	}
	if s.Applier == scribev1.ApplierArgoCD {
		if err := s.startArgoCD(ctx); err != nil {
			return err
		}
	}
	if s.argoWorkflows {
		if err := s.startArgoWorkflows(ctx); err != nil {
			return err
		}
	}
	if err := s.waitNodeLease(ctx); err != nil {
		return err
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	s.Registry = strings.TrimPrefix(reg.URL, "http://")
	return nil
}

// run starts a process in its own process group, logging to Dir/<name>.log.
func (s *Stack) run(name, bin string, env []string, args ...string) error {
	s.logf("starting %s", name)
	logFile, err := os.Create(filepath.Join(s.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, stopped as a group by stop (on test end, Ctrl-C or
	// SIGTERM). Pdeathsig is not used: it fires when the spawning OS thread
	// exits, which a Go program does not control.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.Adopt(cmd)
	s.mu.Lock()
	if s.named == nil {
		s.named = map[string]*exec.Cmd{}
	}
	s.named[name] = cmd
	s.mu.Unlock()
	return nil
}

// Adopt makes a process the test started itself (in its own process
// group) part of the loop, so stop ends it too, on Ctrl-C as at the end.
func (s *Stack) Adopt(cmd *exec.Cmd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs = append(s.procs, cmd)
}

// keepLogsOnFailure copies the stack's logs of a failed test to
// $SCRIBE_E2E_LOGS (default <tmp>/scribe-e2e-logs)/<test>-<time> and prints
// where, with the tail of Scribe's log.
func (s *Stack) keepLogsOnFailure(t testing.TB) {
	if !t.Failed() {
		return
	}
	root := os.Getenv("SCRIBE_E2E_LOGS")
	if root == "" {
		root = filepath.Join(os.TempDir(), "scribe-e2e-logs")
	}
	dst := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_")+"-"+time.Now().Format("150405"))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Logf("keep logs: %v", err)
		return
	}
	logs, _ := filepath.Glob(filepath.Join(s.Dir, "*.log"))
	if s.podLogs != "" {
		// The pods' logs on the real node (Scribe's among them when it
		// runs in the cluster): <namespace>_<pod>_<uid>/<container>/<n>.log.
		podLogs, _ := filepath.Glob(filepath.Join(s.podLogs+"-kept", "*", "*", "*.log"))
		logs = append(logs, podLogs...)
	}
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			name := filepath.Base(l)
			if s.podLogs != "" && strings.HasPrefix(l, s.podLogs+"-kept/") {
				// pod-<namespace>_<pod>_<uid>-<container>-<n>.log
				rel, _ := filepath.Rel(s.podLogs+"-kept", l)
				name = "pod-" + strings.ReplaceAll(rel, "/", "-")
			}
			_ = os.WriteFile(filepath.Join(dst, name), b, 0o644)
		}
	}
	if s.Node != nil {
		// The host's network as the failure left it (a pod's network
		// lost while the node's other paths work has been seen).
		_ = os.WriteFile(filepath.Join(dst, "host-network.txt"), []byte(hostNetworkState(context.Background())), 0o644)
	}
	t.Logf("the loop's logs are kept in %s; the tail of Scribe's:\n%s", dst, s.Logs("scribe", 30))
}

// Logs returns the tail of a process's log, for failure messages; Scribe's
// is its pod's when it runs in the cluster.
func (s *Stack) Logs(name string, lines int) string {
	if name == "scribe" && s.inCluster {
		pod, err := s.ScribePod(context.Background())
		if err != nil {
			return err.Error()
		}
		return s.NodePodLog(ScribeNamespace, pod.Name, "manager", lines)
	}
	f, err := os.Open(filepath.Join(s.Dir, name+".log"))
	if err != nil {
		return err.Error()
	}
	defer func() { _ = f.Close() }()
	b, _ := io.ReadAll(f)
	all := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (s *Stack) stop() {
	s.stopOnce.Do(s.doStop)
}

func (s *Stack) doStop() {
	s.mu.Lock()
	closers := s.closers
	s.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
	// The workflow engine first: it makes no pod while the node drains.
	s.stopNamed(workflowControllerName)
	// The real node first, while the API server still runs: the kubelet
	// tears this loop's pods down.
	s.detachNode()
	if s.dns != nil {
		s.dns.Close()
	}
	s.mu.Lock()
	procs := append([]*exec.Cmd(nil), s.procs...)
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		if p.Process != nil {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		stopProcessGroup(p, 10*time.Second)
	}
	if s.env != nil {
		_ = s.env.Stop()
	}
}

// stopProcessGroup sends SIGTERM to cmd's process group, SIGKILL after
// grace, and waits for cmd.
func stopProcessGroup(cmd *exec.Cmd, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// waitNodeLease waits (bounded) for kwok to hold the fake node's Lease,
// which keeps the node Ready for kube-controller-manager past its grace
// period.
func (s *Stack) waitNodeLease(ctx context.Context) error {
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		l := &coordinationv1.Lease{}
		if err = s.Client.Get(ctx, types.NamespacedName{Namespace: corev1.NamespaceNodeLease, Name: "kwok-node-0"}, l); err == nil && l.Spec.RenewTime != nil {
			return nil
		}
	}
	return fmt.Errorf("kwok holds no Lease for kwok-node-0 after 30s (last error: %v); kwok log:\n%s", err, s.Logs("kwok", 20))
}

// createNode registers the fake node kwok manages. Beside the real node it
// is tainted: only the pods of namespaces the loop simulates go there
// (SimulateNamespace).
func (s *Stack) createNode(ctx context.Context) error {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "kwok-node-0",
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"kubernetes.io/hostname": "kwok-node-0", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("5000")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("5000")},
		},
	}
	if s.Node != nil {
		n.Spec.Taints = []corev1.Taint{{Key: kwokTaint, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}
	}
	if err := s.Client.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node: %w", err)
	}
	return nil
}

// FluxNobody is the default service account of a locked-down Flux: it
// exists nowhere and has no rights.
const FluxNobody = "flux-nobody"

// FluxRootAccount is the account the platform's root Kustomization applies
// the sync index as in a locked-down Flux (bound to cluster-admin).
const FluxRootAccount = "scribe-root"

// kustomizeArgs are kustomize-controller's arguments beyond the common
// ones: Flux's multi-tenancy lockdown when asked for.
func (s *Stack) kustomizeArgs() []string {
	if !s.fluxLockdown {
		return nil
	}
	return []string{"--no-cross-namespace-refs=true", "--default-service-account=" + FluxNobody}
}

// createFluxRootAccount makes the root Kustomization's account in a
// locked-down Flux: the platform's, with cluster-admin.
func (s *Stack) createFluxRootAccount(ctx context.Context) error {
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: FluxRootAccount, Namespace: "flux-system"}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "flux-system-" + FluxRootAccount},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: FluxRootAccount, Namespace: "flux-system"}},
		},
	} {
		if err := s.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("create the root Kustomization's account: %w", err)
		}
	}
	return nil
}

// createFluxSync makes the GitRepository "scribe" and the root
// Kustomization that applies Scribe's sync index at SyncPath.
func (s *Stack) createFluxSync(ctx context.Context) error {
	gr := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "scribe", Namespace: "flux-system"},
		Spec: sourcev1.GitRepositorySpec{
			URL:       s.RepoURL,
			Interval:  metav1.Duration{Duration: time.Minute},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
		},
	}
	if err := s.Client.Create(ctx, gr); err != nil {
		return fmt.Errorf("create GitRepository: %w", err)
	}
	root := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "scribe-root", Namespace: "flux-system"},
		Spec: kustomizev1.KustomizationSpec{
			Interval:  metav1.Duration{Duration: time.Minute},
			Path:      "./" + SyncPath,
			Prune:     true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "scribe"},
		},
	}
	if s.fluxLockdown {
		if err := s.createFluxRootAccount(ctx); err != nil {
			return err
		}
		root.Spec.ServiceAccountName = FluxRootAccount
	}
	if err := s.Client.Create(ctx, root); err != nil {
		return fmt.Errorf("create root Kustomization: %w", err)
	}
	return nil
}
