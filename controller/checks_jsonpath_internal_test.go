package controller

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// nestedA is a JSON document of about size bytes: objects nested under
// "a", a number at the bottom.
func nestedA(size int) []byte {
	depth := size / len(`{"a":}`)
	return []byte(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth))
}

// TestJSONPathRefusesRepeatedWalks: a JSONPath that would walk the answer
// once per use of a construct (recursive descent, a union, a range) is
// refused before it runs, saying which construct, both when it is
// validated and when it is evaluated against a 40 KB answer from a
// hostile server: the check fails instead of the controller spinning.
func TestJSONPathRefusesRepeatedWalks(t *testing.T) {
	doc := nestedA(40 << 10)
	for _, tt := range []struct {
		name, path, want string
	}{
		{name: "{..a..a..a..a} on a 40 KB nested document", path: "{..a..a..a..a}", want: "recursive descent"},
		{name: "one recursive descent from the root", path: "{$..a}", want: "recursive descent"},
		{name: "recursive descent inside a filter", path: `{.a[?(@..a == 1)]}`, want: "recursive descent"},
		{name: "a union repeated", path: "{.a['a','a','a']['a','a','a']['a','a','a']}", want: "union"},
		{name: "a range", path: "{range .a}{.a}{end}", want: "range"},
		{name: "a path that does not parse", path: "{.a[}", want: "does not parse"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidateJSONPath(tt.path); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ValidateJSONPath: %v, want an error saying %q", err, tt.want)
			}
			if _, _, err := selectValue(doc, tt.path); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "jsonPath") {
				t.Fatalf("selectValue: %v, want a jsonPath error saying %q", err, tt.want)
			}
		})
	}
}

// TestJSONPathKeepsHonestPaths: the paths Argo Rollouts' web metrics and
// Scribe's web checks use select their value as before.
func TestJSONPathKeepsHonestPaths(t *testing.T) {
	doc := []byte(`{"data": {"ok": true, "errorRate": 0.01, "items": [{"name": "x", "value": 3}, {"name": "y", "value": 4}]}}`)
	for _, tt := range []struct {
		path string
		want any
	}{
		{"{.data.errorRate}", 0.01},
		{"{$.data.ok}", true},
		{"{.data.items[1].value}", 4.0},
		{"{.data.items[*].value}", 3.0},
		{`{.data.items[?(@.name=="y")].value}`, 4.0},
		{"{.data.items[-1:].name}", "y"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			got, found, err := selectValue(doc, tt.path)
			if err != nil || !found || got != tt.want {
				t.Fatalf("selectValue = %v, %v, %v; want %v", got, found, err, tt.want)
			}
		})
	}
	if got, found, err := selectValue(doc, "{$}"); err != nil || !found || got.(map[string]any)["data"] == nil {
		t.Fatalf("{$} = %v, %v, %v; want the whole answer", got, found, err)
	}
}

// TestJSONPathBoundsTheWalk: even without constructs that repeat it, a
// long path over a large answer is refused before it runs once the path's
// nodes times the answer's values exceed maxJSONPathWork.
func TestJSONPathBoundsTheWalk(t *testing.T) {
	items := make([]any, 100000)
	for i := range items {
		items[i] = map[string]any{"v": i}
	}
	doc, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		t.Fatal(err)
	}
	long := "{" + strings.Repeat(`.items[?(@.v >= 0)]`, 30) + ".v}"
	if _, _, err := selectValue(doc, long); err == nil || !strings.Contains(err.Error(), "exceeds the bound") {
		t.Fatalf("selectValue: %v, want the walk's bound", err)
	}
	if _, found, err := selectValue(doc, "{.items[3].v}"); err != nil || !found {
		t.Fatalf("a short path over the same answer: %v, %v", found, err)
	}
}

// TestTemplateWebMetricNamesItsJSONPath: an Argo Rollouts web metric whose
// jsonPath would repeat its walk is refused when the template is read,
// naming the field.
func TestTemplateWebMetricNamesItsJSONPath(t *testing.T) {
	m := argoMetric{Name: "m", SuccessCondition: "result > 0", Provider: map[string]json.RawMessage{
		"web": json.RawMessage(`{"url": "https://example.com/x", "jsonPath": "{..a..a..a..a}"}`),
	}}
	_, err := templateMetricOf(m, "spec.rollout.analysis.templates[0]")
	if err == nil || !strings.Contains(err.Error(), "provider.web.jsonPath") || !strings.Contains(err.Error(), "recursive descent") {
		t.Fatalf("templateMetricOf: %v, want an error naming provider.web.jsonPath", err)
	}
}

// TestJSONPathWebCheckNamesItsField: a Workload's web check whose jsonPath
// would repeat its walk fails before any request, naming the field.
func TestJSONPathWebCheckNamesItsField(t *testing.T) {
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	checks := []scribev1.Check{
		{Name: "a", Type: scribev1.CheckWeb, URL: "ftp://example.com/a", JSONPath: "{.v}"},
		{Name: "b", Type: scribev1.CheckWeb, URL: "ftp://example.com/b", JSONPath: "{.v}"},
		{Name: "c", Type: scribev1.CheckWeb, URL: "https://example.com/c", JSONPath: "{..a..a..a..a}"},
	}
	w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Checks: checks}}
	res := (&Checker{}).Run(t.Context(), w, "v1", scribev1.ObjectIdentity{})
	if len(res) != 3 {
		t.Fatalf("results %+v", res)
	}
	if r := res[2]; r.Passed || !strings.Contains(r.Message, "spec.rollout.analysis.checks[2].jsonPath") || !strings.Contains(r.Message, "recursive descent") {
		t.Fatalf("%+v, want a failure naming spec.rollout.analysis.checks[2].jsonPath", r)
	}
}
