package controller

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func selectorPolicy(name string, sel metav1.LabelSelector) scribev1.TenantPolicy {
	return policy(name, scribev1.TenantPolicySpec{NamespaceSelector: sel})
}

// badOperator is a selector metav1.LabelSelectorAsSelector refuses: In
// without values.
var badOperator = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}

// TestSelectPoliciesFailsClosedOnASelectorItCannotEvaluate: a TenantPolicy
// whose namespaceSelector cannot be evaluated is never skipped for a
// namespace it may select: the namespace gets PolicyInvalid, naming the
// policy and the selector's field, instead of the defaults (no policy) or
// a hidden conflict. A broken policy whose sound parts exclude the
// namespace does not concern it.
func TestSelectPoliciesFailsClosedOnASelectorItCannotEvaluate(t *testing.T) {
	teamA := selectorPolicy("team-a", metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "team-a"}})
	generous := selectorPolicy("generous", metav1.LabelSelector{
		MatchLabels:      map[string]string{"tenant": "yes"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Equals", Values: []string{"gold"}}},
	})
	badValue := selectorPolicy("bad-value", metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "not a label value!"}})
	everything := selectorPolicy("broken-everywhere", badOperator)
	cases := []struct {
		name     string
		labels   map[string]string
		policies []scribev1.TenantPolicy
		want     []string
		field    string // in the PolicyInvalid error; "" when none
	}{
		{name: "a sound selector selects", labels: map[string]string{"kubernetes.io/metadata.name": "team-a"}, policies: []scribev1.TenantPolicy{teamA}, want: []string{"team-a"}},
		{name: "a broken selector whose other parts match fails the namespace closed, not to the defaults",
			labels: map[string]string{"kubernetes.io/metadata.name": "team-b", "tenant": "yes"}, policies: []scribev1.TenantPolicy{teamA, generous},
			field: "TenantPolicy generous: spec.namespaceSelector.matchExpressions[0]"},
		{name: "a broken selector does not hide a conflict",
			labels: map[string]string{"kubernetes.io/metadata.name": "team-a", "tenant": "yes"}, policies: []scribev1.TenantPolicy{teamA, generous},
			field: "TenantPolicy generous: spec.namespaceSelector.matchExpressions[0]"},
		{name: "a broken selector whose sound parts exclude the namespace does not concern it",
			labels: map[string]string{"kubernetes.io/metadata.name": "team-a"}, policies: []scribev1.TenantPolicy{teamA, generous}, want: []string{"team-a"}},
		{name: "In without values may select any namespace",
			labels: map[string]string{"kubernetes.io/metadata.name": "team-a"}, policies: []scribev1.TenantPolicy{teamA, everything},
			field: "TenantPolicy broken-everywhere: spec.namespaceSelector.matchExpressions[0]"},
		{name: "a matchLabels value that is not a label value is named",
			labels: map[string]string{}, policies: []scribev1.TenantPolicy{badValue},
			field: "TenantPolicy bad-value: spec.namespaceSelector.matchLabels[tenant]"},
		{name: "no policy selects: none", labels: map[string]string{"kubernetes.io/metadata.name": "team-c"}, policies: []scribev1.TenantPolicy{teamA}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := SelectPolicies("ns", c.labels, c.policies)
			if c.field != "" {
				var re *reasonError
				if !errors.As(err, &re) || re.reason != ReasonPolicyInvalid || !strings.Contains(err.Error(), c.field) {
					t.Fatalf("err = %v, want %s naming %q", err, ReasonPolicyInvalid, c.field)
				}
				if f := classify(err); !f.Stalled {
					t.Errorf("PolicyInvalid is not stalled: %+v", f)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(c.want, ",") {
				t.Fatalf("selected %v, want %v", names, c.want)
			}
		})
	}
}

// TestPolicyNamespacesAreThoseSelectedBeforeAndAfter: a TenantPolicy
// created, narrowed, widened or deleted concerns the namespaces it
// selected and those it selects (and, its selector broken, those it may
// select), so their custom resources are rendered again under what is
// granted now, or stalled.
func TestPolicyNamespacesAreThoseSelectedBeforeAndAfter(t *testing.T) {
	namespaces := map[string]map[string]string{
		"team-a": {"kubernetes.io/metadata.name": "team-a", "tier": "gold"},
		"team-b": {"kubernetes.io/metadata.name": "team-b", "tier": "silver"},
		"team-c": {"kubernetes.io/metadata.name": "team-c"},
	}
	gold := selectorPolicy("p", metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}})
	silver := selectorPolicy("p", metav1.LabelSelector{MatchLabels: map[string]string{"tier": "silver"}})
	broken := selectorPolicy("p", badOperator)
	cases := []struct {
		name     string
		old, new *scribev1.TenantPolicy
		want     string
	}{
		{name: "created", new: &gold, want: "team-a"},
		{name: "deleted: what it granted is revoked", old: &gold, want: "team-a"},
		{name: "moved: the namespace it left and the one it took", old: &gold, new: &silver, want: "team-a,team-b"},
		{name: "broken: every namespace it may select", old: &gold, new: &broken, want: "team-a,team-b,team-c"},
		{name: "nothing", want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := strings.Join(PolicyNamespaces(c.old, c.new, namespaces), ","); got != c.want {
				t.Fatalf("PolicyNamespaces = %q, want %q", got, c.want)
			}
		})
	}
}

// TestNamespaceWatchPassesLabelChangesOnly: the Namespace watch wakes the
// namespace's custom resources when its labels change (it may move under
// another TenantPolicy), not when anything else of it changes.
func TestNamespaceWatchPassesLabelChangesOnly(t *testing.T) {
	ns := func(labels map[string]string, annotations map[string]string) *metav1.PartialObjectMetadata {
		o := namespaceMetadata()
		o.Name, o.Labels, o.Annotations = "team-a", labels, annotations
		return o
	}
	p := NamespaceLabelsChanged()
	if !p.Update(event.UpdateEvent{ObjectOld: ns(map[string]string{"tier": "silver"}, nil), ObjectNew: ns(map[string]string{"tier": "gold"}, nil)}) {
		t.Error("a relabelled namespace is not passed")
	}
	if p.Update(event.UpdateEvent{ObjectOld: ns(map[string]string{"tier": "gold"}, nil), ObjectNew: ns(map[string]string{"tier": "gold"}, map[string]string{"a": "b"})}) {
		t.Error("an annotation change is passed")
	}
	if p.Create(event.CreateEvent{Object: ns(nil, nil)}) || p.Delete(event.DeleteEvent{Object: ns(nil, nil)}) {
		t.Error("a created or deleted namespace is passed")
	}
}
