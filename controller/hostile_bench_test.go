package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/egress"
)

// BenchmarkBystanderCommitWhileATenantRunsTheWorstAnalysis is the
// bystander figure of the hostile rounds: one tenant's Workload carries
// the worst analysis a tenant can write (a template condition of 130
// `let` string doublings and one scanning a large range, a web check
// whose recursive JSONPath walks a 40 KB nested answer from the tenant's
// own server, and eight webhooks to a server that never answers, each at
// the 30 s timeout), and SCRIBE_BENCH_HOSTILE_WORKERS (default 8) of the
// controller's workers run its analysis rounds and webhook gates back to
// back, as its reconciles would, through the controller's own Checker in
// the controller's process. Meanwhile another tenant creates one-version
// Workloads, one after the other; the benchmark reports their create →
// commit seconds (median and max of SCRIBE_BENCH_HOSTILE_SAMPLES, default
// 10) beside the same before the hostile rounds start, and how many
// rounds and gates the hostile tenant ran. The template is served by a
// reader of this test (the rounds read it as the controller reads it
// from the API server); everything else is the controller's code. Run it
// with -benchtime=1x.
func BenchmarkBystanderCommitWhileATenantRunsTheWorstAnalysis(b *testing.B) {
	workers := envInt("SCRIBE_BENCH_HOSTILE_WORKERS", 8)
	samples := envInt("SCRIBE_BENCH_HOSTILE_SAMPLES", 10)
	for range b.N {
		b.StopTimer()
		other := newFixture(b)
		if err := other.e.c.Create(other.ctx(), other.repo); err != nil {
			b.Fatal(err)
		}
		startFairnessManager(b, other.e.cfg, []string{other.ns}, controller.Options{})
		commitLatency(b, other, "warm")
		idle := make([]time.Duration, 0, samples)
		for i := range samples {
			idle = append(idle, commitLatency(b, other, fmt.Sprintf("idle-%d", i)))
		}

		w, reader, stop := hostileWorkload(b)
		defer stop()
		checker := &controller.Checker{Templates: reader, Egress: egress.Policy{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		rounds, gates := 0, 0
		for k := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if k%2 == 0 {
						checker.RunRound(ctx, w, "v2", scribev1.ObjectIdentity{})
						mu.Lock()
						rounds++
						mu.Unlock()
						continue
					}
					checker.CallWebhooks(ctx, w, scribev1.WebhookConfirmPromotion)
					mu.Lock()
					gates++
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Second) // the hostile rounds are under way
		resetHWM()
		b.StartTimer()
		busy := make([]time.Duration, 0, samples)
		for i := range samples {
			busy = append(busy, commitLatency(b, other, fmt.Sprintf("bystander-%d", i)))
		}
		b.StopTimer()
		cancel()
		wg.Wait()
		slices.Sort(idle)
		slices.Sort(busy)
		b.ReportMetric(busy[len(busy)/2].Seconds(), "s-bystander-commit-median")
		b.ReportMetric(busy[len(busy)-1].Seconds(), "s-bystander-commit-max")
		b.ReportMetric(idle[len(idle)/2].Seconds(), "s-idle-commit-median")
		b.ReportMetric(idle[len(idle)-1].Seconds(), "s-idle-commit-max")
		b.ReportMetric(vmHWM(), "peak-RSS-MiB")
		b.Logf("bystander Workload create → commit: median %s, max %s while %d workers ran the worst analysis (%d rounds, %d webhook gates); idle: median %s, max %s",
			busy[len(busy)/2].Round(time.Millisecond), busy[len(busy)-1].Round(time.Millisecond), workers, rounds, gates,
			idle[len(idle)/2].Round(time.Millisecond), idle[len(idle)-1].Round(time.Millisecond))
	}
}

// hostileWorkload is a Workload with the worst analysis a tenant can
// write, the reader that serves its AnalysisTemplate, and a stop for the
// tenant's servers.
func hostileWorkload(b *testing.B) (*scribev1.Workload, client.Reader, func()) {
	b.Helper()
	// The tenant's own server: a 40 KB nested JSON answer for the web
	// check, a Prometheus answer for the template's metrics.
	nested := strings.Repeat(`{"a":`, 6800) + "1" + strings.Repeat("}", 6800) // 40 KB, 6800 deep
	tenant := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Path, "/api/v1/query") {
			fmt.Fprintf(rw, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"1"]}]}}`, time.Now().Unix())
			return
		}
		_, _ = rw.Write([]byte(nested))
	}))
	// A webhook receiver that never answers until the benchmark ends.
	done := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	var doublings strings.Builder
	doublings.WriteString(`let s0 = "abcdefgh"; `)
	for i := 1; i <= 130; i++ {
		fmt.Fprintf(&doublings, "let s%d = s%d + s%d; ", i, i-1, i-1)
	}
	doublings.WriteString("len(s130) > 0")
	tmpl := map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
		"metadata": map[string]any{"name": "worst", "namespace": "tenant-a"},
		"spec": map[string]any{"metrics": []any{
			map[string]any{"name": "doublings", "successCondition": doublings.String(),
				"provider": map[string]any{"prometheus": map[string]any{"address": tenant.URL, "query": "up"}}},
			map[string]any{"name": "scan", "successCondition": "len(filter(1..100000000, {# % 7 == 0})) > 0",
				"provider": map[string]any{"prometheus": map[string]any{"address": tenant.URL, "query": "up"}}},
		}},
	}
	raw, err := yaml.Marshal(tmpl)
	if err != nil {
		b.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		b.Fatal(err)
	}
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "worst"}}
	w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{
		Templates: []scribev1.AnalysisTemplateRef{{TemplateName: "worst"}},
		Checks:    []scribev1.Check{{Name: "recursive", Type: scribev1.CheckWeb, URL: tenant.URL + "/deep", JSONPath: "{..a..a..a..a}", Min: "0"}},
	}}
	for i := range 8 {
		w.Spec.Rollout.Webhooks = append(w.Spec.Rollout.Webhooks, scribev1.RolloutWebhook{
			Name: fmt.Sprintf("hang-%d", i), Type: scribev1.WebhookConfirmPromotion, URL: hang.URL, Timeout: &metav1.Duration{Duration: 30 * time.Second}})
	}
	return w, templateReader{u}, func() {
		close(done)
		hang.Close()
		tenant.Close()
	}
}

// templateReader serves one AnalysisTemplate, as the API server would.
type templateReader struct{ tmpl *unstructured.Unstructured }

func (r templateReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || key.Name != r.tmpl.GetName() {
		return fmt.Errorf("templateReader serves AnalysisTemplate %s only", r.tmpl.GetName())
	}
	r.tmpl.DeepCopyInto(u)
	return nil
}

func (r templateReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("templateReader does not list")
}
