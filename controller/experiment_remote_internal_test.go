package controller

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// kubeconfigWith is a one-context kubeconfig whose cluster and user carry
// the given fields (YAML lines, indented by the caller's keys).
func kubeconfigWith(cluster, user string) []byte {
	return []byte(`apiVersion: v1
kind: Config
current-context: admin@lab
clusters:
- name: lab
  cluster:
    server: https://10.0.0.1:6443
` + cluster + `
contexts:
- name: admin@lab
  context: {cluster: lab, user: admin}
users:
- name: admin
  user:
` + user + "\n")
}

const (
	inlineCA    = "    certificate-authority-data: Q0E=" // "CA"
	inlineCert  = "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ"
	inlineToken = "    token: abc"
)

func TestParseRemoteKubeconfigTakesOnlyInlineData(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    []byte
		want    remoteKubeconfig
		wantErr string
	}{
		{name: "client certificate and CA inline (Cluster API's)", data: kubeconfigWith(inlineCA, inlineCert),
			want: remoteKubeconfig{Server: "https://10.0.0.1:6443", CAData: []byte("CA"), CertData: []byte("CERT"), KeyData: []byte("KEY")}},
		{name: "bearer token", data: kubeconfigWith(inlineCA, inlineToken),
			want: remoteKubeconfig{Server: "https://10.0.0.1:6443", CAData: []byte("CA"), BearerToken: "abc"}},
		{name: "the controller's own token file is refused", data: kubeconfigWith(inlineCA, "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"),
			wantErr: "sets tokenFile (a file)"},
		{name: "a CA file is refused", data: kubeconfigWith("    certificate-authority: /etc/ssl/ca.crt", inlineToken),
			wantErr: "sets certificate-authority (a file)"},
		{name: "client certificate files are refused", data: kubeconfigWith(inlineCA, "    client-certificate: /a.crt\n    client-key: /a.key"),
			wantErr: "sets client-certificate (a file), client-key (a file)"},
		{name: "a credential plugin is refused (no program runs)", data: kubeconfigWith(inlineCA, "    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: gke-gcloud-auth-plugin}"),
			wantErr: "exec (a credential plugin)"},
		{name: "a proxy is refused", data: kubeconfigWith(inlineCA+"\n    proxy-url: http://10.0.0.9:3128", inlineToken),
			wantErr: "sets proxy-url"},
		{name: "impersonation is refused", data: kubeconfigWith(inlineCA, inlineToken+"\n    as: system:admin"),
			wantErr: "as (impersonation)"},
		{name: "no credentials", data: kubeconfigWith(inlineCA, "    {}"),
			wantErr: `user "admin" has neither a token nor client-certificate-data`},
		{name: "plain http is refused", data: []byte(strings.Replace(string(kubeconfigWith(inlineCA, inlineToken)), "https://", "http://", 1)),
			wantErr: `server "http://10.0.0.1:6443" is not an https URL`},
		{name: "not YAML", data: []byte("{{"), wantErr: "not a kubeconfig"},
		{name: "no current context among several", data: []byte(strings.Replace(string(kubeconfigWith(inlineCA, inlineToken)), "current-context: admin@lab", "current-context: other", 1)),
			wantErr: `no current context (current-context "other"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRemoteKubeconfig(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g, w := mustJSON(t, got), mustJSON(t, tc.want); g != w {
				t.Fatalf("got %s, want %s", g, w)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestArgoClusterSecretRegistersTheTargetForItsProjectOnly(t *testing.T) {
	exp := types.NamespacedName{Namespace: "team-a", Name: "lab"}
	k := remoteKubeconfig{Server: "https://10.0.0.1:6443", CAData: []byte("CA"), CertData: []byte("CERT"), KeyData: []byte("KEY")}
	s, err := argoClusterSecret("argocd", "team-a/lab/app", "scribe-team-a-lab", exp, "app", k)
	if err != nil {
		t.Fatal(err)
	}
	if s.Namespace != "argocd" || s.Name != argoClusterSecretName("team-a/lab/app") || !strings.HasPrefix(s.Name, "scribe-cluster-") {
		t.Fatalf("Secret %s/%s", s.Namespace, s.Name)
	}
	if s.Labels["argocd.argoproj.io/secret-type"] != "cluster" || !registrationOf(s, exp, "app") || registrationOf(s, exp, "load") ||
		registrationOf(s, types.NamespacedName{Namespace: "team-b", Name: "lab"}, "app") {
		t.Fatalf("labels %v", s.Labels)
	}
	for k, want := range map[string]string{
		"name": "team-a/lab/app", "server": "https://10.0.0.1:6443", "project": "scribe-team-a-lab",
		// Argo CD's ClusterConfig: the TLS data base64 in JSON.
		"config": `{"tlsClientConfig":{"insecure":false,"caData":"Q0E=","certData":"Q0VSVA==","keyData":"S0VZ"}}`,
	} {
		if got := string(s.Data[k]); got != want {
			t.Errorf("data[%s] = %s, want %s", k, got, want)
		}
	}
	if other := argoClusterSecretName("team-b/lab/app"); other == s.Name {
		t.Fatalf("two namespaces' targets share the Secret %s", other)
	}
}

func TestReachSaysWhetherTheServerAnswers(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized) // an answer all the same
	}))
	defer srv.Close()
	if err := reach(context.Background(), remoteKubeconfig{Server: srv.URL, Insecure: true, BearerToken: "x"}); err != nil {
		t.Fatalf("a 401 is an answer: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://" + ln.Addr().String()
	_ = ln.Close()
	err = reach(context.Background(), remoteKubeconfig{Server: closed, Insecure: true, BearerToken: "x"})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a closed port: %v", err)
	}
	// A server whose certificate the kubeconfig's CA does not sign is not
	// the cluster.
	err = reach(context.Background(), remoteKubeconfig{Server: srv.URL, CAData: []byte("not a CA"), BearerToken: "x"})
	if err == nil {
		t.Fatal("an unverified server answered")
	}
}

func TestAddressOfReadsWhatEachKindReports(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  string
		want string
	}{
		{"a Gateway's first address", `{"kind": "Gateway", "status": {"addresses": [{"type": "IPAddress", "value": "10.0.0.5"}]}}`, "10.0.0.5"},
		{"a LoadBalancer Service's IP", `{"kind": "Service", "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.6"}]}}}`, "10.0.0.6"},
		{"an Ingress's hostname", `{"kind": "Ingress", "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}}`, "lb.example.com"},
		{"nothing published yet", `{"kind": "Service", "status": {"loadBalancer": {}}}`, ""},
		{"no status", `{"kind": "Gateway"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			if err := json.Unmarshal([]byte(tc.obj), &obj); err != nil {
				t.Fatal(err)
			}
			if got := addressOf(obj); got != tc.want {
				t.Fatalf("addressOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGetRemoteBoundsWhatATargetClusterSends(t *testing.T) {
	var gotPath string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		if r.URL.Path == "/apis/networking.k8s.io/v1/namespaces/demo/ingresses/huge" {
			_, _ = w.Write([]byte(`{"pad": "` + strings.Repeat("x", maxRemoteObject) + `"}`))
			return
		}
		if r.URL.Path == "/api/v1/namespaces/demo/services/web" {
			_, _ = w.Write([]byte(`{"kind": "Service", "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.6"}]}}}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	k := remoteKubeconfig{Server: srv.URL, Insecure: true, BearerToken: "x"}
	obj, err := getRemote(context.Background(), k, scribev1.ObjectIdentity{APIVersion: "v1", Kind: "Service", Namespace: "demo", Name: "web"})
	if err != nil || addressOf(obj) != "10.0.0.6" || gotPath != "/api/v1/namespaces/demo/services/web" {
		t.Fatalf("core Service: %v %v (path %s)", obj, err, gotPath)
	}
	if obj, err := getRemote(context.Background(), k, scribev1.ObjectIdentity{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway", Namespace: "demo", Name: "none"}); err != nil || obj != nil {
		t.Fatalf("a missing object: %v %v", obj, err)
	}
	if _, err := getRemote(context.Background(), k, scribev1.ObjectIdentity{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Namespace: "demo", Name: "huge"}); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("an answer over the bound: %v", err)
	}
}
