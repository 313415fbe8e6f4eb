package charts_test

import (
	"testing"
)

// The requester policy is rendered, bound everywhere, where the API
// server serves MutatingAdmissionPolicy, unless requesterPolicy.enabled
// is false.
func TestRequesterPolicyIsRenderedWhereTheAPIServerServesIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		extra  []string
		want   bool
	}{
		{"defaults, on an API server serving it", nil, []string{servesMAP}, true},
		{"an API server that does not serve it: none (requesters are claims)", nil, nil, false},
		{"requesterPolicy.enabled=false: none", map[string]any{"requesterPolicy": map[string]any{"enabled": false}}, []string{servesMAP}, false},
		{"watchNamespaces do not narrow it", map[string]any{"watchNamespaces": []string{"team-a"}}, []string{servesMAP}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helm(t, templateArgs(t, chartDir, tc.values, tc.extra...)...)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeAll([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			policy := named(objs, "MutatingAdmissionPolicy", releaseName+"-requester")
			binding := named(objs, "MutatingAdmissionPolicyBinding", releaseName+"-requester")
			if !tc.want {
				if policy != nil || binding != nil {
					t.Fatalf("policy %v, binding %v rendered", policy != nil, binding != nil)
				}
				return
			}
			if policy == nil || binding == nil {
				t.Fatalf("policy %v, binding %v", policy != nil, binding != nil)
			}
			if got := binding.Object["spec"].(map[string]any); got["policyName"] != policy.GetName() || got["matchResources"] != nil {
				t.Errorf("binding spec %v", got)
			}
		})
	}
}
