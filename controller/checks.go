package controller

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/egress"
	"github.com/scribe-gitops/scribe/internal/health"
)

// Checker runs a Workload's analysis checks against the new version: its
// Deployment's availability, its pods' restarts, and queries to a metrics
// provider (Prometheus, a web endpoint, Datadog, New Relic).
type Checker struct {
	Client client.Client
	// HTTP is the client of checks and webhooks; nil is
	// NewAnalysisHTTPClient(Egress).
	HTTP *http.Client
	// Egress is where a check's or a webhook's URL may lead when HTTP is
	// nil (the zero Policy: public addresses only).
	Egress egress.Policy
	// Secrets reads a check's Secret, bound to the URL it is sent to
	// (Resolver.Secret); nil refuses checks that name one.
	Secrets func(ctx context.Context, namespace, name, url, field string) (map[string][]byte, error)
	// Templates reads Argo Rollouts' analysis templates (uncached); nil
	// refuses a Workload that references one.
	Templates client.Reader
	// RoundTimeout bounds a whole round (0: 30 s).
	RoundTimeout time.Duration
	// WebhookRoundTimeout bounds the webhooks of one gate together
	// (0: maxWebhookRoundTime).
	WebhookRoundTimeout time.Duration
}

// Run evaluates every check of w against version (RunRound's results).
func (c *Checker) Run(ctx context.Context, w *scribev1.Workload, version string, deployment scribev1.ObjectIdentity) []scribev1.CheckResult {
	return c.RunRound(ctx, w, version, deployment).Results
}

// RunRound evaluates every check of w against version: spec.rollout.analysis
// checks, then the metrics of its templates, whose failureLimit and
// inconclusiveLimit may make the round's limits stricter.
// deployment is the version's Deployment as the render's read-back names it.
func (c *Checker) RunRound(ctx context.Context, w *scribev1.Workload, version string, deployment scribev1.ObjectIdentity) *AnalysisRound {
	// The checks and templates are the Workload writer's: however many
	// there are, a round ends within maxRoundTime (a query past it fails).
	limit := c.RoundTimeout
	if limit <= 0 {
		limit = maxRoundTime
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var out []scribev1.CheckResult
	var rollback *WebhookRound
	if hooks, _ := webhooksOf(w, scribev1.WebhookRollback); len(hooks) > 0 {
		rollback = c.CallWebhooks(ctx, w, scribev1.WebhookRollback)
	}
	if w.Spec.Rollout.Analysis == nil {
		return &AnalysisRound{Rollback: rollback}
	}
	for i, ch := range w.Spec.Rollout.Analysis.Checks {
		res := scribev1.CheckResult{Name: ch.Name, Provider: ch.Type}
		var err error
		switch ch.Type {
		case scribev1.CheckAvailability:
			res.Condition = "available"
			res.Passed, res.Message, err = c.availability(ctx, deployment, &res)
		case scribev1.CheckRestarts:
			res.Passed, res.Message, err = c.restarts(ctx, deployment, ch, &res)
		case scribev1.CheckPrometheus, scribev1.CheckDatadog, scribev1.CheckNewRelic, scribev1.CheckWeb:
			res.Condition = condition(ch)
			var m measurement
			if m, err = c.measure(ctx, w, probe{field: fmt.Sprintf("spec.rollout.analysis.checks[%d]", i), check: ch}, version); err == nil {
				err = judge(&res, ch, m)
			}
		default:
			err = fmt.Errorf("unknown check type %q", ch.Type)
		}
		if err != nil {
			res.Passed, res.Inconclusive, res.Message = false, false, err.Error()
		}
		res.Message = boundMessage(res.Message)
		out = append(out, res)
	}
	templated, limits := c.runTemplates(ctx, w, version)
	return &AnalysisRound{Results: append(out, templated...), Threshold: limits.threshold, InconclusiveLimit: limits.inconclusive, Rollback: rollback}
}

// probe is one query to a provider: the check, where it is written (its
// field path, for messages) and headers a template adds.
type probe struct {
	field  string
	check  scribev1.Check
	header http.Header
}

// measure asks the probe's provider for its value, with the placeholders
// of its query filled for version.
func (c *Checker) measure(ctx context.Context, w *scribev1.Workload, p probe, version string) (measurement, error) {
	if p.check.Type != scribev1.CheckWeb {
		q, err := QueryFor(p.check.Query, w, version)
		if err != nil {
			return measurement{}, err
		}
		p.check.Query = q
	}
	switch p.check.Type {
	case scribev1.CheckPrometheus:
		return c.prometheus(ctx, w, p)
	case scribev1.CheckDatadog:
		return c.datadog(ctx, w, p, time.Now())
	case scribev1.CheckNewRelic:
		return c.newRelic(ctx, w, p)
	case scribev1.CheckWeb:
		return c.web(ctx, w, p, version)
	}
	return measurement{}, fmt.Errorf("unknown check type %q", p.check.Type)
}

func (c *Checker) deployment(ctx context.Context, id scribev1.ObjectIdentity) (*appsv1.Deployment, error) {
	if id.Name == "" {
		return nil, fmt.Errorf("the render names no Deployment for this version")
	}
	d := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: id.Namespace, Name: id.Name}, d); err != nil {
		return nil, fmt.Errorf("deployment %s: %w", id.Name, err)
	}
	return d, nil
}

func (c *Checker) availability(ctx context.Context, id scribev1.ObjectIdentity, res *scribev1.CheckResult) (bool, string, error) {
	d, err := c.deployment(ctx, id)
	if err != nil {
		return false, "", err
	}
	res.Value = fmt.Sprintf("%d/%d ready", d.Status.ReadyReplicas, d.Status.Replicas)
	v := health.Deployment(d)
	if v.State != health.Healthy {
		return false, fmt.Sprintf("%s not available: %s", d.Name, v.Message), nil
	}
	return true, fmt.Sprintf("%s available (%d/%d ready)", d.Name, d.Status.ReadyReplicas, d.Status.Replicas), nil
}

func (c *Checker) restarts(ctx context.Context, id scribev1.ObjectIdentity, ch scribev1.Check, res *scribev1.CheckResult) (bool, string, error) {
	d, err := c.deployment(ctx, id)
	if err != nil {
		return false, "", err
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return false, "", fmt.Errorf("deployment %s selector: %w", d.Name, err)
	}
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return false, "", fmt.Errorf("list pods of %s: %w", d.Name, err)
	}
	n := health.Restarts(pods.Items)
	limit := int64(0)
	if ch.Max != "" {
		if limit, err = strconv.ParseInt(ch.Max, 10, 32); err != nil {
			return false, "", fmt.Errorf("max %q: %w", ch.Max, err)
		}
	}
	res.Value, res.Condition = strconv.Itoa(int(n)), "<= "+strconv.FormatInt(limit, 10)
	if int64(n) > limit {
		return false, fmt.Sprintf("%d restarts in %d pods of %s, more than %d", n, len(pods.Items), d.Name, limit), nil
	}
	return true, fmt.Sprintf("%d restarts in %d pods of %s", n, len(pods.Items), d.Name), nil
}

// queryPlaceholder matches {{name}}, spaces allowed inside the braces.
var queryPlaceholder = regexp.MustCompile(`\{\{\s*([^{}\s]*)\s*\}\}`)

// QueryFor fills a Prometheus check's query for version of w:
// {{version}} is the version's name, {{namespace}} the Workload's
// namespace, {{workload}} its name. Every value is a Kubernetes name (no
// quote or backslash), so it can stand inside a PromQL string. Any other
// placeholder is an error naming it.
func QueryFor(query string, w *scribev1.Workload, version string) (string, error) {
	values := map[string]string{"version": version, "namespace": w.Namespace, "workload": w.Name}
	var unknown []string
	out := queryPlaceholder.ReplaceAllStringFunc(query, func(m string) string {
		name := queryPlaceholder.FindStringSubmatch(m)[1]
		if v, ok := values[name]; ok {
			return v
		}
		unknown = append(unknown, m)
		return m
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("query %q: unknown placeholder %s; known are {{version}}, {{namespace}} and {{workload}}", query, strings.Join(unknown, ", "))
	}
	return out, nil
}
