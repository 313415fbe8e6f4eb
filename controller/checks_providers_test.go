package controller_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// Credentials the fakes accept; none may show in a check's message.
const (
	ddAPIKey   = "dd-api-7f3e"
	ddAppKey   = "dd-app-91c2"
	nrKey      = "NRAK-0d1e"
	webToken   = "web-token-5a5a"
	webOrgID   = "team-a"
	webUser    = "reader"
	webPasswrd = "pw-77e1"
)

// datadogFake answers GET /api/v1/query as Datadog's metrics query API
// does: the keys in the DD-API-KEY and DD-APPLICATION-KEY headers, a
// series per group, each with a pointlist of [ms, value|null].
func datadogFake(t *testing.T, windows *atomic.Int64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/api/v1/query" || r.Method != http.MethodGet {
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprint(w, `{"errors":["Not found"]}`)
			return
		}
		if r.Header.Get("DD-API-KEY") != ddAPIKey || r.Header.Get("DD-APPLICATION-KEY") != ddAppKey {
			w.WriteHeader(http.StatusForbidden)
			_, _ = fmt.Fprint(w, `{"errors":["Forbidden"]}`)
			return
		}
		from, _ := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64)
		to, _ := strconv.ParseInt(r.URL.Query().Get("to"), 10, 64)
		windows.Store(to - from)
		q := r.URL.Query().Get("query")
		switch {
		case strings.Contains(q, "version:v1"):
			_, _ = fmt.Fprintf(w, `{"status":"ok","res_type":"time_series","query":%q,"series":[{"metric":"trace.http.request.errors","pointlist":[[%d000,0.2],[%d000,0.01],[%d000,null]]}]}`, q, from, to-10, to)
		case strings.Contains(q, "syntax"):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprint(w, `{"status":"error","error":"Error parsing query: \n unable to parse syntax"}`)
		default:
			_, _ = fmt.Fprintf(w, `{"status":"ok","res_type":"time_series","query":%q,"series":[]}`, q)
		}
	}))
}

// nerdGraphFake answers NerdGraph's POST /graphql with an NRQL query's
// rows, the key in the API-Key header; errors come back with status 200,
// as NerdGraph sends them.
func nerdGraphFake(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost || r.Header.Get("API-Key") != nrKey {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = fmt.Fprint(w, `{"errors":[{"message":"Invalid API key"}]}`)
			return
		}
		var req struct {
			Query     string `json:"query"`
			Variables struct {
				AccountID int64  `json:"accountId"`
				NRQL      string `json:"nrql"`
			} `json:"variables"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.Contains(req.Query, "nrql(query: $nrql)") || req.Variables.AccountID != 1234567 {
			_, _ = fmt.Fprint(w, `{"data":null,"errors":[{"message":"bad request"}]}`)
			return
		}
		switch {
		case strings.Contains(req.Variables.NRQL, "'v1'"):
			_, _ = fmt.Fprint(w, `{"data":{"actor":{"account":{"nrql":{"results":[{"percentage":1.5}]}}}}}`)
		case strings.Contains(req.Variables.NRQL, "FACET"):
			_, _ = fmt.Fprint(w, `{"data":{"actor":{"account":{"nrql":{"results":[{"count":120,"errors":3}]}}}}}`)
		case strings.Contains(req.Variables.NRQL, "SYNTAX"):
			_, _ = fmt.Fprint(w, `{"data":{"actor":{"account":{"nrql":null}}},"errors":[{"message":"NRQL Syntax error: \n### unexpected token"}]}`)
		default:
			_, _ = fmt.Fprint(w, `{"data":{"actor":{"account":{"nrql":{"results":[]}}}}}`)
		}
	}))
}

// webHandler answers GET /rate?version=X with JSON, for the bearer token
// and the X-Scope-OrgID header or for basic auth.
func webHandler(w http.ResponseWriter, r *http.Request) {
	user, pass, basic := r.BasicAuth()
	bearer := r.Header.Get("Authorization") == "Bearer "+webToken && r.Header.Get("X-Scope-OrgID") == webOrgID
	if !bearer && (!basic || user != webUser || pass != webPasswrd) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Query().Get("version") {
	case "v1":
		_, _ = fmt.Fprint(w, `{"data":{"errorRate":0.01,"label":"low"}}`)
	case "v2":
		_, _ = fmt.Fprint(w, `{"data":{"errorRate":"0.3","label":"high"}}`)
	default:
		_, _ = fmt.Fprint(w, `{"data":{}}`)
	}
}

// secrets serves Secrets as the controller's Resolver does: only a Secret
// bound to the URL (controller.CheckBound).
func secrets(list ...*corev1.Secret) func(context.Context, string, string, string, string) (map[string][]byte, error) {
	return func(_ context.Context, ns, name, url, field string) (map[string][]byte, error) {
		for _, s := range list {
			if s.Namespace == ns && s.Name == name {
				if err := controller.CheckBound(s, url, field); err != nil {
					return nil, err
				}
				return s.Data, nil
			}
		}
		return nil, fmt.Errorf("secret %s/%s not found", ns, name)
	}
}

func secretFor(name, boundTo string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Annotations: map[string]string{scribev1.AllowedURLsAnnotation: boundTo}}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// TestProviderChecksSpeakEachProvidersWireFormat: web, Datadog and New
// Relic checks send the query and the Secret's credentials the way each
// provider takes them, read the value from each one's answer, and report
// the value, the condition and the provider; no value is inconclusive;
// a Secret not bound to the check's URL is never sent; no credential
// reaches a message.
func TestProviderChecksSpeakEachProvidersWireFormat(t *testing.T) {
	var window atomic.Int64
	dd, nr, web := datadogFake(t, &window), nerdGraphFake(t), httptest.NewServer(http.HandlerFunc(webHandler))
	defer dd.Close()
	defer nr.Close()
	defer web.Close()
	var webHits atomic.Int64
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { webHits.Add(1); webHandler(w, r) }))
	defer counted.Close()
	c := &controller.Checker{Egress: testEgress(), Secrets: secrets(
		secretFor("datadog", dd.URL, map[string]string{"api-key": ddAPIKey, "app-key": ddAppKey}),
		secretFor("datadog-no-app", dd.URL, map[string]string{"api-key": ddAPIKey}),
		secretFor("newrelic", nr.URL, map[string]string{"personal-api-key": nrKey}),
		secretFor("web", web.URL+"/", map[string]string{"token": webToken, "header.X-Scope-OrgID": webOrgID}),
		secretFor("web-basic", web.URL+"/", map[string]string{"username": webUser, "password": webPasswrd}),
		secretFor("web-elsewhere", "https://metrics.example.com/", map[string]string{"token": webToken}),
	)}
	five := &metav1.Duration{Duration: 5 * time.Minute}
	ten := &metav1.Duration{Duration: 10 * time.Minute}
	ref := func(n string) *scribev1.LocalObjectReference { return &scribev1.LocalObjectReference{Name: n} }
	for _, tt := range []struct {
		name    string
		check   scribev1.Check
		version string
		// want
		passed, inconclusive bool
		value, condition     string
		message              []string
	}{
		{name: "web: the JSONPath's value, with the bearer token and a header from the Secret",
			check:   scribev1.Check{Type: scribev1.CheckWeb, URL: web.URL + "/rate?version={{version}}", JSONPath: "{.data.errorRate}", Max: "0.05", SecretRef: ref("web")},
			version: "v1", passed: true, value: "0.01", condition: "<= 0.05", message: []string{"{.data.errorRate} of " + web.URL + "/rate?…", "= 0.01"}},
		{name: "web: a numeric string counts, basic auth from the Secret",
			check:   scribev1.Check{Type: scribev1.CheckWeb, URL: web.URL + "/rate?version={{version}}", JSONPath: "{.data.errorRate}", Max: "0.05", SecretRef: ref("web-basic")},
			version: "v2", value: "0.3", condition: "<= 0.05", message: []string{"= 0.3, above 0.05"}},
		{name: "web: a path that selects nothing is inconclusive",
			check:   scribev1.Check{Type: scribev1.CheckWeb, URL: web.URL + "/rate?version={{version}}", JSONPath: "{.data.errorRate}", Max: "0.05", SecretRef: ref("web")},
			version: "v9", inconclusive: true, condition: "<= 0.05", message: []string{"returned no sample"}},
		{name: "web: a value that is not a number fails, naming the path",
			check:   scribev1.Check{Type: scribev1.CheckWeb, URL: web.URL + "/rate?version={{version}}", JSONPath: "{.data.label}", Max: "1", SecretRef: ref("web")},
			version: "v1", condition: "<= 1", message: []string{`jsonPath "{.data.label}" selects "low", not a number`}},
		{name: "web: a Secret bound to another URL is not sent, naming the field and the annotation",
			check:   scribev1.Check{Type: scribev1.CheckWeb, URL: counted.URL + "/rate?version={{version}}", JSONPath: "{.data.errorRate}", Max: "1", SecretRef: ref("web-elsewhere")},
			version: "v1", condition: "<= 1", message: []string{"spec.rollout.analysis.checks[0].secretRef", "may not be sent to", "scribe.dev/allowed-urls"}},
		{name: "datadog: the last non-null point of the first series over the window",
			check:   scribev1.Check{Type: scribev1.CheckDatadog, Address: dd.URL, Query: "avg:trace.http.request.errors{version:{{version}}}", Max: "0.05", Window: ten, SecretRef: ref("datadog")},
			version: "v1", passed: true, value: "0.01", condition: "<= 0.05", message: []string{"avg:trace.http.request.errors{version:v1} = 0.01"}},
		{name: "datadog: no series is inconclusive",
			check:   scribev1.Check{Type: scribev1.CheckDatadog, Address: dd.URL, Query: "avg:errors{version:{{version}}}", Max: "0.05", Window: five, SecretRef: ref("datadog")},
			version: "v2", inconclusive: true, condition: "<= 0.05", message: []string{"returned no sample"}},
		{name: "datadog: the provider's error, quoted",
			check:   scribev1.Check{Type: scribev1.CheckDatadog, Address: dd.URL, Query: "syntax(", Max: "0.05", SecretRef: ref("datadog")},
			version: "v1", condition: "<= 0.05", message: []string{"400 Bad Request", `unable to parse syntax`}},
		{name: "datadog: a Secret without app-key fails, naming the keys",
			check:   scribev1.Check{Type: scribev1.CheckDatadog, Address: dd.URL, Query: "avg:errors{version:{{version}}}", Max: "0.05", SecretRef: ref("datadog-no-app")},
			version: "v1", condition: "<= 0.05", message: []string{"secretRef: secret datadog-no-app needs the keys api-key and app-key"}},
		{name: "newrelic: the first row's only field",
			check:   scribev1.Check{Type: scribev1.CheckNewRelic, Address: nr.URL, AccountID: "1234567", Query: "SELECT percentage(count(*), WHERE error IS true) FROM Transaction WHERE version = '{{version}}'", Max: "2", SecretRef: ref("newrelic")},
			version: "v1", passed: true, value: "1.5", condition: "<= 2"},
		{name: "newrelic: jsonPath picks a field of a row with several",
			check:   scribev1.Check{Type: scribev1.CheckNewRelic, Address: nr.URL, AccountID: "1234567", Query: "SELECT count(*), filter(count(*), WHERE error) AS errors FROM Transaction FACET version", JSONPath: "{.errors}", Max: "2", SecretRef: ref("newrelic")},
			version: "v1", value: "3", condition: "<= 2", message: []string{"= 3, above 2"}},
		{name: "newrelic: a row with several fields and no jsonPath fails, saying so",
			check:   scribev1.Check{Type: scribev1.CheckNewRelic, Address: nr.URL, AccountID: "1234567", Query: "SELECT count(*) FROM Transaction FACET version", Max: "2", SecretRef: ref("newrelic")},
			version: "v1", condition: "<= 2", message: []string{"has 2 fields; jsonPath names the one to check"}},
		{name: "newrelic: no row is inconclusive",
			check:   scribev1.Check{Type: scribev1.CheckNewRelic, Address: nr.URL, AccountID: "1234567", Query: "SELECT count(*) FROM Transaction WHERE version = '{{version}}'", Max: "2", SecretRef: ref("newrelic")},
			version: "v2", inconclusive: true, condition: "<= 2"},
		{name: "newrelic: NerdGraph's error, quoted on one line",
			check:   scribev1.Check{Type: scribev1.CheckNewRelic, Address: nr.URL, AccountID: "1234567", Query: "SYNTAX", Max: "2", SecretRef: ref("newrelic")},
			version: "v1", condition: "<= 2", message: []string{`"NRQL Syntax error: \n### unexpected token"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.check.Name = "check"
			w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
			w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Checks: []scribev1.Check{tt.check}}}
			res := c.Run(context.Background(), w, tt.version, scribev1.ObjectIdentity{})
			if len(res) != 1 {
				t.Fatalf("results %+v", res)
			}
			r := res[0]
			if r.Passed != tt.passed || r.Inconclusive != tt.inconclusive || r.Value != tt.value || r.Condition != tt.condition || r.Provider != tt.check.Type {
				t.Fatalf("result %+v, want passed=%v inconclusive=%v value=%q condition=%q provider=%s", r, tt.passed, tt.inconclusive, tt.value, tt.condition, tt.check.Type)
			}
			for _, m := range tt.message {
				if !strings.Contains(r.Message, m) {
					t.Errorf("message %q lacks %q", r.Message, m)
				}
			}
			for _, cred := range []string{ddAPIKey, ddAppKey, nrKey, webToken, webPasswrd} {
				if strings.Contains(r.Message, cred) {
					t.Errorf("message %q shows a credential", r.Message)
				}
			}
			if strings.ContainsAny(r.Message, "\n\r") {
				t.Errorf("message %q spans lines", r.Message)
			}
		})
	}
	if got := window.Load(); got != 300 {
		t.Errorf("the last datadog query read %d s back, want the 5m window", got)
	}
	if n := webHits.Load(); n != 0 {
		t.Errorf("a Secret bound elsewhere: the server was contacted %d times", n)
	}
}

// TestProviderChecksTrustTheSecretsCA: a provider with a private CA is
// reached with the Secret's ca.crt (or insecureSkipVerify), and refused
// without it.
func TestProviderChecksTrustTheSecretsCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[0,"0.5"]}}`)
	}))
	defer srv.Close()
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	c := &controller.Checker{HTTP: controller.NewAnalysisHTTPClient(testEgress()), Secrets: secrets(
		secretFor("with-ca", srv.URL, map[string]string{"ca.crt": ca}),
		secretFor("no-pem", srv.URL, map[string]string{"ca.crt": "not a certificate"}),
	)}
	for _, tt := range []struct {
		name   string
		secret string
		skip   bool
		passed bool
		want   string
	}{
		{name: "the Secret's ca.crt", secret: "with-ca", passed: true},
		{name: "insecureSkipVerify", skip: true, passed: true},
		{name: "neither: the certificate is refused", want: "certificate"},
		{name: "a ca.crt that is no PEM", secret: "no-pem", want: "ca.crt holds no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ch := scribev1.Check{Name: "tls", Type: scribev1.CheckPrometheus, Address: srv.URL, Query: "up", Max: "1", InsecureSkipVerify: tt.skip}
			if tt.secret != "" {
				ch.SecretRef = &scribev1.LocalObjectReference{Name: tt.secret}
			}
			w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
			w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Checks: []scribev1.Check{ch}}}
			res := c.Run(context.Background(), w, "v1", scribev1.ObjectIdentity{})
			if len(res) != 1 || res[0].Passed != tt.passed || !strings.Contains(res[0].Message, tt.want) {
				t.Fatalf("results %+v, want passed=%v and %q", res, tt.passed, tt.want)
			}
		})
	}
}

// TestAnAnalysisRoundEndsWithinItsTime: however many checks a Workload
// has, a round ends once its time is up; the checks left are not sent and
// fail saying why.
func TestAnAnalysisRoundEndsWithinItsTime(t *testing.T) {
	var hits atomic.Int64
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	var checks []scribev1.Check
	for i := range 5 {
		checks = append(checks, scribev1.Check{Name: fmt.Sprintf("slow-%d", i), Type: scribev1.CheckWeb, URL: slow.URL + "/x", JSONPath: "{.v}", Max: "1"})
	}
	w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Checks: checks}}
	res := (&controller.Checker{Egress: testEgress(), RoundTimeout: 200 * time.Millisecond}).Run(context.Background(), w, "v1", scribev1.ObjectIdentity{})
	if len(res) != 5 {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.Passed || r.Inconclusive || !strings.Contains(r.Message, "the round's time is up") {
			t.Errorf("%s: %+v, want a failure saying the round's time is up", r.Name, r)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the server got %d requests, want 1: the checks after the round's end are not sent", n)
	}
}
