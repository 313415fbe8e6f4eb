package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// +kubebuilder:rbac:groups=argoproj.io,resources=analysistemplates;clusteranalysistemplates,verbs=get

// The part of an Argo Rollouts AnalysisTemplate's (or
// ClusterAnalysisTemplate's) spec (argoproj.io/v1alpha1) that Scribe runs,
// with Argo Rollouts' JSON names. It is decoded here rather than through
// argo-rollouts' Go types: the newest release's module needs a newer Go
// than this module, and any release brings the rollouts controller's
// dependency graph for a handful of structs.
type argoAnalysisSpec struct {
	Args    []argoArg         `json:"args"`
	Metrics []argoMetric      `json:"metrics"`
	DryRun  []json.RawMessage `json:"dryRun"`
}

type argoArg struct {
	Name      string          `json:"name"`
	Value     *string         `json:"value"`
	ValueFrom json.RawMessage `json:"valueFrom"`
}

type argoMetric struct {
	Name              string                     `json:"name"`
	SuccessCondition  string                     `json:"successCondition"`
	FailureCondition  string                     `json:"failureCondition"`
	FailureLimit      *intstr.IntOrString        `json:"failureLimit"`
	InconclusiveLimit *intstr.IntOrString        `json:"inconclusiveLimit"`
	Provider          map[string]json.RawMessage `json:"provider"`
}

type argoHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type argoPrometheus struct {
	Address        string          `json:"address"`
	Query          string          `json:"query"`
	Insecure       bool            `json:"insecure"`
	Headers        []argoHeader    `json:"headers"`
	Authentication json.RawMessage `json:"authentication"`
}

type argoWeb struct {
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Headers  []argoHeader    `json:"headers"`
	Body     string          `json:"body"`
	JSONBody json.RawMessage `json:"jsonBody"`
	JSONPath string          `json:"jsonPath"`
	Insecure bool            `json:"insecure"`
}

type argoDatadog struct {
	Query    string            `json:"query"`
	Queries  map[string]string `json:"queries"`
	Formula  string            `json:"formula"`
	Interval string            `json:"interval"`
}

type argoNewRelic struct {
	Profile string `json:"profile"`
	Query   string `json:"query"`
}

// The Secrets a template's Datadog and New Relic metrics read, in the
// Workload's namespace, as Argo Rollouts names them in its own.
const (
	datadogTemplateSecret  = "datadog"
	newRelicTemplateSecret = "newrelic-secret"
)

// maxTemplateMetrics bounds the metrics of one template a round runs
// (a round has at most eight templates, by the CRD).
const maxTemplateMetrics = 16

// templateMetric is one metric of a template, as a probe with Argo
// Rollouts' conditions.
type templateMetric struct {
	name              string
	probe             probe
	success, failure  string
	failureLimit      *int32
	inconclusiveLimit *int32
}

// argPlaceholder matches {{args.NAME}}, spaces allowed inside the braces.
var argPlaceholder = regexp.MustCompile(`\{\{\s*args\.([^{}\s]*)\s*\}\}`)

// runTemplates runs the metrics of the Workload's analysis templates; a
// template that cannot be read or run is one failed result naming it.
func (c *Checker) runTemplates(ctx context.Context, w *scribev1.Workload, version string) ([]scribev1.CheckResult, roundLimits) {
	var out []scribev1.CheckResult
	var limits roundLimits
	seen := map[scribev1.AnalysisTemplateRef]bool{}
	for i, ref := range w.Spec.Rollout.Analysis.Templates {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		field := fmt.Sprintf("spec.rollout.analysis.templates[%d]", i)
		metrics, err := c.templateMetrics(ctx, w, field, ref, version)
		if err != nil {
			out = append(out, scribev1.CheckResult{Name: ref.TemplateName, Message: boundMessage(field + ": " + err.Error())})
			continue
		}
		for _, m := range metrics {
			res := scribev1.CheckResult{Name: ref.TemplateName + "/" + m.name, Provider: m.probe.check.Type}
			meas, err := c.measure(ctx, w, m.probe, version)
			if err == nil {
				if err = judgeConditions(ctx, &res, m.success, m.failure, meas); err != nil {
					err = fmt.Errorf("%s.%w", m.probe.field, err)
				}
			}
			if err != nil {
				res.Passed, res.Inconclusive, res.Message = false, false, err.Error()
			}
			res.Message = boundMessage(res.Message)
			out = append(out, res)
			limits.take(m)
		}
	}
	return out, limits
}

// roundLimits are the strictest failureLimit and inconclusiveLimit of the
// templates' metrics, as Scribe counts them: rounds (0: not set).
type roundLimits struct {
	threshold, inconclusive int32
}

func (l *roundLimits) take(m templateMetric) {
	lower := func(cur *int32, limit *int32) {
		if limit == nil {
			return
		}
		// Argo Rollouts fails a metric once its failures exceed the limit.
		if n := *limit + 1; *cur == 0 || n < *cur {
			*cur = n
		}
	}
	lower(&l.threshold, m.failureLimit)
	lower(&l.inconclusive, m.inconclusiveLimit)
}

// templateMetrics reads the template ref names and turns its metrics into
// probes, its args filled.
func (c *Checker) templateMetrics(ctx context.Context, w *scribev1.Workload, field string, ref scribev1.AnalysisTemplateRef, version string) ([]templateMetric, error) {
	if c.Templates == nil {
		return nil, errors.New("this controller reads no analysis templates")
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	key := types.NamespacedName{Namespace: w.Namespace, Name: ref.TemplateName}
	kind := "AnalysisTemplate"
	if ref.ClusterScope {
		kind, key.Namespace = "ClusterAnalysisTemplate", ""
	}
	u.SetKind(kind)
	if err := c.Templates.Get(ctx, key, u); err != nil {
		switch {
		case apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
			return nil, fmt.Errorf("%s %s not found", kind, strings.TrimPrefix(key.String(), "/"))
		case meta.IsNoMatchError(err) || isNoKind(err):
			return nil, fmt.Errorf("%s: Argo Rollouts' CRD is not installed", kind)
		}
		return nil, fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	rawSpec, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return nil, err
	}
	var declared argoAnalysisSpec
	if err := json.Unmarshal(rawSpec, &declared); err != nil {
		return nil, fmt.Errorf("%s %s: %s", kind, ref.TemplateName, remoteText(err.Error()))
	}
	values, err := templateArgs(w, declared.Args, pinnedArgs(u.GetAnnotations()), version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, ref.TemplateName, err)
	}
	filled, err := fillArgs(rawSpec, values)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, ref.TemplateName, err)
	}
	var spec argoAnalysisSpec
	if err := json.Unmarshal(filled, &spec); err != nil {
		return nil, fmt.Errorf("%s %s: %s", kind, ref.TemplateName, remoteText(err.Error()))
	}
	if len(spec.Metrics) > maxTemplateMetrics {
		return nil, fmt.Errorf("%s %s has %d metrics; Scribe runs at most %d of a template", kind, ref.TemplateName, len(spec.Metrics), maxTemplateMetrics)
	}
	if len(spec.DryRun) > 0 {
		return nil, fmt.Errorf("%s %s: dryRun is not supported: every metric Scribe runs counts", kind, ref.TemplateName)
	}
	var out []templateMetric
	for j, m := range spec.Metrics {
		tm, err := templateMetricOf(m, fmt.Sprintf("%s (%s %s, metrics[%d])", field, kind, ref.TemplateName, j))
		if err != nil {
			return nil, fmt.Errorf("%s %s: metric %s: %w", kind, ref.TemplateName, m.Name, err)
		}
		out = append(out, tm)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s %s has no metrics", kind, ref.TemplateName)
	}
	return out, nil
}

// isNoKind says err is the API server not knowing a kind.
func isNoKind(err error) bool {
	return strings.Contains(err.Error(), "no matches for kind")
}

// fillArgs replaces every {{args.NAME}} in a template's JSON with its
// value, escaped as JSON string content; an arg the template does not
// declare is an error naming it.
func fillArgs(raw []byte, values map[string]string) ([]byte, error) {
	var unknown []string
	out := argPlaceholder.ReplaceAllFunc(raw, func(m []byte) []byte {
		name := string(argPlaceholder.FindSubmatch(m)[1])
		v, ok := values[name]
		if !ok {
			unknown = append(unknown, name)
			return m
		}
		quoted, _ := json.Marshal(v)
		return quoted[1 : len(quoted)-1]
	})
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("{{args.%s}} is not a declared arg", strings.Join(unknown, "}}, {{args."))
	}
	return out, nil
}

// templateMetricOf is a metric as a probe of a provider Scribe runs.
func templateMetricOf(m argoMetric, field string) (templateMetric, error) {
	tm := templateMetric{name: m.Name, success: m.SuccessCondition, failure: m.FailureCondition, probe: probe{field: field, header: http.Header{}}}
	for _, l := range []struct {
		from *intstr.IntOrString
		to   **int32
		name string
	}{{m.FailureLimit, &tm.failureLimit, "failureLimit"}, {m.InconclusiveLimit, &tm.inconclusiveLimit, "inconclusiveLimit"}} {
		if l.from == nil {
			continue
		}
		if l.from.Type != intstr.Int || l.from.IntVal < 0 {
			return tm, fmt.Errorf("%s %s: want a number of at least 0", l.name, l.from.String())
		}
		n := l.from.IntVal
		*l.to = &n
	}
	if len(m.Provider) != 1 {
		return tm, fmt.Errorf("want exactly one provider, found %d", len(m.Provider))
	}
	for name, raw := range m.Provider {
		switch name {
		case "prometheus":
			var p argoPrometheus
			if err := json.Unmarshal(raw, &p); err != nil {
				return tm, fmt.Errorf("provider.prometheus: %s", remoteText(err.Error()))
			}
			if len(p.Authentication) > 0 && string(p.Authentication) != "null" && string(p.Authentication) != "{}" {
				return tm, errors.New("provider.prometheus.authentication (sigv4, oauth2) is not supported; a Scribe check's secretRef gives a bearer token or basic auth")
			}
			tm.probe.check = scribev1.Check{Type: scribev1.CheckPrometheus, Address: p.Address, Query: p.Query, InsecureSkipVerify: p.Insecure}
			addHeaders(tm.probe.header, p.Headers)
		case "web":
			var p argoWeb
			if err := json.Unmarshal(raw, &p); err != nil {
				return tm, fmt.Errorf("provider.web: %s", remoteText(err.Error()))
			}
			if (p.Method != "" && !strings.EqualFold(p.Method, http.MethodGet)) || p.Body != "" || (len(p.JSONBody) > 0 && string(p.JSONBody) != "null") {
				return tm, errors.New("provider.web: only GET without a body is supported")
			}
			path := p.JSONPath
			if path == "" {
				path = "{$}"
			}
			if err := ValidateJSONPath(path); err != nil {
				return tm, fmt.Errorf("provider.web.jsonPath: %w", err)
			}
			tm.probe.check = scribev1.Check{Type: scribev1.CheckWeb, URL: p.URL, JSONPath: path, InsecureSkipVerify: p.Insecure}
			addHeaders(tm.probe.header, p.Headers)
		case "datadog":
			var p argoDatadog
			if err := json.Unmarshal(raw, &p); err != nil {
				return tm, fmt.Errorf("provider.datadog: %s", remoteText(err.Error()))
			}
			if p.Query == "" || len(p.Queries) > 0 || p.Formula != "" {
				return tm, errors.New("provider.datadog: only a single query is supported (not queries and formula)")
			}
			tm.probe.check = scribev1.Check{Type: scribev1.CheckDatadog, Query: p.Query, SecretRef: &scribev1.LocalObjectReference{Name: datadogTemplateSecret}}
			if p.Interval != "" {
				d, err := time.ParseDuration(p.Interval)
				if err != nil || d <= 0 {
					return tm, fmt.Errorf("provider.datadog.interval %q is not a duration", p.Interval)
				}
				tm.probe.check.Window = &metav1.Duration{Duration: d}
			}
		case "newRelic":
			var p argoNewRelic
			if err := json.Unmarshal(raw, &p); err != nil {
				return tm, fmt.Errorf("provider.newRelic: %s", remoteText(err.Error()))
			}
			secret := newRelicTemplateSecret
			if p.Profile != "" {
				secret = p.Profile
			}
			tm.probe.check = scribev1.Check{Type: scribev1.CheckNewRelic, Query: p.Query, SecretRef: &scribev1.LocalObjectReference{Name: secret}}
		default:
			return tm, fmt.Errorf("provider %s is not supported: Scribe runs prometheus, web, datadog and newRelic metrics", name)
		}
	}
	return tm, nil
}

func addHeaders(h http.Header, hs []argoHeader) {
	for _, x := range hs {
		h.Set(x.Key, x.Value)
	}
}
