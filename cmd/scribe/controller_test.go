package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/crds/crdstest"
)

func TestControllerRejectsAnInvalidLogLevel(t *testing.T) {
	t.Setenv(envLogLevel, "loud")
	code, _, stderr := scribe(t, "controller", "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
	if code != exitError {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitError, stderr)
	}
	if !strings.Contains(stderr, `LOG_LEVEL="loud"`) || !strings.Contains(stderr, "debug, info, warn or error") {
		t.Errorf("stderr does not explain LOG_LEVEL:\n%s", stderr)
	}
}

func TestTracingIsOffWithoutAnEndpoint(t *testing.T) {
	t.Setenv(envOTLPEndpoint, "")
	t.Setenv(envOTLPTracesEndpoint, "")
	on, stop, err := setupTracing(context.Background())
	if err != nil || on {
		t.Fatalf("setupTracing = %v, %v; want off", on, err)
	}
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestControllerLogLevels: --log-level, when given, wins over LOG_LEVEL,
// which wins over the default, info; both take Flux's level names and warn.
func TestControllerLogLevels(t *testing.T) {
	for _, tc := range []struct {
		flag    string
		flagSet bool
		env     string
		want    zapcore.Level
	}{
		{want: zapcore.InfoLevel},
		{env: "info", want: zapcore.InfoLevel},
		{env: "DEBUG", want: zapcore.DebugLevel},
		{env: "warn", want: zapcore.WarnLevel},
		{env: "error", want: zapcore.ErrorLevel},
		{env: "trace", want: zapcore.DebugLevel - 1},
		{flag: "info", env: "error", want: zapcore.ErrorLevel}, // the flag's default leaves LOG_LEVEL in charge
		{flag: "debug", flagSet: true, env: "error", want: zapcore.DebugLevel},
		{flag: "warn", flagSet: true, want: zapcore.WarnLevel},
	} {
		got, err := logLevel(tc.flag, tc.flagSet, tc.env)
		if err != nil || got != tc.want {
			t.Errorf("logLevel(%q, %v, %q) = %v, %v; want %v", tc.flag, tc.flagSet, tc.env, got, err, tc.want)
		}
	}
	if _, err := logLevel("", false, "loud"); err == nil || !strings.Contains(err.Error(), envLogLevel) {
		t.Errorf("LOG_LEVEL=loud: err = %v, want it named", err)
	}
	if _, err := logLevel("loud", true, "info"); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("--log-level=loud: err = %v, want it named", err)
	}
}

// TestControllerLogEncodings: --log-encoding json (the default) writes one
// JSON object a line, console a human-readable line; both keep LOG_LEVEL's
// threshold.
func TestControllerLogEncodings(t *testing.T) {
	for _, tc := range []struct {
		encoding string
		json     bool
		want     string
	}{
		{"json", true, `"msg":"reconciled"`},
		{"console", false, "INFO\treconciled\t{\"workload\": \"shop/checkout\"}"},
	} {
		t.Run(tc.encoding, func(t *testing.T) {
			var buf bytes.Buffer
			log := newLogger(&buf, zapcore.InfoLevel, tc.encoding)
			log.Info("reconciled", "workload", "shop/checkout")
			log.V(1).Info("debug line, below the level")
			out := strings.TrimSpace(buf.String())
			if strings.Count(out, "\n") != 0 {
				t.Fatalf("want one line at info, have:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("line %q lacks %q", out, tc.want)
			}
			var obj map[string]any
			if isJSON := json.Unmarshal([]byte(out), &obj) == nil; isJSON != tc.json {
				t.Errorf("line %q: JSON %v, want %v", out, isJSON, tc.json)
			}
		})
	}
}

// TestControllerRejectsBadFlags: every flag error exits 2 and names the
// flag before the cluster is contacted (the kubeconfig does not exist).
func TestControllerRejectsBadFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--watch-label-selector", "sharding.scribe.dev/key in (shard1"}, "--watch-label-selector"},
		{[]string{"--watch-label-selector", "a b"}, "--watch-label-selector"},
		{[]string{"--watch-namespaces", "shop,Not_A_Namespace"}, "--watch-namespaces"},
		{[]string{"--concurrent", "0"}, "--concurrent"},
		{[]string{"--max-renders", "-1"}, "--max-renders"},
		{[]string{"--commit-interval", "-1s"}, "--commit-interval"},
		{[]string{"--poll-interval", "0s"}, "--poll-interval"},
		{[]string{"--leader-elect", "--leader-election-id", ""}, "--leader-election-id"},
		{[]string{"--poll-interval", "soon"}, "--poll-interval"},
		{[]string{"--watched-poll-interval", "0s"}, "--watched-poll-interval"},
		{[]string{"--kube-api-qps", "0"}, "--kube-api-qps"},
		{[]string{"--kube-api-burst", "-5"}, "--kube-api-burst"},
		{[]string{"--log-encoding", "text"}, "--log-encoding"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--events-addr", "notification-controller:80"}, "--events-addr"},
		{[]string{"--events-addr", "http://"}, "--events-addr"},
		{[]string{"--notifications-namespace", "Flux_System"}, "--notifications-namespace"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"controller", "--kubeconfig", missing, "--data-dir", t.TempDir()}, tc.args...)
			code, _, stderr := scribe(t, args...)
			if code != exitError {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitError, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr does not name %s:\n%s", tc.want, stderr)
			}
			if strings.Contains(stderr, missing) {
				t.Errorf("the kubeconfig was read before the flags were checked:\n%s", stderr)
			}
		})
	}
}

// TestControllerRunsWithItsRoleAndStopsOnCancel starts a kube-apiserver,
// runs `scribe controller` as a user that holds only config/rbac/role.yaml,
// and checks that it becomes leader, starts every controller (its informers
// synced under that role), serves /healthz, /readyz and authenticated
// metrics, and exits 0 when its context is cancelled.
func TestControllerRunsWithItsRoleAndStopsOnCancel(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	crdDirs := []string{filepath.Join("..", "..", "config", "crd", "bases")}
	// Flux's and Argo CD's CRDs, which the controller watches.
	upstream := crdstest.Files(t, "flux-source", "flux-kustomize", "argocd")
	env := &envtest.Environment{CRDDirectoryPaths: append(crdDirs, upstream...), ErrorIfCRDPathMissing: true,
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 3 * time.Minute}} // a loaded CI machine is slow to serve them
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // a failed CRD install leaves the control plane running
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// The controller's user holds exactly the generated ClusterRole.
	const user = "scribe-controller-test"
	bindGeneratedRole(ctx, t, admin, user)
	kubeconfig := userKubeconfig(t, env, envtest.User{Name: user})

	// controller-runtime's global logger is set once per process, and
	// given up on 30 s after start: in a long test binary it is already
	// fixed. The command's logs (its manager's and controllers') must not
	// depend on it.
	ctrllog.SetLogger(logr.Discard())
	began := time.Now()
	probe, metrics, pprof := freePort(t), freePort(t), freePort(t)
	const leaseID = "scribe-controller-test.scribe.dev"
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	t.Setenv(envLogLevel, "debug")
	t.Setenv(envOTLPEndpoint, "http://"+freePort(t)) // nothing listens: export fails quietly, shutdown must not hang
	go func() {
		done <- run(runCtx, []string{"controller",
			"--kubeconfig", kubeconfig,
			"--metrics-bind-address", metrics,
			"--health-probe-bind-address", probe,
			"--pprof-bind-address", pprof,
			"--leader-elect", "--leader-election-namespace", "default", "--leader-election-id", leaseID,
			"--watch-label-selector", controller.ShardLabel + "=shard1",
			"--data-dir", t.TempDir(),
			"--concurrent", "2",
			"--events-addr", "http://" + freePort(t) + "/",
			"--notifications-namespace", "default",
		}, &stdout, &stderr)
	}()
	fail := func(format string, args ...any) {
		t.Helper()
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
		t.Fatalf(format+"\nstderr:\n%s", append(args, stderr.String())...)
	}

	plain := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(180 * time.Second)
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case code := <-done:
				done <- code
				fail("scribe controller exited with %d while waiting for %s", code, what)
			default:
			}
			if strings.Contains(stderr.String(), " is forbidden: ") {
				fail("the controller was refused something under config/rbac/role.yaml while waiting for %s", what)
			}
			if time.Now().After(deadline) {
				fail("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		waitUntil(path, func() bool { return statusOf(plain, "http://"+probe+path) == http.StatusOK })
	}
	waitUntil("the leader-election Lease", func() bool {
		var l coordinationv1.Lease
		err := admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: leaseID}, &l)
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	})
	waitUntil("every controller's workers", func() bool {
		s := stderr.String()
		n := strings.Count(s, `"Starting workers"`)
		return n > 0 && n == strings.Count(s, `"Starting Controller"`)
	})
	t.Logf("scribe controller ready, leading and started %s after launch", time.Since(began).Round(time.Millisecond))
	// Metrics are HTTPS (self-signed) and refuse an anonymous scrape.
	secure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the metrics server's certificate is self-signed
	}}
	if got := statusOf(secure, "https://"+metrics+"/metrics"); got != http.StatusUnauthorized {
		fail("anonymous GET https://%s/metrics: status %d, want %d", metrics, got, http.StatusUnauthorized)
	}
	// The profiler answers where it was asked to bind, and only there.
	if got := statusOf(plain, "http://"+pprof+"/debug/pprof/"); got != http.StatusOK {
		fail("GET http://%s/debug/pprof/: status %d, want %d", pprof, got, http.StatusOK)
	}
	if got := statusOf(plain, "http://"+probe+"/debug/pprof/"); got == http.StatusOK {
		fail("the health probe address %s serves the profiler", probe)
	}
	if !strings.Contains(stderr.String(), `"tracing":true`) {
		fail("OTEL_EXPORTER_OTLP_ENDPOINT is set but tracing is off")
	}
	// kube-apiserver has priority and fairness by default; the controller
	// finds it under its Role and leaves the pacing to it.
	if !strings.Contains(stderr.String(), "no client-side limit") {
		fail("the controller kept a client-side rate limit against a kube-apiserver with priority and fairness")
	}
	if s := stderr.String(); strings.Contains(s, " is forbidden: ") {
		fail("the controller was refused something under config/rbac/role.yaml")
	}

	start := time.Now()
	cancel()
	select {
	case code := <-done:
		t.Logf("scribe controller stopped %s after cancel", time.Since(start).Round(time.Millisecond))
		if code != exitOK {
			t.Fatalf("exit code %d after cancel, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatalf("scribe controller did not stop within 45 s of cancel; stderr:\n%s", stderr.String())
	}
	var l coordinationv1.Lease
	if err := admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: leaseID}, &l); err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		t.Errorf("the Lease is still held by %q after shutdown; leadership is not released on cancel", *l.Spec.HolderIdentity)
	}
}

// bindGeneratedRole creates the generated ClusterRole
// (config/rbac/role.yaml) and binds it to user, and to nobody else.
func bindGeneratedRole(ctx context.Context, t testing.TB, admin client.Client, user string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatalf("config/rbac/role.yaml: %v", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scribe-test-" + strings.NewReplacer(":", "-").Replace(user)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{&role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// userKubeconfig adds user to env's API server and writes a kubeconfig
// file for it.
func userKubeconfig(t testing.TB, env *envtest.Environment, user envtest.User) string {
	t.Helper()
	u, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// freePort returns 127.0.0.1:PORT of a port that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// statusOf returns the status code of GET url, or 0 when it fails.
func statusOf(c *http.Client, url string) int {
	resp, err := c.Get(url) //nolint:noctx // bounded by the client's timeout
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// syncBuffer is a bytes.Buffer safe for the controller's logger and the
// test to use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
