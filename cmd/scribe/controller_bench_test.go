package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/crds/crdstest"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// BenchmarkControllerProcess1000Workloads runs `scribe controller` as its
// own process, built as the image builds it (shippedBinary), with its
// default flags, against a real kube-apiserver and
// git server, and creates 1000 one-version Workloads at once. It reports
// the time until every one has a commit in its status, the commits that
// took, and the peak resident set size of the controller process alone
// (VmHWM: the benchmark's own client and git server are not in it).
// SCRIBE_BENCH_WORKLOADS changes the count; SCRIBE_BENCH_ARGS adds flags
// (e.g. "--concurrent 300"); SCRIBE_BENCH_IDENTITY=serviceaccount runs the
// controller as the chart's ServiceAccount with the generated ClusterRole
// (benchKubeconfig); config/admission's policies are installed, as
// config/default installs them (SCRIBE_BENCH_ADMISSION=none leaves them
// out); SCRIBE_BENCH_PROFILE=<folder> keeps the
// process's CPU and heap profiles (benchProfiles). Run it with
// -benchtime=1x (`make bench` does).
func BenchmarkControllerProcess1000Workloads(b *testing.B) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	b.StopTimer() // the clock runs from the creation of the first Workload
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("SCRIBE_BENCH_WORKLOADS")); err == nil && v > 0 {
		n = v
	}
	extra := strings.Fields(os.Getenv("SCRIBE_BENCH_ARGS"))
	binary := shippedBinary(b)
	profiles := newBenchProfiles(b)
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join("..", "..", "config", "crd", "bases")}, crdstest.Files(b, "flux-source", "flux-kustomize")...),
		ErrorIfCRDPathMissing: true,
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: 3 * time.Minute},
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // a failed CRD install leaves the control plane running
		b.Fatalf("start kube-apiserver: %v", err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	scheme, err := controller.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	kubeconfig := benchKubeconfig(ctx, b, env, admin)

	for i := range b.N {
		b.StopTimer()
		ns := fmt.Sprintf("burst-%d", i)
		for _, name := range []string{ns, "flux-system"} {
			if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && i == 0 {
				b.Fatal(err)
			}
		}
		srv := publishtest.NewGitServer(b)
		url := srv.InitRepo(b, "experiments", "main")
		// The platform's source reaches each run's server by an in-cluster
		// name, and vouches for its remote (controller.RemoteURLsAnnotation).
		gr := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "scribe",
			Annotations: map[string]string{controller.RemoteURLsAnnotation: url}},
			Spec: sourcev1.GitRepositorySpec{URL: "http://git.flux-system.svc/experiments.git", Interval: metav1.Duration{Duration: time.Minute},
				SecretRef: &meta.LocalObjectReference{Name: "flux-git"}}}
		if i == 0 {
			if err := admin.Create(ctx, gr); err != nil {
				b.Fatal(err)
			}
		} else {
			old := &sourcev1.GitRepository{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(gr), old); err != nil {
				b.Fatal(err)
			}
			if old.Annotations == nil {
				old.Annotations = map[string]string{}
			}
			old.Annotations[controller.RemoteURLsAnnotation] += "\n" + url
			if err := admin.Update(ctx, old); err != nil {
				b.Fatal(err)
			}
		}
		repo := &scribev1.Repository{
			ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
			Spec: scribev1.RepositorySpec{
				Git:     &scribev1.GitRepositorySpec{URL: url, Branch: "main", Path: "clusters/dev"},
				Applier: scribev1.ApplierSpec{Kind: "Flux", Namespace: "flux-system", Name: "scribe"},
			},
		}
		if err := admin.Create(ctx, repo); err != nil {
			b.Fatal(err)
		}
		admission := os.Getenv(envBenchAdmission) != "none"
		if admission && i == 0 {
			installAdmission(ctx, b, admin, ns)
		}

		args := append([]string{"controller", "--kubeconfig", kubeconfig, "--data-dir", b.TempDir(),
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, append(profiles.args(), extra...)...)
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), envRunMain+"=1", envLogLevel+"=info")
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		stopped := false
		stop := func() {
			if stopped {
				return
			}
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-exited:
				b.Logf("scribe controller stopped: %v", err)
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				b.Logf("scribe controller killed 30 s after SIGTERM: %v", <-exited)
			}
		}
		b.Cleanup(stop)
		wait := func(limit time.Duration, what string, cond func() (bool, string)) {
			b.Helper()
			deadline := time.Now().Add(limit)
			last := ""
			for time.Now().Before(deadline) {
				select {
				case err := <-exited:
					exited <- err
					b.Fatalf("scribe controller exited (%v) while waiting for %s; stderr:\n%s", err, what, tail(stderr.String(), 40))
				default:
				}
				ok, state := cond()
				if ok {
					return
				}
				last = state
				time.Sleep(100 * time.Millisecond)
			}
			b.Fatalf("timed out waiting for %s: %s; stderr:\n%s", what, last, tail(stderr.String(), 40))
		}
		wait(3*time.Minute, "the Repository to be Ready", func() (bool, string) {
			r := &scribev1.Repository{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(repo), r); err != nil {
				return false, err.Error()
			}
			for _, c := range r.Status.Conditions {
				if c.Type == scribev1.ReadyCondition {
					return c.Status == metav1.ConditionTrue, c.Message
				}
			}
			return false, "no Ready condition"
		})
		base, err := strconv.Atoi(publishtest.Git(b, "", "--git-dir", srv.BareDir("experiments"), "rev-list", "--count", "main"))
		if err != nil {
			b.Fatal(err)
		}
		hwmBefore := procKiB(b, cmd.Process.Pid, "VmHWM:")

		timeline := watchBurst(b, cfg, ns)
		requestsBefore := readAPIRequests(ctx, b, cfg)
		b.StartTimer()
		start := time.Now()
		timeline.begin(start)
		profiles.startCPU(cfg)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for j := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				w := &scribev1.Workload{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%04d", j), Namespace: ns},
					Spec: scribev1.WorkloadSpec{
						Service:  scribev1.ServiceSpec{Ports: []scribev1.ServicePort{{Name: "http", Port: 80, TargetPort: 8080}}},
						Versions: []scribev1.Version{{Name: "v1", Image: "ghcr.io/example/web:v1"}},
					},
				}
				if err := admin.Create(ctx, w); err != nil {
					b.Error(err)
				}
				timeline.created(w.Name, w.ResourceVersion)
			}()
		}
		wg.Wait()
		created := time.Since(start)
		// Counted from the timeline's watch: a List of every Workload
		// each poll would cost the API server, whose CPU the burst shares,
		// as much as a few hundred of the writes measured.
		wait(15*time.Minute, "every Workload committed", func() (bool, string) {
			done := timeline.committed()
			return done == n, fmt.Sprintf("%d of %d committed", done, n)
		})
		elapsed := time.Since(start)
		b.StopTimer()
		requests := readAPIRequests(ctx, b, cfg).since(requestsBefore, 8)
		profiles.finish(b)
		b.Log(timeline.report())
		b.Logf("the API server served, from the burst's start until every Workload was committed, %s", requests)
		hwm := procKiB(b, cmd.Process.Pid, "VmHWM:")
		rss := procKiB(b, cmd.Process.Pid, "VmRSS:")
		anon, file := procKiB(b, cmd.Process.Pid, "RssAnon:"), procKiB(b, cmd.Process.Pid, "RssFile:")
		head, err := strconv.Atoi(publishtest.Git(b, "", "--git-dir", srv.BareDir("experiments"), "rev-list", "--count", "main"))
		if err != nil {
			b.Fatal(err)
		}
		stop()
		limit := "the controller did not log its client-side limit"
		for _, line := range strings.Split(stderr.String(), "\n") {
			if i := strings.Index(line, `"msg":"`); i >= 0 && strings.Contains(line, "client-side limit") {
				limit, _, _ = strings.Cut(line[i+len(`"msg":"`):], `"`)
				break
			}
		}
		b.ReportMetric(elapsed.Seconds(), "s-to-all-committed")
		b.ReportMetric(float64(head-base), "commits")
		b.ReportMetric(float64(hwm)/1024, "process-peak-RSS-MiB")
		b.Logf("%s", admissionNote(admission))
		b.Logf("%d Workloads created in %s (flags %q): all committed after %s in %d commits; controller process peak RSS %.0f MiB (%.0f MiB when idle before, %.0f MiB at the end: %.0f MiB anonymous, %.0f MiB of mapped files such as its binary); %s",
			n, created.Round(time.Millisecond), extra, elapsed.Round(time.Millisecond), head-base,
			float64(hwm)/1024, float64(hwmBefore)/1024, float64(rss)/1024, float64(anon)/1024, float64(file)/1024, limit)
	}
}

// procKiB reads a "kB" line of /proc/<pid>/status.
func procKiB(b *testing.B, pid int, key string) int {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("read the controller's /proc status: %v", err)
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				b.Fatalf("%s %q: %v", key, v, err)
			}
			return kb
		}
	}
	b.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// benchKubeconfig is the controller's identity in the benchmark: by
// default a user in system:masters, which the API server's priority and
// fairness exempts; with SCRIBE_BENCH_IDENTITY=serviceaccount the chart's
// ServiceAccount (its name and groups, as a token would give them) holding
// exactly the generated ClusterRole, which priority and fairness queues as
// it queues the shipped controller.
func benchKubeconfig(ctx context.Context, b *testing.B, env *envtest.Environment, admin client.Client) string {
	switch id := os.Getenv("SCRIBE_BENCH_IDENTITY"); id {
	case "":
		return userKubeconfig(b, env, envtest.User{Name: "scribe-bench", Groups: []string{"system:masters"}})
	case "serviceaccount":
		const name = "system:serviceaccount:scribe-system:scribe"
		bindGeneratedRole(ctx, b, admin, name)
		return userKubeconfig(b, env, envtest.User{Name: name, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:scribe-system"}})
	default:
		b.Fatalf("SCRIBE_BENCH_IDENTITY=%q: want serviceaccount or nothing", id)
		return ""
	}
}

// shippedBinary builds cmd/scribe as the Dockerfile does (static,
// -trimpath, stripped) into a temporary folder: the process measured is
// the one users run, not this test binary, whose code and mapped pages
// are not the same. SCRIBE_BENCH_BINARY=test runs the test binary instead.
func shippedBinary(b *testing.B) string {
	b.Helper()
	if os.Getenv("SCRIBE_BENCH_BINARY") == "test" {
		return os.Args[0]
	}
	out := filepath.Join(b.TempDir(), "scribe")
	start := time.Now()
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build cmd/scribe as the image does: %v\n%s", err, msg)
	}
	b.Logf("built cmd/scribe as the image does (CGO_ENABLED=0, -trimpath, -ldflags -s -w) in %s", time.Since(start).Round(time.Millisecond))
	return out
}
