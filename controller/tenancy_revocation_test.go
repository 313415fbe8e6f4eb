package controller_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// tierLabel is the Namespace label the revocation test's policy selects
// on: a label the platform sets, which the test moves.
const tierLabel = "tier.platform.example.com/test"

// accountsAt lists the Flux accounts (serviceAccountName values) the
// repository's tree holds at commit, sorted and deduplicated.
func (f *fixture) accountsAt(t *testing.T, commit string) string {
	t.Helper()
	out, _ := publishtest.RunGit("", "--git-dir", f.srv.BareDir(repoName), "grep", "-h", "serviceAccountName:", commit)
	seen := map[string]bool{}
	var accounts []string
	for _, l := range strings.Split(out, "\n") {
		if _, v, ok := strings.Cut(l, "serviceAccountName:"); ok {
			if v = strings.TrimSpace(v); !seen[v] {
				seen[v] = true
				accounts = append(accounts, v)
			}
		}
	}
	return strings.Join(accounts, ",")
}

// labelNamespace sets (value != "") or removes the tier label of ns.
func (f *fixture) labelNamespace(t *testing.T, value string) {
	t.Helper()
	ns := &corev1.Namespace{}
	if err := f.e.c.Get(f.ctx(), types.NamespacedName{Name: f.ns}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	if value == "" {
		delete(ns.Labels, tierLabel)
	} else {
		ns.Labels[tierLabel] = value
	}
	if err := f.e.c.Update(f.ctx(), ns); err != nil {
		t.Fatal(err)
	}
}

// TestTenantPolicyRevocationReachesAnIdleWorkload: what a TenantPolicy
// grants reaches a Workload that is otherwise idle (applied and healthy,
// its spec unchanged) whenever the grant changes: the policy's account
// changed, its Namespace relabelled out of the policy and back, the
// policy deleted. Each time the Workload is rendered again and the new
// account (or none) committed; nothing keeps applying with the account
// of a grant that is gone.
func TestTenantPolicyRevocationReachesAnIdleWorkload(t *testing.T) {
	f := newFixture(t)
	ctx := f.ctx()
	policy := &scribev1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tier-" + f.ns},
		Spec: scribev1.TenantPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{tierLabel: f.ns}},
			Applier:           &scribev1.TenantApplier{ServiceAccountName: "team-applier"},
		}}
	if err := f.e.c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.e.c.Delete(context.Background(), policy) })
	f.labelNamespace(t, f.ns)
	f.startWithRepository(t)
	first := f.deployStable(t, workload(f.ns, "v1"))
	if got := f.accountsAt(t, first); got != "team-applier" {
		t.Fatalf("the first commit applies as %q, want team-applier", got)
	}

	committed := func(what, want, after string) string {
		t.Helper()
		var rev string
		f.waitWorkload(t, what, func(w *scribev1.Workload) bool {
			rev = w.Status.Revision
			return rev != "" && rev != after && f.accountsAt(t, rev) == want
		})
		return rev
	}

	// The platform changes the account: no change of the Workload's.
	if err := f.e.c.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.Applier.ServiceAccountName = "team-narrow"
	if err := f.e.c.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	changed := committed("the policy's new account committed", "team-narrow", first)

	// The Namespace leaves the policy: no policy, no account.
	f.labelNamespace(t, "")
	left := committed("the account gone once the namespace is relabelled out of the policy", "", changed)

	// And comes back under it.
	f.labelNamespace(t, f.ns)
	back := committed("the account back once the namespace is relabelled into the policy", "team-narrow", left)

	// The policy is deleted: what it granted is revoked.
	if err := f.e.c.Delete(ctx, policy); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	committed("the account gone once the policy is deleted", "", back)
}

// TestTenantPolicyCRDRefusesASelectorItCannotEvaluate: the apiserver
// refuses a TenantPolicy whose namespaceSelector has an operator
// metav1.LabelSelectorAsSelector cannot evaluate, or values that do not
// go with it, naming the field; sound selectors are accepted. (A key or
// value that is not a label's is left to the controller, which fails the
// namespaces such a policy may select closed: checking them in CEL on
// metav1.LabelSelector's unbounded lists exceeds the apiserver's cost
// budget.)
func TestTenantPolicyCRDRefusesASelectorItCannotEvaluate(t *testing.T) {
	e := testEnv(t)
	ctx := t.Context()
	expr := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	for _, tc := range []struct {
		name    string
		sel     metav1.LabelSelector
		refused string // "" when accepted
	}{
		{"In without values", expr("tier", metav1.LabelSelectorOpIn), "spec.namespaceSelector.matchExpressions"},
		{"NotIn without values", expr("tier", metav1.LabelSelectorOpNotIn), "spec.namespaceSelector.matchExpressions"},
		{"Exists with values", expr("tier", metav1.LabelSelectorOpExists, "gold"), "spec.namespaceSelector.matchExpressions"},
		{"an unknown operator", expr("tier", "Equals", "gold"), "spec.namespaceSelector.matchExpressions"},
		{"In with values", expr("tier", metav1.LabelSelectorOpIn, "gold", "silver"), ""},
		{"DoesNotExist", expr("example.com/tier", metav1.LabelSelectorOpDoesNotExist), ""},
		{"matchLabels by name", metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "team-a"}}, ""},
		{"everything", metav1.LabelSelector{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &scribev1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "crd-selector-"}, Spec: scribev1.TenantPolicySpec{NamespaceSelector: tc.sel}}
			// Server-side dry run: an accepted policy is not stored, so it
			// selects no other test's namespace.
			err := e.c.Create(ctx, p, client.DryRunAll)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("create = %v, want Invalid with %q", err, tc.refused)
			}
		})
	}
}
