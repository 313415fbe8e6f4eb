package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/admissiontest"
)

// Scribe as users run it: its image, pushed to the node's registry, and
// installed into the loop's cluster by its Helm chart (charts/scribe), as
// a pod on the real node with the chart's ServiceAccount, RBAC,
// securityContext, leader election and secure metrics.

// InstallOptions say how InstallScribe installs the chart.
type InstallOptions struct {
	// Values are extra `--set` values (key=value).
	Values []string
}

// helmBinary builds (or finds cached) the helm CLI.
func helmBinary(logf func(string, ...any)) (string, error) {
	return buildDir(logf, "build-helm.sh")
}

// Helm runs the helm CLI against the loop's cluster and returns its output.
func (s *Stack) Helm(ctx context.Context, args ...string) (string, error) {
	helm, err := helmBinary(s.logf)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, helm, append(args, "--kubeconfig", s.Kubeconfig)...)
	cmd.Dir = repoRoot()
	// Helm's caches and config in the loop's folder, not the user's home.
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(s.Dir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(s.Dir, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(s.Dir, "helm", "data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// InstallScribe builds Scribe's image, pushes it to the node's registry and
// installs (or upgrades) the chart with it, then waits for the controller
// pod to be Ready and to hold the leader Lease. It needs the real node.
func (s *Stack) InstallScribe(t *testing.T, opts InstallOptions) {
	t.Helper()
	if s.Node == nil {
		t.Fatal("InstallScribe needs a loop on the real node (StackOptions.RealNode)")
	}
	ctx := context.Background()
	start := time.Now()
	repo, tag, err := s.Node.ScribeImage(ctx, s.logf)
	if err != nil {
		t.Fatalf("Scribe's image: %v", err)
	}
	args := []string{"upgrade", "--install", ScribeRelease, "./charts/scribe",
		"--namespace", ScribeNamespace, "--create-namespace",
		"--set", "image.repository=" + repo, "--set", "image.tag=" + tag,
		// The loop's pace: the tests wait on health polled every second.
		"--set", "extraArgs={--poll-interval=1s}",
		// The platform's egress allowance (the chart's default, said
		// here): the loop's Prometheus, Gitea and receivers are on the
		// node's bridge, a private range.
		"--set", "egress.allowPrivate=true",
		"--set", "logLevel=debug"}
	for _, v := range opts.Values {
		args = append(args, "--set", v)
	}
	if _, err := s.Helm(ctx, args...); err != nil {
		t.Fatal(err)
	}
	s.inCluster = true
	s.waitScribePod(t, start)
	poll(t, time.Minute, "the chart's CRDs Established", func() (bool, string) {
		for _, name := range []string{"workloads", "experiments", "pipelines", "repositories"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := s.Client.Get(ctx, types.NamespacedName{Name: name + ".scribe.dev"}, crd); err != nil {
				return false, err.Error()
			}
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			if !established {
				return false, crd.Name + " not Established"
			}
		}
		return true, ""
	})
	// The chart's finalizer policy needs the new kinds' schemas, which
	// the API server's policy runtime learns every 5 s: until then a
	// creation is refused (ServiceUnavailable). A dry run tells when the
	// policy is loaded and admits creations.
	policy := !slices.Contains(opts.Values, "finalizerPolicy.enabled=false")
	poll(t, time.Minute, "a Workload's creation admitted", func() (bool, string) {
		finalizers, err := admissiontest.ProbeCreation(ctx, s.Client, ScribeNamespace)
		if err != nil {
			return false, err.Error()
		}
		if policy && !slices.Contains(finalizers, controller.Finalizer) {
			return false, fmt.Sprintf("the chart's finalizer policy not in force yet (finalizers %v)", finalizers)
		}
		return true, ""
	})
}

// waitScribePod waits until the chart's Deployment is available and its
// pod holds the leader Lease.
func (s *Stack) waitScribePod(t *testing.T, since time.Time) {
	t.Helper()
	ctx := context.Background()
	poll(t, 3*time.Minute, "Scribe's pod Ready on the real node", func() (bool, string) {
		d := &appsv1.Deployment{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ScribeNamespace, Name: ScribeRelease}, d); err != nil {
			return false, err.Error()
		}
		pod, err := s.ScribePod(ctx)
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == d.Status.Replicas &&
			d.Status.AvailableReplicas == d.Status.Replicas && d.Status.UnavailableReplicas == 0, pod.Name + ": " + podState(pod)
	})
	s.logf("Scribe installed by its chart: pod Ready on %s in %s", nodeName, time.Since(since).Round(time.Millisecond))
}

// ScribeLeader is the holder of the controller's leader-election Lease.
func (s *Stack) ScribeLeader(ctx context.Context) (string, error) {
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return "", err
	}
	leases, err := cs.CoordinationV1().Leases(ScribeNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return *l.Spec.HolderIdentity, nil
		}
	}
	return "", fmt.Errorf("no Lease held in %s", ScribeNamespace)
}

// ScrapeScribeMetrics reads the controller's secure metrics endpoint on
// its pod the way a Prometheus in the cluster does: HTTPS, with a
// ServiceAccount token bound to the chart's metrics-reader ClusterRole. It
// returns the status of a request without a token too (the endpoint must
// refuse it).
func (s *Stack) ScrapeScribeMetrics(ctx context.Context) (withToken string, anonymous int, err error) {
	pod, err := s.ScribePod(ctx)
	if err != nil {
		return "", 0, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "metrics-scraper", Namespace: ScribeNamespace}}
	if err := s.Client.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
		return "", 0, err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scribe-metrics-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ScribeRelease + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ScribeNamespace}},
	}
	if err := s.Client.Create(ctx, crb); client.IgnoreAlreadyExists(err) != nil {
		return "", 0, err
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return "", 0, err
	}
	tok, err := cs.CoreV1().ServiceAccounts(ScribeNamespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", 0, fmt.Errorf("token for %s: %w", sa.Name, err)
	}
	url := "https://" + net.JoinHostPort(pod.Status.PodIP, "8443") + "/metrics"
	// The controller serves a self-signed certificate by default, as
	// controller-runtime's secure metrics do.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the loop's own self-signed endpoint
	get := func(token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		return resp.StatusCode, string(b), err
	}
	code, body, err := get(tok.Status.Token)
	if err != nil {
		return "", 0, err
	}
	if code != http.StatusOK {
		return "", 0, fmt.Errorf("GET %s with a token: %d %s", url, code, body)
	}
	anon, _, err := get("")
	return body, anon, err
}

// KillScribePod kills the controller pod as a node failure does: every
// process of the pod gets SIGKILL on the real node (no graceful stop, its
// leader Lease left to expire), then the pod is force-deleted (its
// emptyDir caches gone) and the Deployment makes a new one.
func (s *Stack) KillScribePod(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	pod, err := s.ScribePod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed := killPodProcesses(string(pod.UID))
	if killed == 0 {
		t.Fatalf("no process of pod %s (uid %s) found in the node's cgroups", pod.Name, pod.UID)
	}
	s.logf("SIGKILL to the %d processes of pod %s", killed, pod.Name)
	if err := s.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	return pod.Name
}

// killPodProcesses sends SIGKILL to every process in the pod's cgroups on
// the real node (cgroupfs: kubepods[/<qos>]/pod<uid>/...) and returns how
// many it found.
func killPodProcesses(uid string) int {
	seen := map[int]bool{}
	for _, pattern := range []string{"/sys/fs/cgroup/pids/kubepods/pod" + uid, "/sys/fs/cgroup/pids/kubepods/*/pod" + uid} {
		dirs, _ := filepath.Glob(pattern)
		for _, d := range dirs {
			_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
				if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
						seen[pid] = true
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
	}
	return len(seen)
}
