package render

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestAPIRulesAgreeWithTheAPIServer creates each object with a dry run in
// a real kube-apiserver and requires apiRules to refuse exactly what the
// apiserver refuses, so the rules are the apiserver's and not a guess of
// them. The one deliberate difference: a Service name must be a DNS-1035
// label, which 1.36 relaxes to a DNS-1123 label behind a beta gate
// (RelaxedServiceNameValidation) that older apiservers do not have.
func TestAPIRulesAgreeWithTheAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}); err != nil {
		t.Fatal(err)
	}

	configMap := func(data string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"demo"},"data":` + data + `}`
	}
	deployment := func(meta, podSpec string) string {
		return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":` + meta + `,"spec":{"selector":{"matchLabels":{"app":"w"}},
			"template":{"metadata":{"labels":{"app":"w"}},"spec":` + podSpec + `}}}`
	}
	const okMeta = `{"name":"w","namespace":"demo"}`
	container := func(extra string) string {
		return `{"containers":[{"name":"app","image":"nginx"` + extra + `}]}`
	}
	service := func(name, portName string) string {
		return `{"apiVersion":"v1","kind":"Service","metadata":{"name":"` + name + `","namespace":"demo"},"spec":{"ports":[{"name":"` + portName + `","port":80}]}}`
	}
	cases := []struct {
		name     string
		object   string
		stricter bool // apiRules refuses what this apiserver accepts, on purpose
	}{
		{"valid ConfigMap", configMap(`{"a.b":"x","A_B-1":"y"}`), false},
		{"ConfigMap key with ../", configMap(`{"../../etc/passwd":"x"}`), false},
		{"ConfigMap key ..", configMap(`{"..":"x"}`), false},
		{"empty ConfigMap key", configMap(`{"":"x"}`), false},
		{"ConfigMap key with a space", configMap(`{"a b":"x"}`), false},
		{"ConfigMap key of 253 characters", configMap(`{"` + strings.Repeat("k", 253) + `":"x"}`), false},
		{"ConfigMap key of 254 characters", configMap(`{"` + strings.Repeat("k", 254) + `":"x"}`), false},
		{"ConfigMap of 1 MiB", configMap(`{"a":"` + strings.Repeat("x", 1<<20) + `"}`), false},
		{"ConfigMap over 1 MiB", configMap(`{"a":"` + strings.Repeat("x", 1<<20+1) + `"}`), false},
		{"ConfigMap name with dots", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a.b","namespace":"demo"}}`, false},
		{"ConfigMap name with a slash", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a/b","namespace":"demo"}}`, false},
		{"ConfigMap name with uppercase", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"A","namespace":"demo"}}`, false},
		{"label value with a space", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"demo","labels":{"a":"b c"}}}`, false},
		{"label key with two slashes", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"demo","labels":{"a/b/c":"x"}}}`, false},
		{"annotation key starting with -", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"demo","annotations":{"-a":"x"}}}`, false},
		{"valid Service", service("web", "http"), false},
		{"Service port name in uppercase", service("web", "HTTP"), false},
		{"Service name with a dot", service("web.v1", "http"), false},
		{"Service name starting with a digit", service("1web", "http"), true},
		{"valid Deployment", deployment(okMeta, container(`,"env":[{"name":"a b.c","value":"1"}],"ports":[{"name":"http","containerPort":80}]`)), false},
		{"Deployment name with uppercase", deployment(`{"name":"W","namespace":"demo"}`, container("")), false},
		{"env name with =", deployment(okMeta, container(`,"env":[{"name":"A=B"}]`)), false},
		{"env name with a newline", deployment(okMeta, container(`,"env":[{"name":"A\nB"}]`)), false},
		{"envFrom prefix with =", deployment(okMeta, container(`,"envFrom":[{"prefix":"P=","configMapRef":{"name":"c"}}]`)), false},
		{"container name with uppercase", deployment(okMeta, `{"containers":[{"name":"App","image":"nginx"}]}`), false},
		{"two containers of one name", deployment(okMeta, `{"containers":[{"name":"a","image":"nginx"},{"name":"a","image":"nginx"}]}`), false},
		{"container port name of 16 characters", deployment(okMeta, container(`,"ports":[{"name":"abcdefghijklmnop","containerPort":80}]`)), false},
		{"nodeSelector key with a space", deployment(okMeta, `{"nodeSelector":{"node pool":"a"},"containers":[{"name":"app","image":"nginx"}]}`), false},
		{"nodeSelector value with a space", deployment(okMeta, `{"nodeSelector":{"pool":"a b"},"containers":[{"name":"app","image":"nginx"}]}`), false},
		{"volume name with a dot", deployment(okMeta, `{"volumes":[{"name":"a.b","emptyDir":{}}],"containers":[{"name":"app","image":"nginx"}]}`), false},
		{"pod template label value", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"w","namespace":"demo"},"spec":{"selector":{"matchLabels":{"app":"-w"}},"template":{"metadata":{"labels":{"app":"-w"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}}}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			dec := json.NewDecoder(strings.NewReader(tc.object))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal([]byte(tc.object), &u.Object); err != nil {
				t.Fatal(err)
			}
			apiErr := c.Create(ctx, u, client.DryRunAll)
			vs := apiRules(u.GetAPIVersion(), u.GetKind(), m, len(tc.object))
			var msgs []string
			for _, v := range vs {
				msgs = append(msgs, v.err.Error())
			}
			refused := len(vs) > 0
			switch {
			case tc.stricter:
				if apiErr != nil || !refused {
					t.Fatalf("want the apiserver to accept (%v) and apiRules to refuse (%q)", apiErr, msgs)
				}
			case (apiErr != nil) != refused:
				t.Fatalf("the apiserver says %v; apiRules says %q", apiErr, msgs)
			}
		})
	}
}
