package controller

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
)

// Checker runs a Workload's analysis checks against the new version: its
// Deployment's availability, its pods' restarts, and Prometheus queries.
type Checker struct {
	Client client.Client
	HTTP   *http.Client
}

// Run evaluates every check of w against version.
// deployment is the version's Deployment as the render's read-back names it.
func (c *Checker) Run(ctx context.Context, w *scribev1.Workload, version string, deployment scribev1.ObjectIdentity) []scribev1.CheckResult {
	var out []scribev1.CheckResult
	for _, ch := range w.Spec.Rollout.Analysis.Checks {
		res := scribev1.CheckResult{Name: ch.Name}
		var err error
		switch ch.Type {
		case scribev1.CheckAvailability:
			res.Passed, res.Message, err = c.availability(ctx, deployment)
		case scribev1.CheckRestarts:
			res.Passed, res.Message, err = c.restarts(ctx, deployment, ch)
		case scribev1.CheckPrometheus:
			var q string
			if q, err = QueryFor(ch.Query, w, version); err == nil {
				ch.Query = q
				res.Passed, res.Message, err = c.prometheus(ctx, ch)
			}
		default:
			err = fmt.Errorf("unknown check type %q", ch.Type)
		}
		if err != nil {
			res.Passed, res.Message = false, err.Error()
		}
		res.Message = boundMessage(res.Message)
		out = append(out, res)
	}
	return out
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

func (c *Checker) availability(ctx context.Context, id scribev1.ObjectIdentity) (bool, string, error) {
	d, err := c.deployment(ctx, id)
	if err != nil {
		return false, "", err
	}
	v := health.Deployment(d)
	if v.State != health.Healthy {
		return false, fmt.Sprintf("%s not available: %s", d.Name, v.Message), nil
	}
	return true, fmt.Sprintf("%s available (%d/%d ready)", d.Name, d.Status.ReadyReplicas, d.Status.Replicas), nil
}

func (c *Checker) restarts(ctx context.Context, id scribev1.ObjectIdentity, ch scribev1.Check) (bool, string, error) {
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
