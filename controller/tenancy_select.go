package controller

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// ReasonPolicyInvalid: a TenantPolicy that may select the namespace has a
// spec.namespaceSelector that cannot be evaluated. Nothing is committed
// for the namespace until the platform fixes it: a broken policy neither
// grants the defaults nor hides a conflict.
const ReasonPolicyInvalid = "PolicyInvalid"

// selectorProblem is why a part of a TenantPolicy's namespaceSelector
// cannot be evaluated: Field is its path in the TenantPolicy.
type selectorProblem struct {
	Field string
	Err   error
}

// selectorProblems lists the parts of sel that metav1.LabelSelectorAsSelector
// refuses, each with its field path under spec.namespaceSelector. It also
// says whether the parts that can be evaluated match lbls: a policy whose
// sound parts already exclude the namespace does not select it, whatever
// its broken parts say.
func selectorProblems(sel *metav1.LabelSelector, lbls labels.Set) (problems []selectorProblem, soundPartsMatch bool) {
	soundPartsMatch = true
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		one := &metav1.LabelSelector{MatchLabels: map[string]string{k: sel.MatchLabels[k]}}
		s, err := metav1.LabelSelectorAsSelector(one)
		if err != nil {
			problems = append(problems, selectorProblem{Field: fmt.Sprintf("spec.namespaceSelector.matchLabels[%s]", k), Err: err})
			continue
		}
		if !s.Matches(lbls) {
			soundPartsMatch = false
		}
	}
	for i, req := range sel.MatchExpressions {
		one := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req}}
		s, err := metav1.LabelSelectorAsSelector(one)
		if err != nil {
			problems = append(problems, selectorProblem{Field: fmt.Sprintf("spec.namespaceSelector.matchExpressions[%d]", i), Err: err})
			continue
		}
		if !s.Matches(lbls) {
			soundPartsMatch = false
		}
	}
	return problems, soundPartsMatch
}

// SelectPolicies decides which TenantPolicies select the namespace ns,
// whose labels are nsLabels. It fails closed: a policy whose
// namespaceSelector cannot be evaluated, and whose other parts do not
// already exclude the namespace, might select it, so the namespace gets
// an error (ReasonPolicyInvalid, naming the policy and the selector's
// field) instead of the defaults of a namespace no policy selects, or a
// hidden conflict with another policy.
func SelectPolicies(ns string, nsLabels map[string]string, policies []scribev1.TenantPolicy) ([]scribev1.TenantPolicy, error) {
	set := labels.Set(nsLabels)
	var selected []scribev1.TenantPolicy
	var broken []string
	for _, p := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NamespaceSelector)
		if err == nil {
			if sel.Matches(set) {
				selected = append(selected, p)
			}
			continue
		}
		problems, mayMatch := selectorProblems(&p.Spec.NamespaceSelector, set)
		if !mayMatch {
			continue
		}
		if len(problems) == 0 {
			// Refused as a whole though each part is sound: name the field.
			problems = []selectorProblem{{Field: "spec.namespaceSelector", Err: err}}
		}
		for _, pr := range problems {
			broken = append(broken, fmt.Sprintf("TenantPolicy %s: %s: %v", p.Name, pr.Field, pr.Err))
		}
	}
	if len(broken) > 0 {
		slices.Sort(broken)
		return nil, &reasonError{reason: ReasonPolicyInvalid, err: fmt.Errorf(
			"namespace %s may be selected by a TenantPolicy whose selector cannot be evaluated (%s): nothing is committed for this namespace until the platform fixes the selector",
			ns, strings.Join(broken, "; "))}
	}
	return selected, nil
}

// policyMaySelect reports whether p may select a namespace labelled lbls:
// it does, or its selector cannot be evaluated and its sound parts do not
// exclude the namespace (SelectPolicies fails such a namespace closed).
func policyMaySelect(p *scribev1.TenantPolicy, lbls map[string]string) bool {
	set := labels.Set(lbls)
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NamespaceSelector)
	if err == nil {
		return sel.Matches(set)
	}
	_, mayMatch := selectorProblems(&p.Spec.NamespaceSelector, set)
	return mayMatch
}
