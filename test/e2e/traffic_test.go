package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// newTrafficLoop is newNodeLoop with the real data plane's Prometheus:
// Traefik serves the Gateway (every loop on the real node), Prometheus
// scrapes the pods, Scribe runs in a pod from its chart.
func newTrafficLoop(t *testing.T, applier scribev1.ApplierKind, ns string) *Stack {
	t.Helper()
	skipWithoutLoop(t)
	s := StartOpts(t, StackOptions{Applier: applier, RealNode: true, Prometheus: true})
	if err := s.Node.PushDemoApp(context.Background(), s.logf, "example/web", "1", "2", "3"); err != nil {
		t.Fatalf("the demo app's image: %v", err)
	}
	s.InstallScribe(t, InstallOptions{})
	newNamespaceAndRepository(t, s, ns)
	return s
}

// errorRatio is the Prometheus check of the traffic tests: the share of
// the version's answers that were 5xx over the last 15 s, as the demo
// app's counters say (no errors reads as 0; no requests as no sample,
// an inconclusive round that holds the step without failing it).
const errorRatio = `(sum(rate(demo_app_http_errors_total{namespace="{{namespace}}",version="{{version}}"}[15s])) or vector(0))` +
	` / sum(rate(demo_app_http_requests_total{namespace="{{namespace}}",version="{{version}}"}[15s]))`

// trafficWorkload is the demo service behind the real Gateway: a
// 10/50/100 canary holding 12 s at 10 and 50 (long enough to measure what
// each version served), analysed every 4 s by the error ratio from the
// real Prometheus (at most 5 %, three failed rounds of a step roll back).
// The canary first runs at weight 0 until its pods are Ready; a round
// runs once a step is applied, and the first round of a step may find no
// sample yet (inconclusive).
func trafficWorkload(s *Stack, ns string) *scribev1.Workload {
	hold := scribev1.PauseFor(12 * time.Second)
	w := canaryWorkload(ns)
	w.Spec.Rollout.Steps = []scribev1.RolloutStep{{Weight: 10, Pause: hold}, {Weight: 50, Pause: hold}, {Weight: 100}}
	w.Spec.Rollout.Analysis = &scribev1.Analysis{
		Interval: &metav1.Duration{Duration: 4 * time.Second}, Threshold: 3,
		Checks: []scribev1.Check{{Name: "error-ratio", Type: scribev1.CheckPrometheus, Address: s.PrometheusURL, Query: errorRatio, Max: "0.05"}},
	}
	return w
}

// routeSample is the HTTPRoute as the recorder read it.
type routeSample struct {
	at       time.Time
	weights  string
	accepted bool // Accepted and ResolvedRefs by every parent at its generation
}

// routeRecorder reads a route every 100 ms until stopped.
type routeRecorder struct {
	mu      sync.Mutex
	samples []routeSample
	stop    chan struct{}
	done    chan struct{}
}

func recordRoute(s *Stack, ns, name string) *routeRecorder {
	r := &routeRecorder{stop: make(chan struct{}), done: make(chan struct{})}
	ctx := context.Background()
	go func() {
		defer close(r.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("gateway.networking.k8s.io/v1")
			u.SetKind("HTTPRoute")
			if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u); err == nil {
				smp := routeSample{at: time.Now(), weights: weightsOf(u), accepted: health.Route(u).State == health.Healthy}
				r.mu.Lock()
				r.samples = append(r.samples, smp)
				r.mu.Unlock()
			}
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
	}()
	return r
}

func (r *routeRecorder) Stop() []routeSample {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]routeSample(nil), r.samples...)
}

// weightsOf is a route's backends as "web-v1=90,web-v2=10".
func weightsOf(u *unstructured.Unstructured) string {
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	var parts []string
	for _, rl := range rules {
		rm, _ := rl.(map[string]any)
		refs, _, _ := unstructured.NestedSlice(rm, "backendRefs")
		for _, b := range refs {
			m, _ := b.(map[string]any)
			parts = append(parts, fmt.Sprintf("%v=%v", m["name"], m["weight"]))
		}
	}
	return strings.Join(parts, ",")
}

// servedWindow is when the gateway served weights: from the first sample
// showing them accepted to the first sample showing other weights.
func servedWindow(samples []routeSample, weights string) (from, to time.Time, ok bool) {
	for _, smp := range samples {
		switch {
		case from.IsZero() && smp.weights == weights && smp.accepted:
			from = smp.at
		case !from.IsZero() && smp.weights != weights:
			return from, smp.at, true
		}
	}
	if !from.IsZero() && len(samples) > 0 {
		return from, samples[len(samples)-1].at, true
	}
	return from, to, false
}

// servedPerStep is, for each set of weights the route carried (in the
// order the gateway accepted them), what the clients were served while it
// did: one line per step.
func servedPerStep(samples []routeSample, load *LoadGen) []string {
	var out []string
	seen := map[string]bool{}
	for _, smp := range samples {
		if !smp.accepted || seen[smp.weights] {
			continue
		}
		seen[smp.weights] = true
		from, to, ok := servedWindow(samples, smp.weights)
		if !ok {
			continue
		}
		sh, n := Shares(load.Between(from.Add(time.Second), to))
		out = append(out, fmt.Sprintf("route %-22s %5.1f s  %4d answers  served %s", smp.weights, to.Sub(from).Seconds(), n, FormatShares(sh)))
	}
	return out
}

// TestLoopCanaryOnRealTraffic runs the demo service on the real node
// behind Traefik, with steady load through Traefik's entrypoint and a
// real Prometheus scraping the pods, through each applier:
//
//  1. a good v2 walks 10/50/100 and each step's weights are what the
//     clients were served (the demo app answers with its version);
//  2. a failing v3 (ERROR_RATE=0.5) is rolled back by its error ratio
//     from Prometheus, the rollback commit and status.message carrying
//     the values observed, and the clients are served v2 only again;
//  3. a Workload whose route names a Gateway listener that does not admit
//     its namespace is held, with Traefik's reason and the parent named.
//
// Nothing here writes route status or loads series by hand.
func TestLoopCanaryOnRealTraffic(t *testing.T) {
	t.Parallel()
	appliers(t, testCanaryOnRealTraffic)
}

func testCanaryOnRealTraffic(t *testing.T, applier scribev1.ApplierKind) {
	ns := "traffic"
	s := newTrafficLoop(t, applier, ns)
	ctx := context.Background()
	get := createHealthy(t, s, trafficWorkload(s, ns))
	load := StartLoad(s.GatewayAddr(), "web.example.com", 40)
	defer load.Stop()
	start := time.Now()
	poll(t, time.Minute, "v1 served through Traefik", func() (bool, string) {
		sh, n := Shares(load.Between(time.Now().Add(-2*time.Second), time.Now()))
		return n > 20 && sh["v1"] == 1, fmt.Sprintf("%d answers: %s", n, FormatShares(sh))
	})
	t.Logf("Traefik served v1 %s after the load started", time.Since(start).Round(time.Millisecond))

	// 1. The good canary, step by step.
	rec := recordRoute(s, ns, "web")
	updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, webV2()) })
	poll(t, 5*time.Minute, "v2 promoted and healthy", func() (bool, string) {
		got := get()
		return got.Status.StableVersion == "v2" && got.Status.Phase == scribev1.WorkloadHealthy, describe(got)
	})
	// The last step and the promotion carry the same weights: measure
	// them over a few more seconds.
	time.Sleep(5 * time.Second)
	samples := rec.Stop()
	for _, step := range []struct {
		weights string
		v2      float64
	}{{"web-v1=100,web-v2=0", 0}, {"web-v1=90,web-v2=10", 0.10}, {"web-v1=50,web-v2=50", 0.50}, {"web-v1=0,web-v2=100", 1}} {
		from, to, ok := servedWindow(samples, step.weights)
		if !ok {
			t.Fatalf("the route never showed %s accepted by Traefik", step.weights)
		}
		// Traefik reloads within its 100 ms throttle; answers already in
		// flight at the switch are left out.
		rs := load.Between(from.Add(time.Second), to)
		sh, n := Shares(rs)
		t.Logf("RESULT served while the route said %s (%.1f s, %d answers): %s", step.weights, to.Sub(from).Seconds(), n, FormatShares(sh))
		if n < 40 && step.v2 > 0 {
			t.Errorf("step %s: only %d answers in %s", step.weights, n, to.Sub(from))
			continue
		}
		if got := sh["v2"]; math.Abs(got-step.v2) > 0.07 {
			t.Errorf("step %s: v2 served %.1f%% of %d answers, want %.0f%% ± 7", step.weights, 100*got, n, 100*step.v2)
		}
		// A request may fail while Traefik swaps its configuration or a
		// pod starts; more than 2 % is not a blip.
		if sh["error"] > 0.02 {
			t.Errorf("step %s: %.1f%% of the requests failed: %s", step.weights, 100*sh["error"], Failures(rs))
		} else if sh["error"] > 0 {
			t.Logf("step %s: failed requests: %s", step.weights, Failures(rs))
		}
	}

	// 2. The failing canary, rolled back by the real metrics.
	v3 := scribev1.Version{Name: "v3", Image: "ghcr.io/example/web:3", Env: []corev1.EnvVar{{Name: "ERROR_RATE", Value: "0.5"}}}
	updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, v3) })
	poll(t, 5*time.Minute, "v3 rolled back by its error ratio", func() (bool, string) {
		got := get()
		return got.Status.Phase == scribev1.WorkloadRolledBack && got.Status.Revision != "", describe(got)
	})
	got := get()
	if !strings.Contains(got.Status.Message, "error-ratio") || !strings.Contains(got.Status.Message, "above 0.05") {
		t.Errorf("status.message %q does not carry the check and the value observed", got.Status.Message)
	}
	t.Logf("RESULT rollback: %s", got.Status.Message)
	work := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", s.RepoURL, work)
	msg := publishtest.Git(t, work, "show", "-s", "--format=%B", got.Status.Revision)
	if !strings.Contains(msg, "above 0.05") {
		t.Errorf("the rollback commit's message does not carry the value observed:\n%s", msg)
	}
	rollback := got.Status.Revision
	poll(t, 3*time.Minute, string(applier)+" to apply the rollback", func() (bool, string) {
		applied, err := s.AppliedRevision(ctx, "workload", ns, "web")
		if err != nil {
			return false, err.Error()
		}
		return applied == rollback, "applied " + applied
	})
	poll(t, time.Minute, "only v2 served again", func() (bool, string) {
		sh, n := Shares(load.Between(time.Now().Add(-3*time.Second), time.Now()))
		return n > 40 && sh["v2"] == 1, fmt.Sprintf("%d answers: %s", n, FormatShares(sh))
	})

	for _, name := range []string{"traefik", "prometheus"} {
		t.Logf("RESULT RSS %s: %d MiB", name, s.ProcessRSS(name)>>20)
	}
	if applier != scribev1.ApplierFlux {
		// Argo CD judges an HTTPRoute's health itself (its built-in
		// check); Scribe's own read-back matters where the applier does
		// not look: Flux.
		return
	}
	// 3. A route the Gateway refuses holds the rollout, saying why.
	if err := s.AddRefusingGateway(ctx, "internal"); err != nil {
		t.Fatal(err)
	}
	refused := "refused"
	newNamespaceAndRepository(t, s, refused)
	w := canaryWorkload(refused)
	w.Spec.Traffic.ParentRefs = []scribev1.ParentReference{{Name: "internal", Namespace: GatewayNamespace}}
	if err := s.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	held := &scribev1.Workload{}
	poll(t, 3*time.Minute, "the Workload held on the refused route", func() (bool, string) {
		_ = s.Client.Get(ctx, types.NamespacedName{Namespace: refused, Name: "web"}, held)
		ready := ""
		for _, c := range held.Status.Conditions {
			if c.Type == scribev1.ReadyCondition && c.Status == metav1.ConditionFalse {
				ready = c.Message
			}
		}
		return strings.Contains(ready, "gateway-system/internal") && strings.Contains(ready, "NotAllowedByListeners"), describe(held)
	})
	if held.Status.Phase == scribev1.WorkloadHealthy {
		t.Fatalf("a Workload whose route is refused is Healthy: %s", describe(held))
	}
	t.Logf("RESULT refused route: %s", describe(held))
}
