package charts_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// servesMAP is the flag `helm template` needs to render as against an API
// server serving MutatingAdmissionPolicy (`helm install` asks the cluster).
const servesMAP = "--api-versions=admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"

func TestFinalizerPolicyCoversWhatTheReleaseReconciles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		extra  []string
		// want is the binding's spec.matchResources as YAML; "none" when
		// neither the policy nor its binding is rendered.
		want string
	}{
		{"defaults, on an API server serving it: every namespace", nil, []string{servesMAP}, "null\n"},
		{"an API server that does not serve it: none", nil, nil, "none"},
		{"finalizerPolicy.enabled=false: none", map[string]any{"finalizerPolicy": map[string]any{"enabled": false}}, []string{servesMAP}, "none"},
		{"watchNamespaces: those namespaces", map[string]any{"watchNamespaces": []string{"team-a", "team-b"}}, []string{servesMAP},
			"namespaceSelector:\n  matchExpressions:\n  - key: kubernetes.io/metadata.name\n    operator: In\n    values:\n    - team-a\n    - team-b\n"},
		{"a shard's key=value selector: its objects", map[string]any{"labelSelector": "sharding.scribe.dev/key=shard1"}, []string{servesMAP},
			"objectSelector:\n  matchLabels:\n    sharding.scribe.dev/key: shard1\n"},
		{"key==value pairs: all of them", map[string]any{"labelSelector": "a==b, c=d"}, []string{servesMAP},
			"objectSelector:\n  matchLabels:\n    a: b\n    c: d\n"},
		{"a set-based selector it cannot express: none (the controller adds the finalizer)", map[string]any{"labelSelector": "sharding.scribe.dev/key in (a,b)"}, []string{servesMAP}, "none"},
		{"an inequality: none", map[string]any{"labelSelector": "a!=b"}, []string{servesMAP}, "none"},
		{"a key required twice (the controller reconciles nothing): none", map[string]any{"labelSelector": "a=b,a=c"}, []string{servesMAP}, "none"},
		{"an empty term (the controller refuses to start): none", map[string]any{"labelSelector": "a=b,"}, []string{servesMAP}, "none"},
		{"a key labels.Parse refuses: none", map[string]any{"labelSelector": "Example.com/k=v"}, []string{servesMAP}, "none"},
		{"a value labels.Parse refuses: none", map[string]any{"labelSelector": "a=-b"}, []string{servesMAP}, "none"},
		{"an empty value: that label, empty", map[string]any{"labelSelector": "a="}, []string{servesMAP}, "objectSelector:\n  matchLabels:\n    a: \"\"\n"},
		{"--watch-namespaces in extraArgs (a scope the chart cannot read): none", map[string]any{"extraArgs": []string{"--watch-namespaces=team-a"}}, []string{servesMAP}, "none"},
		{"--watch-label-selector in extraArgs: none", map[string]any{"extraArgs": []string{"--watch-label-selector=a=b"}}, []string{servesMAP}, "none"},
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
			policy := named(objs, "MutatingAdmissionPolicy", releaseName+"-finalizer")
			binding := named(objs, "MutatingAdmissionPolicyBinding", releaseName+"-finalizer")
			if tc.want == "none" {
				if policy != nil || binding != nil {
					t.Fatalf("policy %v, binding %v rendered", policy != nil, binding != nil)
				}
				return
			}
			if policy == nil || binding == nil {
				t.Fatalf("policy %v, binding %v", policy != nil, binding != nil)
			}
			if name, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); name != policy.GetName() {
				t.Errorf("the binding binds %q, not %s", name, policy.GetName())
			}
			match, _, _ := unstructured.NestedFieldNoCopy(binding.Object, "spec", "matchResources")
			got, err := yaml.Marshal(match)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("matchResources:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
