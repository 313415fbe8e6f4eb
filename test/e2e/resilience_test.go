package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

func TestLoopGitServerOutageIsReportedAndRetried(t *testing.T) {
	t.Parallel()
	ns := "outage"
	s := newLoop(t, ns)
	get := createHealthy(t, s, canaryWorkload(ns))
	s.GitProxy.Down()
	updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, webV2()) })
	poll(t, time.Minute, "the outage reported", func() (bool, string) {
		for _, c := range get().Status.Conditions {
			if c.Type == scribev1.ReadyCondition && c.Reason == string(publish.ReasonUnreachable) {
				return true, c.Message
			}
		}
		return false, describe(get())
	})
	time.Sleep(30 * time.Second) // the git server stays away for 30 s
	if err := s.GitProxy.Up(); err != nil {
		t.Fatal(err)
	}
	poll(t, 5*time.Minute, "the canary completed after the outage", func() (bool, string) {
		got := get()
		return got.Status.StableVersion == "v2" && got.Status.Phase == scribev1.WorkloadHealthy, describe(got)
	})
}

// scribeBinary builds cmd/scribe for the test.
func scribeBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "scribe")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/scribe")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build scribe: %v\n%s", err, out)
	}
	return bin
}

// startScribeProcess runs `scribe controller` as its own process, as in a
// cluster, so the test can SIGKILL it.
func startScribeProcess(t *testing.T, s *Stack, bin, dataDir, logName string) *exec.Cmd {
	t.Helper()
	health, _ := s.addr()
	cmd := exec.Command(bin, "controller", "--kubeconfig", s.Kubeconfig, "--metrics-secure=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", health, "--data-dir", dataDir, "--poll-interval", "1s")
	f, err := os.Create(filepath.Join(s.Dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Adopt(cmd)
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_, _ = cmd.Process.Wait()
		_ = f.Close()
	})
	return cmd
}

func TestLoopScribeKilledMidCanaryResumesWithoutRepeatingOrSkippingAStep(t *testing.T) {
	t.Parallel()
	appliers(t, testKilledMidCanary)
}

func testKilledMidCanary(t *testing.T, applier scribev1.ApplierKind) {
	skipWithoutLoop(t)
	s := StartWith(t, applier)
	ns := "killed"
	bin := scribeBinary(t)
	newNamespaceAndRepository(t, s, ns)
	first := startScribeProcess(t, s, bin, t.TempDir(), "scribe-1.log")

	w := canaryWorkload(ns)
	w.Spec.Rollout.Steps[0].Pause = &metav1.Duration{Duration: 15 * time.Second}
	get := createHealthy(t, s, w)
	updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, webV2()) })
	poll(t, 3*time.Minute, "step 1 holding", func() (bool, string) {
		got := get()
		return got.Status.Step == 0 && got.Status.CanaryVersion == "v2" && got.Status.StepHealthyAt != nil, describe(got)
	})
	if err := syscall.Kill(-first.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Process.Wait()
	// A fresh data dir too, as a rescheduled pod has.
	startScribeProcess(t, s, bin, t.TempDir(), "scribe-2.log")
	poll(t, 5*time.Minute, "v2 promoted after the restart", func() (bool, string) {
		got := get()
		return got.Status.StableVersion == "v2" && got.Status.Phase == scribev1.WorkloadHealthy, describe(got)
	})
	// Every Scribe commit of the Workload, in order, by the weights it set.
	work := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", s.RepoURL, work)
	out := publishtest.Git(t, work, "log", "--reverse", "--format=%H", "--grep=Scribe-Object: Workload/"+ns+"/web")
	var weights []string
	for _, c := range strings.Fields(out) {
		route := publishtest.Git(t, work, "show", c+":"+SyncPath+"/"+ns+"/workload/web/httproute-web.yaml")
		weights = append(weights, routeSummary(route))
	}
	want := []string{"web-v1=100", "web-v1=90,web-v2=10", "web-v1=50,web-v2=50", "web-v1=0,web-v2=100", "web-v1=0,web-v2=100"}
	if fmt.Sprint(weights) != fmt.Sprint(want) {
		t.Fatalf("Scribe's commits set %v, want each step once in order, then the promotion: %v", weights, want)
	}
}

// routeSummary reads backend weights from an HTTPRoute file.
func routeSummary(route string) string {
	var parts []string
	name := ""
	for _, line := range strings.Split(route, "\n") {
		l := strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(l, "name: web-"); ok {
			name = "web-" + v
		}
		if v, ok := strings.CutPrefix(l, "weight: "); ok && name != "" {
			parts = append(parts, name+"="+v)
			name = ""
		}
	}
	return strings.Join(parts, ",")
}
