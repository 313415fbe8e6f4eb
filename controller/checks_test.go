package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/promtest"
)

// requests are ten minutes (a sample a minute) of per-version request counters of Workload
// shop/web (v1 fails 1 in 101 requests, v2 1 in 6) and of a Workload web
// in another namespace failing every request.
var requests = []string{
	`http_requests_total{namespace="shop",workload="web",version="v1",code="200"} 0+100x10`,
	`http_requests_total{namespace="shop",workload="web",version="v1",code="500"} 0+1x10`,
	`http_requests_total{namespace="shop",workload="web",version="v2",code="200"} 0+100x10`,
	`http_requests_total{namespace="shop",workload="web",version="v2",code="500"} 0+20x10`,
	`http_requests_total{namespace="lab",workload="web",version="v2",code="500"} 0+500x10`,
}

// errorRate is the 5xx share of one version's requests.
const errorRate = `sum(rate(http_requests_total{namespace="{{namespace}}",workload="{{ workload }}",version="{{version}}",code=~"5.."}[5m]))` +
	` / sum(rate(http_requests_total{namespace="{{namespace}}",workload="{{ workload }}",version="{{version}}"}[5m]))`

// TestPrometheusCheckQueriesTheVersionUnderAnalysis: {{version}},
// {{namespace}} and {{workload}} in a prometheus check's query are the
// version under analysis and its Workload's, so the same check passes
// for a healthy version and fails for a failing one, against Prometheus's
// own PromQL engine answering over the HTTP API; an unknown placeholder
// fails the check, naming it, without querying.
func TestPrometheusCheckQueriesTheVersionUnderAnalysis(t *testing.T) {
	prom := promtest.New(t, requests, time.Minute, 10*time.Minute)
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	for _, tt := range []struct {
		name, version, query string
		passed               bool
		// sent is the query the server must receive ("" for none); message
		// the parts of the result's message.
		sent    string
		message []string
	}{
		{name: "a healthy version passes", version: "v1", query: errorRate, passed: true,
			sent:    `version="v1"`,
			message: []string{`namespace="shop",workload="web",version="v1"`, "= 0.0099"}},
		{name: "a failing version fails", version: "v2", query: errorRate,
			sent:    `version="v2"`,
			message: []string{`version="v2"`, "= 0.1666", "above 0.05"}},
		{name: "no series for the version is no sample", version: "v3", query: errorRate,
			sent:    `version="v3"`,
			message: []string{"returned no sample"}},
		{name: "an unknown placeholder fails without a query", version: "v1", query: `up{pod="{{pod}}"}`,
			message: []string{"unknown placeholder {{pod}}", "{{version}}, {{namespace}} and {{workload}}"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Checks: []scribev1.Check{
				{Name: "error-rate", Type: scribev1.CheckPrometheus, Address: prom.URL, Query: tt.query, Max: "0.05"},
			}}}
			before := len(prom.Queries())
			res := (&controller.Checker{Egress: testEgress()}).Run(context.Background(), w, tt.version, scribev1.ObjectIdentity{})
			if len(res) != 1 || res[0].Passed != tt.passed {
				t.Fatalf("results %+v, want passed=%v", res, tt.passed)
			}
			for _, m := range tt.message {
				if !strings.Contains(res[0].Message, m) {
					t.Errorf("message %q lacks %q", res[0].Message, m)
				}
			}
			sent := prom.Queries()[before:]
			switch {
			case tt.sent == "" && len(sent) != 0:
				t.Fatalf("queried %q", sent)
			case tt.sent != "" && (len(sent) != 1 || !strings.Contains(sent[0], tt.sent) || strings.Contains(sent[0], "{{")):
				t.Fatalf("queried %q, want one query with %s and no placeholder left", sent, tt.sent)
			}
		})
	}
}
