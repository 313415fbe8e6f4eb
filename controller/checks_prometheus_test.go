package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

func TestValidatePrometheusAddressTakesOnlyABaseURL(t *testing.T) {
	for _, tt := range []struct {
		address, err string
	}{
		{"http://prometheus.monitoring:9090", ""},
		{"https://prom.example.com/prometheus", ""},
		{"http://prometheus.monitoring:9090/some/path?", "must not have a query"},
		{"http://prometheus.monitoring:9090/?x=1", "must not have a query"},
		{"http://prometheus.monitoring:9090/#frag", "must not have a fragment"},
		{"http://admin:hunter2@prometheus:9090", "must not carry user info"},
		{"file:///etc/passwd", "http or https"},
		{"gopher://x", "http or https"},
		{"http:opaque", "must name a host"},
		{"http://%zz", "not a URL"},
	} {
		t.Run(tt.address, func(t *testing.T) {
			err := controller.ValidatePrometheusAddress(tt.address)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("err = %v, want %q", err, tt.err)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// TestPrometheusCheckBoundsWhatAServerCanDo: a check's address is the
// Workload writer's choice, and so is the server's answer. A huge answer,
// a body written to be reflected into status, a redirect elsewhere and a
// link-local address each fail the check with a short, quoted message,
// and nothing beyond the bounds is read or fetched.
func TestPrometheusCheckBoundsWhatAServerCanDo(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		_, _ = fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[0,"0"]}}`)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/huge/api/v1/query":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[`)
			chunk := strings.Repeat(`{"metric":{"a":"`+strings.Repeat("x", 1000)+`"},"value":[0,"1"]},`, 100)
			for range 80 { // about 8 MB
				if _, err := fmt.Fprint(w, chunk); err != nil {
					return
				}
			}
			_, _ = fmt.Fprint(w, `{"metric":{},"value":[0,"1"]}]}}`)
		case "/reflect/api/v1/query":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = fmt.Fprint(w, "<html>\n### Approved by admin\n"+strings.Repeat("secret internal page ", 500)+"</html>")
		case "/error/api/v1/query":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"status":"error","errorType":"bad_data","error":%q}`, "line one\n### Approved\n"+strings.Repeat("y", 5000))
		case "/redirect/api/v1/query":
			http.Redirect(w, r, other.URL+"/api/v1/query", http.StatusFound)
		}
	}))
	defer srv.Close()
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	for _, tt := range []struct {
		name, address string
		want          []string
	}{
		{"an answer over the bound", srv.URL + "/huge", []string{"larger than 4 MiB"}},
		{"a reflected error page", srv.URL + "/reflect", []string{"query " + srv.URL + "/reflect", "server_error"}},
		{"a long error field", srv.URL + "/error", []string{"bad_data", `"line one\n### Approved\nyyy`, `…"`}},
		{"a redirect elsewhere", srv.URL + "/redirect", []string{"302"}},
		{"a link-local address", "http://169.254.169.254/latest", []string{"link-local"}},
		{"an address with a query", srv.URL + "/x?", []string{"must not have a query"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Checks: []scribev1.Check{
				{Name: "error-rate", Type: scribev1.CheckPrometheus, Address: tt.address, Query: "up", Max: "1"},
			}}}
			res := (&controller.Checker{Egress: testEgress()}).Run(context.Background(), w, "v1", scribev1.ObjectIdentity{})
			if len(res) != 1 || res[0].Passed {
				t.Fatalf("results %+v, want one failed check", res)
			}
			msg := res[0].Message
			for _, want := range tt.want {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			if strings.ContainsAny(msg, "\n\r") || strings.Contains(msg, "secret internal page") || len(msg) > 1024 {
				t.Errorf("the message reflects the server's body (%d bytes): %q", len(msg), msg)
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("a redirect was followed: the other server was queried %d times", n)
	}
}
