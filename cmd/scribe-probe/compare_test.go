package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDiffersFailsARequestUnlessBothRoutesGiveTheSameNon5xxAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b answer
		want bool
	}{
		{"same 200", answer{Code: 200}, answer{Code: 200}, false},
		{"same 404", answer{Code: 404}, answer{Code: 404}, false},
		{"codes differ", answer{Code: 200}, answer{Code: 404}, true},
		{"both 503", answer{Code: 503}, answer{Code: 503}, true},
		{"second route does not answer", answer{Code: 200}, answer{Err: "connection refused"}, true},
		{"first route does not answer", answer{Err: "no such host"}, answer{Code: 200}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := differs(tc.a, tc.b); got != tc.want {
				t.Fatalf("differs(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestConfigFromNamesTheVariableItRefuses(t *testing.T) {
	ok := map[string]string{"INGRESS_URL": "http://a", "GATEWAY_URL": "http://b"}
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string // in the error; "" for none
	}{
		{"defaults", nil, ""},
		{"gateway URL without scheme", map[string]string{"GATEWAY_URL": "b.example"}, "GATEWAY_URL"},
		{"zero requests", map[string]string{"REQUESTS": "0"}, "REQUESTS"},
		{"rate above one", map[string]string{"MAX_ERROR_RATE": "1.5"}, "MAX_ERROR_RATE"},
		{"relative path", map[string]string{"PATHS": "/api,health"}, "PATHS"},
		{"timeout not a duration", map[string]string{"TIMEOUT": "5"}, "TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range ok {
				env[k] = v
			}
			for k, v := range tc.set {
				env[k] = v
			}
			cfg, err := configFrom(func(k string) string { return env[k] })
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want == "" && (cfg.Requests != 50 || cfg.MaxErrorRate != 0.01 || len(cfg.Paths) != 1 || cfg.Paths[0] != "/"):
				t.Fatalf("defaults: %+v", cfg)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// TestRunComparesTwoRealServers: the command against HTTP servers, the way
// the workflow runs it: equal routes pass, a route that does not answer
// fails the run with the rate in its report.
func TestRunComparesTwoRealServers(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/api", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) })
	a, b := httptest.NewServer(mux), httptest.NewServer(mux)
	defer a.Close()
	defer b.Close()
	closed := httptest.NewServer(mux)
	closed.Close()
	for _, tc := range []struct {
		name     string
		gateway  string
		paths    string
		wantCode int
		wantOut  string
	}{
		{"same routes pass", b.URL, "/api", 0, "0 of 4 requests differ"},
		{"a missing path on both still agrees", b.URL, "/api,/missing", 0, "0 of 8 requests differ"},
		{"a route that does not answer fails", closed.URL, "/api", 1, "4 of 4 requests differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"EXPERIMENT": "e", "INGRESS_URL": a.URL, "GATEWAY_URL": tc.gateway, "PATHS": tc.paths, "REQUESTS": "4", "TIMEOUT": "2s"}
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"compare"}, func(k string) string { return env[k] }, &out, &errOut)
			if code != tc.wantCode || !strings.Contains(out.String(), tc.wantOut) {
				t.Fatalf("exit %d, output %q (stderr %q); want exit %d and %q", code, out.String(), errOut.String(), tc.wantCode, tc.wantOut)
			}
		})
	}
}
