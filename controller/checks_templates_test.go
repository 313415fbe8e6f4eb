package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/crds/crdstest"
	"github.com/scribe-gitops/scribe/internal/promtest"
)

// analysisTemplate is an Argo Rollouts template as users write them, from
// its YAML.
func analysisTemplate(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestAnalysisTemplatesRunAsChecks: a Workload's analysis references Argo
// Rollouts' AnalysisTemplate and ClusterAnalysisTemplate objects, stored
// through Argo Rollouts' own CRDs; their metrics run each round with
// their args filled ({{args.*}}, version and namespace by default) and are
// judged by their successCondition and failureCondition; failureLimit
// makes the round's threshold stricter; what Scribe cannot run fails the
// round naming the template, the metric and why.
func TestAnalysisTemplatesRunAsChecks(t *testing.T) {
	e := testEnv(t)
	files := crdstest.Files(t, "argo-rollouts")
	if _, err := envtest.InstallCRDs(e.cfg, envtest.CRDInstallOptions{Paths: files, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	ns := e.namespace(t, "templates-").Name
	prom := promtest.New(t, requests, time.Minute, 10*time.Minute)
	ctx := context.Background()
	for _, doc := range []string{`
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: success-rate, namespace: ` + ns + `}
spec:
  args:
  - name: service
  - name: version
  - name: prometheus
    value: ` + prom.URL + `
  metrics:
  - name: success-rate
    interval: 1m
    failureLimit: 1
    successCondition: result[0] >= 0.95
    provider:
      prometheus:
        address: "{{args.prometheus}}"
        query: |
          sum(rate(http_requests_total{namespace="shop",workload="{{args.service}}",version="{{args.version}}",code!~"5.."}[5m]))
          / sum(rate(http_requests_total{namespace="shop",workload="{{args.service}}",version="{{args.version}}"}[5m]))
`, `
apiVersion: argoproj.io/v1alpha1
kind: ClusterAnalysisTemplate
metadata: {name: error-count-` + ns + `}
spec:
  args:
  - name: version
  metrics:
  - name: errors
    failureCondition: result[0] > 10
    provider:
      prometheus:
        address: ` + prom.URL + `
        query: sum(increase(http_requests_total{namespace="shop",version="{{args.version}}",code="500"}[5m]))
`, `
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: job, namespace: ` + ns + `}
spec:
  metrics:
  - name: smoke
    provider:
      job:
        spec: {template: {spec: {containers: [{name: c, image: busybox}], restartPolicy: Never}}}
`, `
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: undeclared, namespace: ` + ns + `}
spec:
  metrics:
  - name: m
    provider:
      prometheus: {address: ` + prom.URL + `, query: 'up{job="{{args.job}}"}'}
`, `
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: value-from, namespace: ` + ns + `}
spec:
  args:
  - name: token
    valueFrom: {secretKeyRef: {name: s, key: k}}
  metrics:
  - name: m
    provider:
      prometheus: {address: ` + prom.URL + `, query: up}
`} {
		if err := e.c.Create(ctx, analysisTemplate(t, doc)); err != nil {
			t.Fatal(err)
		}
	}
	many := "apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata: {name: many, namespace: " + ns + "}\nspec:\n  metrics:\n"
	for i := range 17 {
		many += fmt.Sprintf("  - name: m%d\n    provider: {prometheus: {address: %s, query: up}}\n", i, prom.URL)
	}
	if err := e.c.Create(ctx, analysisTemplate(t, many)); err != nil {
		t.Fatal(err)
	}
	cluster := "error-count-" + ns
	c := &controller.Checker{Egress: testEgress(), Templates: e.c}
	for _, tt := range []struct {
		name      string
		version   string
		refs      []scribev1.AnalysisTemplateRef
		args      []scribev1.AnalysisArg
		want      map[string]string // result name -> "passed", "failed" or "inconclusive", then a part of its message
		threshold int32
	}{
		{name: "a healthy version passes both templates; failureLimit 1 makes the threshold 2", version: "v1",
			refs: []scribev1.AnalysisTemplateRef{{TemplateName: "success-rate"}, {TemplateName: cluster, ClusterScope: true}},
			args: []scribev1.AnalysisArg{{Name: "service", Value: "web"}},
			want: map[string]string{"success-rate/success-rate": "passed", cluster + "/errors": "passed"}, threshold: 2},
		{name: "a failing version fails both, with the values observed", version: "v2",
			refs: []scribev1.AnalysisTemplateRef{{TemplateName: "success-rate"}, {TemplateName: cluster, ClusterScope: true}},
			args: []scribev1.AnalysisArg{{Name: "service", Value: "web"}},
			want: map[string]string{"success-rate/success-rate": "failed successCondition result[0] >= 0.95 does not hold", cluster + "/errors": "failed failureCondition result[0] > 10 holds"}, threshold: 2},
		{name: "a version with no series is inconclusive", version: "v9",
			refs: []scribev1.AnalysisTemplateRef{{TemplateName: "success-rate"}},
			args: []scribev1.AnalysisArg{{Name: "service", Value: "web"}},
			want: map[string]string{"success-rate/success-rate": "inconclusive returned no sample"}, threshold: 2},
		{name: "an arg without a value fails naming it", version: "v1",
			refs: []scribev1.AnalysisTemplateRef{{TemplateName: "success-rate"}},
			want: map[string]string{"success-rate": "failed spec.rollout.analysis.templates[0]: AnalysisTemplate success-rate: arg service has no value"}},
		{name: "a template that does not exist", version: "v1",
			refs: []scribev1.AnalysisTemplateRef{{TemplateName: "nope"}},
			want: map[string]string{"nope": "failed spec.rollout.analysis.templates[0]: AnalysisTemplate " + ns + "/nope not found"}},
		{name: "a provider Scribe does not run", version: "v1",
			refs: []scribev1.AnalysisTemplateRef{{TemplateName: "job"}},
			want: map[string]string{"job": "failed metric smoke: provider job is not supported"}},
		{name: "an arg the template does not declare", version: "v1",
			refs: []scribev1.AnalysisTemplateRef{{TemplateName: "undeclared"}},
			want: map[string]string{"undeclared": "failed {{args.job}} is not a declared arg"}},
		{name: "a template with more metrics than a round runs", version: "v1",
			refs: []scribev1.AnalysisTemplateRef{{TemplateName: "many"}},
			want: map[string]string{"many": "failed has 17 metrics; Scribe runs at most 16"}},
		{name: "valueFrom", version: "v1",
			refs: []scribev1.AnalysisTemplateRef{{TemplateName: "value-from"}},
			want: map[string]string{"value-from": "failed arg token: valueFrom is not supported"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
			w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Templates: tt.refs, Args: tt.args}}
			round := c.RunRound(ctx, w, tt.version, scribev1.ObjectIdentity{})
			got := map[string]scribev1.CheckResult{}
			for _, r := range round.Results {
				got[r.Name] = r
			}
			if len(got) != len(tt.want) {
				t.Fatalf("results %+v, want %v", round.Results, tt.want)
			}
			for name, want := range tt.want {
				r, ok := got[name]
				if !ok {
					t.Fatalf("no result %s in %+v", name, round.Results)
				}
				state, part, _ := strings.Cut(want, " ")
				is := map[string]bool{"passed": r.Passed, "failed": !r.Passed && !r.Inconclusive, "inconclusive": r.Inconclusive}
				if !is[state] || !strings.Contains(r.Message, part) {
					t.Errorf("%s: %+v, want %s with %q", name, r, state, part)
				}
				if r.Passed && (r.Value == "" || r.Provider != scribev1.CheckPrometheus || r.Condition == "") {
					t.Errorf("%s: a result without its value, provider or condition: %+v", name, r)
				}
			}
			if round.Threshold != tt.threshold {
				t.Errorf("round threshold %d, want %d", round.Threshold, tt.threshold)
			}
		})
	}
}
