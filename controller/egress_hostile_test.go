package controller_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/egress"
)

// Credentials of the echo tests: none may reach a message or a value.
const (
	echoToken  = "echo-token-8c1f2e"
	echoAPIKey = "echo-api-key-4b7d"
	echoHMAC   = "echo-hmac-key-19aa"
)

// echoServer answers every request with its headers as JSON: 2xx on
// /ok/..., 403 on /refuse/..., as a server that reflects what it gets.
func echoServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h := map[string]string{}
		for k := range r.Header {
			h[k] = r.Header.Get(k)
		}
		b, _ := json.Marshal(map[string]any{"headers": h, "value": 1})
		if strings.HasSuffix(r.URL.Path, "/signature") {
			b, _ = json.Marshal(map[string]string{"signature": r.Header.Get(controller.SignatureHeader)})
		}
		if strings.HasPrefix(r.URL.Path, "/refuse/") {
			w.WriteHeader(http.StatusForbidden)
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// credentialsIn names the credentials s shows.
func credentialsIn(s string, extra ...string) []string {
	var found []string
	for _, c := range append([]string{echoToken, echoAPIKey, echoHMAC}, extra...) {
		if strings.Contains(s, c) {
			found = append(found, c)
		}
	}
	return found
}

// A webhook's answer, 2xx or not, that echoes the request's
// Authorization, X-Api-Key or signature shows none of them in the round.
func TestWebhookAnswersThatEchoCredentialsAreRedacted(t *testing.T) {
	srv := echoServer(t)
	data := map[string]string{"token": echoToken, "header.X-Api-Key": echoAPIKey, "hmac-key": echoHMAC}
	wl := &scribev1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"},
		Spec: scribev1.WorkloadSpec{Rollout: &scribev1.Rollout{
			Steps: []scribev1.RolloutStep{{Weight: 100}},
			Webhooks: []scribev1.RolloutWebhook{
				{Name: "echo-2xx", Type: scribev1.WebhookConfirmPromotion, URL: srv.URL + "/ok/hook", SecretRef: &scribev1.LocalObjectReference{Name: "hook"}},
				{Name: "echo-403", Type: scribev1.WebhookConfirmPromotion, URL: srv.URL + "/refuse/hook", SecretRef: &scribev1.LocalObjectReference{Name: "hook-refused"}},
				{Name: "echo-signature", Type: scribev1.WebhookConfirmPromotion, URL: srv.URL + "/ok/signature", SecretRef: &scribev1.LocalObjectReference{Name: "hook"}},
			},
		}},
	}
	c := &controller.Checker{Egress: testEgress(), Secrets: secrets(
		secretFor("hook", srv.URL+"/ok", data),
		secretFor("hook-refused", srv.URL+"/refuse", data),
	)}
	round := c.CallWebhooks(context.Background(), wl, scribev1.WebhookConfirmPromotion)
	if len(round.Results) != 3 {
		t.Fatalf("results %+v, want three", round.Results)
	}
	for _, r := range round.Results {
		t.Logf("%s: %q", r.Name, r.Message)
		// The signature of the body sent, which the test cannot know
		// exactly, is 64 hex digits after sha256=.
		if found := credentialsIn(r.Message); len(found) > 0 || strings.Contains(r.Message, "sha256=") && !strings.Contains(r.Message, "sha256=[redacted]") {
			t.Errorf("%s: the message shows %v: %q", r.Name, found, r.Message)
		}
		if !strings.Contains(r.Message, "[redacted]") {
			t.Errorf("%s: %q, want the echoed credentials shown as [redacted]", r.Name, r.Message)
		}
	}
	if !round.Results[0].OK || round.Results[1].OK {
		t.Errorf("results %+v, want the 2xx webhook OK and the 403 one refused", round.Results)
	}
	// The whole signature header value the request carried is cut out.
	if r := round.Results[2]; !strings.Contains(r.Message, `{\"signature\":\"[redacted]\"}`) {
		t.Errorf("%s: %q, want the echoed signature shown as [redacted]", r.Name, r.Message)
	}
}

// A web check whose JSONPath selects an echoed header, and a Prometheus
// check whose server's error echoes it, show no credential in status.
func TestCheckAnswersThatEchoCredentialsAreRedacted(t *testing.T) {
	srv := echoServer(t)
	c := &controller.Checker{Egress: testEgress(), Secrets: secrets(
		secretFor("bearer", srv.URL, map[string]string{"token": echoToken, "header.X-Api-Key": echoAPIKey}),
	)}
	ref := &scribev1.LocalObjectReference{Name: "bearer"}
	for _, ch := range []scribev1.Check{
		{Name: "web-selects-authorization", Type: scribev1.CheckWeb, URL: srv.URL + "/ok/web", JSONPath: "{.headers.Authorization}", Max: "1", SecretRef: ref},
		{Name: "web-selects-api-key", Type: scribev1.CheckWeb, URL: srv.URL + "/ok/web", JSONPath: "{.headers.X-Api-Key}", Max: "1", SecretRef: ref},
		{Name: "web-refused", Type: scribev1.CheckWeb, URL: srv.URL + "/refuse/web", JSONPath: "{.value}", Max: "1", SecretRef: ref},
		{Name: "prometheus-refused", Type: scribev1.CheckPrometheus, Address: srv.URL + "/refuse", Query: "up", Max: "1", SecretRef: ref},
		{Name: "prometheus-not-prometheus", Type: scribev1.CheckPrometheus, Address: srv.URL + "/ok", Query: "up", Max: "1", SecretRef: ref},
	} {
		t.Run(ch.Name, func(t *testing.T) {
			w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
			w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Checks: []scribev1.Check{ch}}}
			res := c.Run(context.Background(), w, "v1", scribev1.ObjectIdentity{})
			if len(res) != 1 {
				t.Fatalf("results %+v", res)
			}
			t.Logf("message %q, value %q", res[0].Message, res[0].Value)
			if found := credentialsIn(res[0].Message + " " + res[0].Value); len(found) > 0 {
				t.Errorf("status shows %v: message %q, value %q", found, res[0].Message, res[0].Value)
			}
			if res[0].Passed {
				t.Errorf("%+v passed", res[0])
			}
		})
	}
}

// A tenant's URL never reaches what the platform does not allow: the
// metadata service and link-local addresses never, loopback only with
// the platform's allowance; the server is not asked.
func TestChecksAndWebhooksFollowThePlatformsEgressPolicy(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[0,"0.5"]}}`))
	}))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	cases := []struct {
		name    string
		policy  egress.Policy
		address string
		want    string
	}{
		{"loopback without the platform's allowance", egress.Policy{AllowPrivate: true}, srv.URL, "loopback"},
		{"loopback by another name", egress.Policy{}, "http://localhost" + port, "loopback"},
		{"loopback as IPv4-mapped IPv6", egress.Policy{}, "http://[::ffff:127.0.0.1]" + port, "loopback"},
		{"the metadata service", egress.Policy{AllowPrivate: true, AllowLoopback: true}, "http://169.254.169.254", "link-local"},
		{"the metadata service as NAT64", egress.Policy{AllowPrivate: true, AllowLoopback: true}, "http://[64:ff9b::a9fe:a9fe]", "link-local"},
		{"IPv6 link-local with a zone", egress.Policy{AllowPrivate: true, AllowLoopback: true}, "http://[fe80::1%25lo]" + port, "zone"},
		{"Alibaba's metadata service", egress.Policy{AllowPrivate: true, AllowLoopback: true}, "http://100.100.100.200", "metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := asked.Load()
			c := &controller.Checker{Egress: tc.policy, RoundTimeout: 5 * time.Second}
			w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
			w.Spec.Rollout = &scribev1.Rollout{
				Analysis: &scribev1.Analysis{Checks: []scribev1.Check{{Name: "prom", Type: scribev1.CheckPrometheus, Address: tc.address, Query: "up", Max: "1"}}},
				Webhooks: []scribev1.RolloutWebhook{{Name: "hook", Type: scribev1.WebhookPreRollout, URL: tc.address + "/hook"}},
			}
			res := c.Run(context.Background(), w, "v1", scribev1.ObjectIdentity{})
			if len(res) != 1 || res[0].Passed || !strings.Contains(res[0].Message, tc.want) {
				t.Errorf("check: %+v, want refused naming %q", res, tc.want)
			}
			round := c.CallWebhooks(context.Background(), w, scribev1.WebhookPreRollout)
			if len(round.Results) != 1 || round.Results[0].OK || !strings.Contains(round.Results[0].Message, tc.want) {
				t.Errorf("webhook: %+v, want refused naming %q", round.Results, tc.want)
			}
			if asked.Load() != before {
				t.Error("the server was asked")
			}
		})
	}
	// With the allowance, the same server answers.
	c := &controller.Checker{Egress: egress.Policy{AllowLoopback: true}}
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Checks: []scribev1.Check{{Name: "prom", Type: scribev1.CheckPrometheus, Address: srv.URL, Query: "up", Max: "1"}}}}
	if res := c.Run(context.Background(), w, "v1", scribev1.ObjectIdentity{}); len(res) != 1 || !res[0].Passed {
		t.Errorf("allowed loopback: %+v, want passed", res)
	}
}

// A webhook URL with user info (a token stored in the Workload for every
// reader) is refused, naming its field, and not called.
func TestWebhookURLWithUserInfoIsRefused(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { asked.Add(1) }))
	t.Cleanup(srv.Close)
	withUser := strings.Replace(srv.URL, "http://", "http://bot:s3cret-token@", 1) + "/hook"
	wl := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"},
		Spec: scribev1.WorkloadSpec{Rollout: &scribev1.Rollout{Webhooks: []scribev1.RolloutWebhook{
			{Name: "ok", Type: scribev1.WebhookPreRollout, URL: srv.URL + "/ok"},
			{Name: "token-in-url", Type: scribev1.WebhookPreRollout, URL: withUser},
		}}}}
	round := (&controller.Checker{Egress: testEgress()}).CallWebhooks(context.Background(), wl, scribev1.WebhookPreRollout)
	if len(round.Results) != 2 {
		t.Fatalf("results %+v", round.Results)
	}
	r := round.Results[1]
	if r.OK || !strings.Contains(r.Message, "spec.rollout.webhooks[1].url") || !strings.Contains(r.Message, "user info") || strings.Contains(r.Message, "s3cret-token") {
		t.Errorf("%+v, want refused naming spec.rollout.webhooks[1].url and user info, without the token", r)
	}
	if asked.Load() != 1 {
		t.Errorf("the server was asked %d times, want once (the webhook without user info)", asked.Load())
	}
}

// Eight slow webhooks would hold a worker for minutes: the webhooks of a
// gate end within the round's bound, and those left fail unsent. The
// first webhook answers only when its caller gives up; the bound (small
// here) ends the round, and the later webhooks are not called at all.
func TestAGatesWebhooksEndWithinTheRoundsBound(t *testing.T) {
	var mu sync.Mutex
	called := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// With the body read, the server notices the caller giving up.
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		called[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/slow" {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	hooks := []scribev1.RolloutWebhook{{Name: "slow", Type: scribev1.WebhookConfirmPromotion, URL: srv.URL + "/slow", Timeout: &metav1.Duration{Duration: 30 * time.Second}}}
	for _, n := range []string{"second", "third"} {
		hooks = append(hooks, scribev1.RolloutWebhook{Name: n, Type: scribev1.WebhookConfirmPromotion, URL: srv.URL + "/" + n})
	}
	wl := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"},
		Spec: scribev1.WorkloadSpec{Rollout: &scribev1.Rollout{Webhooks: hooks}}}
	c := &controller.Checker{Egress: testEgress(), WebhookRoundTimeout: 300 * time.Millisecond}
	round := c.CallWebhooks(context.Background(), wl, scribev1.WebhookConfirmPromotion)
	if len(round.Results) != 3 {
		t.Fatalf("results %+v, want three", round.Results)
	}
	if r := round.Results[0]; r.OK || !strings.Contains(r.Message, "round's time is up") {
		t.Errorf("slow: %+v, want no answer within the round", r)
	}
	for i, r := range round.Results[1:] {
		if r.OK || !strings.Contains(r.Message, "not called") || !strings.Contains(r.Message, "spec.rollout.webhooks["+string(rune('1'+i))+"]") {
			t.Errorf("%s: %+v, want failed unsent, naming its field", r.Name, r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if called["/second"] != 0 || called["/third"] != 0 {
		t.Errorf("calls %v: the webhooks after the round's bound were called", called)
	}
}

// A provider's own key headers (Datadog's DD-API-KEY and
// DD-APPLICATION-KEY, from the check's Secret but not as header.*) echoed
// back by the server show in no message either: every header value a
// request carries is cut out of its answer.
func TestProviderKeyHeadersEchoedBackAreRedacted(t *testing.T) {
	const apiKey, appKey = "dd-api-key-77aa55", "dd-app-key-99bb33"
	srv := echoServer(t)
	c := &controller.Checker{Egress: testEgress(), Secrets: secrets(
		secretFor("datadog", srv.URL, map[string]string{"api-key": apiKey, "app-key": appKey}),
	)}
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Checks: []scribev1.Check{{
		Name: "datadog-refused", Type: scribev1.CheckDatadog, Address: srv.URL + "/refuse", Query: "avg:errors{*}", Max: "1",
		SecretRef: &scribev1.LocalObjectReference{Name: "datadog"},
	}}}}
	res := c.Run(context.Background(), w, "v1", scribev1.ObjectIdentity{})
	if len(res) != 1 || res[0].Passed {
		t.Fatalf("results %+v, want one failed", res)
	}
	if found := credentialsIn(res[0].Message+" "+res[0].Value, apiKey, appKey); len(found) > 0 {
		t.Errorf("status shows %v: %q", found, res[0].Message)
	}
	if !strings.Contains(res[0].Message, "403") {
		t.Errorf("message %q, want the server's 403 (the echo reached the check)", res[0].Message)
	}
}
