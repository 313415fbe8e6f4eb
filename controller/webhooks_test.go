package controller_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// A webhook receives a POST of the rollout's state, signed with the
// Secret's hmac-key when the Secret is bound to its URL (never sent
// elsewhere); any answer but 2xx, an answer too large or too slow is a
// refusal whose message quotes the server and holds no credential.
func TestWebhooksArePostedSignedAndBounded(t *testing.T) {
	const key = "s3cr3t-hmac-key"
	var mu sync.Mutex
	got := map[string]*http.Request{}
	bodies := map[string][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.URL.Path], bodies[r.URL.Path] = r, body
		mu.Unlock()
		switch r.URL.Path {
		case "/approve":
			_, _ = w.Write([]byte(`{"approved":true}`))
		case "/refuse":
			http.Error(w, "not before 18:00\nsecond line", http.StatusForbidden)
		case "/huge":
			_, _ = w.Write([]byte(strings.Repeat("x", 5<<20)))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}))
	t.Cleanup(srv.Close)
	wl := &scribev1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"},
		Spec: scribev1.WorkloadSpec{Rollout: &scribev1.Rollout{
			Steps: []scribev1.RolloutStep{{Weight: 10}, {Weight: 100}},
			Webhooks: []scribev1.RolloutWebhook{
				{Name: "approve", Type: scribev1.WebhookConfirmPromotion, URL: srv.URL + "/approve", SecretRef: &scribev1.LocalObjectReference{Name: "signing"}, Metadata: map[string]string{"team": "payments"}},
				{Name: "refuse", Type: scribev1.WebhookConfirmPromotion, URL: srv.URL + "/refuse"},
				{Name: "huge", Type: scribev1.WebhookConfirmPromotion, URL: srv.URL + "/huge"},
				{Name: "slow", Type: scribev1.WebhookConfirmPromotion, URL: srv.URL + "/slow", Timeout: &metav1.Duration{Duration: 200 * time.Millisecond}},
				{Name: "elsewhere", Type: scribev1.WebhookConfirmPromotion, URL: srv.URL + "/elsewhere", SecretRef: &scribev1.LocalObjectReference{Name: "signing"}},
				{Name: "pre", Type: scribev1.WebhookPreRollout, URL: srv.URL + "/pre"},
			},
		}},
		Status: scribev1.WorkloadStatus{Phase: scribev1.WorkloadProgressing, StableVersion: "v1", CanaryVersion: "v2", Step: 0,
			Traffic: []scribev1.VersionWeight{{Version: "v1", Weight: 90}, {Version: "v2", Weight: 10}}},
	}
	c := &controller.Checker{HTTP: controller.NewAnalysisHTTPClient(testEgress()), Secrets: secrets(
		secretFor("signing", srv.URL+"/approve", map[string]string{"hmac-key": key}),
	)}
	round := c.CallWebhooks(context.Background(), wl, scribev1.WebhookConfirmPromotion)
	if round.Type != scribev1.WebhookConfirmPromotion || len(round.Results) != 5 {
		t.Fatalf("round %+v: want the five confirm-promotion webhooks, in order", round)
	}
	want := []struct {
		ok   bool
		text string
	}{
		{true, `{\"approved\":true}`},
		{false, `403 Forbidden: "not before 18:00\nsecond line\n"`},
		{false, "larger than 4 MiB"},
		{false, "no answer within 200ms"},
		{false, "may not be sent to"},
	}
	for i, r := range round.Results {
		if r.OK != want[i].ok || !strings.Contains(r.Message, want[i].text) {
			t.Errorf("%s: ok=%v %q; want ok=%v and %q", r.Name, r.OK, r.Message, want[i].ok, want[i].text)
		}
		if strings.Contains(r.Message, key) || strings.ContainsAny(r.Message, "\n\r") {
			t.Errorf("%s: the message holds the key or a line break: %q", r.Name, r.Message)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if _, asked := got["/pre"]; asked {
		t.Error("a pre-rollout webhook was asked at the confirm-promotion gate")
	}
	if _, sent := got["/elsewhere"]; sent {
		t.Error("a webhook whose Secret is not bound to its URL was called")
	}
	req, body := got["/approve"], bodies["/approve"]
	if req == nil {
		t.Fatal("the approve webhook was not called")
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	if sig := req.Header.Get(controller.SignatureHeader); sig != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
		t.Errorf("signature %q does not sign the body with the Secret's hmac-key", sig)
	}
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s with Content-Type %q, want a JSON POST", req.Method, req.Header.Get("Content-Type"))
	}
	var p controller.WebhookPayload
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Kind != "Workload" || p.Namespace != "shop" || p.Name != "checkout" || p.Webhook != "approve" || p.Type != scribev1.WebhookConfirmPromotion ||
		p.CanaryVersion != "v2" || p.StableVersion != "v1" || p.Step != 1 || p.Steps != 2 || len(p.Traffic) != 2 || p.Metadata["team"] != "payments" {
		t.Errorf("payload %+v", p)
	}
	if got["/refuse"].Header.Get(controller.SignatureHeader) != "" {
		t.Error("a webhook without a Secret was signed")
	}
}
