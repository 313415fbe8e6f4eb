package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

func TestLoopScribeKilledMidCanaryResumesWithoutRepeatingOrSkippingAStep(t *testing.T) {
	t.Parallel()
	appliers(t, testKilledMidCanary)
}

func testKilledMidCanary(t *testing.T, applier scribev1.ApplierKind) {
	ns := "killed"
	s := newNodeLoop(t, applier, ns)
	w := canaryWorkload(ns)
	w.Spec.Rollout.Steps[0].Pause = scribev1.PauseFor(15 * time.Second)
	get := createHealthy(t, s, w)
	updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, webV2()) })
	poll(t, 3*time.Minute, "step 1 holding", func() (bool, string) {
		got := get()
		return got.Status.Step == 0 && got.Status.CanaryVersion == "v2" && got.Status.StepHealthyAt != nil, describe(got)
	})
	// The controller pod goes as on a node failure: no graceful stop, its
	// leader Lease left to expire, its emptyDir caches gone. The
	// Deployment's new pod must win the Lease and resume.
	killed := s.KillScribePod(t)
	ctx := context.Background()
	poll(t, 3*time.Minute, "a new Scribe pod Ready and leading", func() (bool, string) {
		pod, err := s.ScribePod(ctx)
		if err != nil {
			return false, err.Error()
		}
		leader, err := s.ScribeLeader(ctx)
		if err != nil {
			return false, err.Error()
		}
		return pod.Name != killed && podReady(pod) && strings.HasPrefix(leader, pod.Name), "pod " + pod.Name + " " + podState(pod) + ", leader " + leader
	})
	poll(t, 5*time.Minute, "v2 promoted after the restart", func() (bool, string) {
		got := get()
		return got.Status.StableVersion == "v2" && got.Status.Phase == scribev1.WorkloadHealthy, describe(got)
	})
	weights := scribeRoutes(t, s, ns)
	want := []string{"web-v1=100", "web-v1=100,web-v2=0", "web-v1=90,web-v2=10", "web-v1=50,web-v2=50", "web-v1=0,web-v2=100", "web-v1=0,web-v2=100"}
	if fmt.Sprint(weights) != fmt.Sprint(want) {
		t.Fatalf("Scribe's commits set %v, want v2's warm-up at 0, each step once in order, then the promotion: %v", weights, want)
	}
}

// scribeRoutes is every Scribe commit of Workload ns/web, in order, by the
// weights its HTTPRoute set.
func scribeRoutes(t *testing.T, s *Stack, ns string) []string {
	t.Helper()
	work := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", s.RepoURL, work)
	out := publishtest.Git(t, work, "log", "--reverse", "--format=%H", "--grep=Scribe-Object: Workload/"+ns+"/web")
	var weights []string
	for _, c := range strings.Fields(out) {
		route := publishtest.Git(t, work, "show", c+":"+SyncPath+"/"+ns+"/workload/web/httproute-web.yaml")
		weights = append(weights, routeSummary(route))
	}
	return weights
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
