package controller_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// dashboardFile is the Grafana dashboard the chart ships.
var dashboardFile = filepath.Join("..", "charts", "scribe", "dashboards", "scribe-rollouts.json")

type dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVariables stand for the dashboard's variables when its queries
// are parsed.
var grafanaVariables = strings.NewReplacer(
	"$namespace", "shop", "$name", "cart", "$__rate_interval", "1m", "$__range", "6h",
)

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*[a-z_]+\)$`)

// dashboardQueries are the PromQL of every panel and of the variables'
// label_values(SELECTOR, label), by where they are.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no title or no panels", dashboardFile)
	}
	queries := map[string]string{}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(SELECTOR, label)", v.Name, v.Definition)
			continue
		}
		queries["variable "+v.Name] = m[1]
	}
	for _, want := range []string{"namespace", "name"} {
		if !vars[want] {
			t.Errorf("the dashboard has no variable %s", want)
		}
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			queries["panel "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	return queries
}

// TestDashboardQueriesParseAndReadRegisteredMetrics: every query of the
// dashboard is PromQL Prometheus parses, and every metric it reads is one
// the controller exports: Scribe's own (gathered from its registry after
// a rollout was observed) or controller-runtime's (gathered after one
// reconcile of a controller named as Scribe's are).
func TestDashboardQueriesParseAndReadRegisteredMetrics(t *testing.T) {
	exported := scribeMetricNames(t)
	for name := range controllerRuntimeMetricNames(t) {
		exported[name] = true
	}
	for where, q := range dashboardQueries(t) {
		expr, err := parser.ParseExpr(grafanaVariables.Replace(q))
		if err != nil {
			t.Errorf("%s: %q: %v", where, q, err)
			continue
		}
		n := 0
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			if vs, ok := node.(*parser.VectorSelector); ok {
				n++
				if !exported[vs.Name] {
					t.Errorf("%s: reads %s, which the controller does not export", where, vs.Name)
				}
				for _, m := range vs.LabelMatchers {
					if m.Name == "name" && m.Value != "cart" || m.Name == "namespace" && m.Value != "shop" {
						t.Errorf("%s: %s{%s} is not the chosen Workload ($namespace/$name)", where, vs.Name, m)
					}
				}
			}
			return nil
		})
		if n == 0 {
			t.Errorf("%s: %q reads no metric", where, q)
		}
	}
}

// scribeMetricNames are the series names Scribe's registry exports once a
// Workload rolled out a step, failed a check and rolled back, an
// Experiment and a Pipeline were observed and a render and a publish were
// measured.
func scribeMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := controller.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	controller.SetMetricsClock(m, func() time.Time { return now })
	key := types.NamespacedName{Namespace: "shop", Name: "cart"}
	for _, st := range []scribev1.WorkloadStatus{
		stableOn("v1", scribev1.WorkloadHealthy, ""),
		canaryAt(0, 10, scribev1.CheckResult{Name: "errors", Passed: true, Value: "0.01"}),
		canaryAt(1, 50, scribev1.CheckResult{Name: "errors", Value: "0.3"}),
		stableOn("v1", scribev1.WorkloadRolledBack, "v2"),
	} {
		m.Observe(scribev1.WorkloadKind, key, metricsWorkload(st))
		if st.CanaryVersion != "" {
			// The gauges of a check exist while the Workload reports it.
			names := gatheredNames(t, reg)
			if !names["scribe_workload_check_passed"] || !names["scribe_workload_check_value"] {
				t.Fatalf("no check series while the Workload reports a check: %v", names)
			}
		}
		now = now.Add(time.Minute)
	}
	m.Observe(scribev1.ExperimentKind, key, &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart"}})
	m.Observe(scribev1.PipelineKind, key, &scribev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart"}})
	m.ObserveRender(scribev1.WorkloadKind, time.Second)
	m.ObservePublish(scribev1.WorkloadKind, controller.SinkGit, time.Second, true)
	m.ObserveCommitToApplied(scribev1.WorkloadKind, now, now.Add(time.Second))
	names := gatheredNames(t, reg)
	names["scribe_workload_check_passed"], names["scribe_workload_check_value"] = true, true
	return names
}

// controllerRuntimeMetricNames are the series names controller-runtime's
// registry (the one the manager serves) exports once a controller named
// workload reconciled one request.
func controllerRuntimeMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	done := make(chan struct{}, 1)
	c, err := crcontroller.NewUnmanaged("workload", crcontroller.Options{
		SkipNameValidation: ptr.To(true),
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			select {
			case done <- struct{}{}:
			default:
			}
			return reconcile.Result{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan event.GenericEvent, 1)
	if err := c.Watch(source.Channel(events, &handler.EnqueueRequestForObject{})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = c.Start(ctx)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	events <- event.GenericEvent{Object: &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart"}}}
	<-done
	// The reconcile's time is observed once it returned: read until it is.
	for range 500 {
		names := gatheredNames(t, ctrlmetrics.Registry)
		if names["controller_runtime_reconcile_time_seconds_bucket"] {
			return names
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("controller-runtime never exported controller_runtime_reconcile_time_seconds")
	return nil
}

// gatheredNames are the series names g exports: a histogram's _bucket,
// _sum and _count, a summary's _sum and _count, every other metric's
// own name.
func gatheredNames(t *testing.T, g prometheus.Gatherer) map[string]bool {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		case dto.MetricType_SUMMARY:
			names[mf.GetName()+"_sum"], names[mf.GetName()+"_count"] = true, true
			names[mf.GetName()] = true
		default:
			names[mf.GetName()] = true
		}
	}
	return names
}

// TestReadmeListsTheDashboardQueries: the README's table of the
// dashboard's queries is the dashboard's.
func TestReadmeListsTheDashboardQueries(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for where, q := range dashboardQueries(t) {
		if strings.HasPrefix(where, "variable ") {
			continue
		}
		if !strings.Contains(string(readme), "`"+strings.ReplaceAll(q, "|", `\|`)+"`") {
			t.Errorf("README.md does not list the query of %s: %s", where, q)
		}
	}
}
