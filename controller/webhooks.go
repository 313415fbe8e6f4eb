package controller

// The rollout's webhooks (spec.rollout.webhooks): the executor that asks
// a team's endpoints at a gate, as Flagger's webhooks are asked. What a
// gate does with the answers is DecideRollout's (rollout_webhooks.go).
// A webhook is written by whoever writes the Workload, so it is called
// like an analysis check's URL: http(s) only, with no user info, only
// where the platform's egress policy allows and never a redirect,
// credentials only from a Secret bound to its URL, the answer bounded in
// size and time and cut of every credential the request carried (the
// Secret's headers, the signature), and the server's words quoted. The
// webhooks of one gate together end within maxWebhookRoundTime: those
// left when it is up fail unsent.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

const (
	// defaultWebhookTimeout and maxWebhookTimeout bound a webhook call.
	defaultWebhookTimeout = 10 * time.Second
	maxWebhookTimeout     = 30 * time.Second
	// maxWebhookRoundTime bounds the webhooks of one gate together, so
	// that many slow webhooks hold a worker no longer than two at their
	// longest.
	maxWebhookRoundTime = 2 * maxWebhookTimeout
	// SignatureHeader carries the body's HMAC-SHA256 with the Secret's
	// hmac-key, as "sha256=<hex>".
	SignatureHeader = "X-Scribe-Signature"
)

// WebhookResult is one webhook's answer.
type WebhookResult struct {
	Name string
	// OK says it answered 2xx.
	OK      bool
	Message string
}

// WebhookRound is the answers of the webhooks of one gate.
type WebhookRound struct {
	Type    scribev1.WebhookType
	Results []WebhookResult
}

// WebhookPayload is the JSON body a webhook receives.
type WebhookPayload struct {
	Kind          string                   `json:"kind"`
	Name          string                   `json:"name"`
	Namespace     string                   `json:"namespace"`
	Webhook       string                   `json:"webhook"`
	Type          scribev1.WebhookType     `json:"type"`
	Phase         scribev1.WorkloadPhase   `json:"phase"`
	StableVersion string                   `json:"stableVersion,omitempty"`
	CanaryVersion string                   `json:"canaryVersion,omitempty"`
	Step          int32                    `json:"step"`
	Steps         int                      `json:"steps"`
	Traffic       []scribev1.VersionWeight `json:"traffic"`
	Revision      string                   `json:"revision,omitempty"`
	Metadata      map[string]string        `json:"metadata,omitempty"`
}

// webhooksOf are w's webhooks of typ, with their index in spec.
func webhooksOf(w *scribev1.Workload, typ scribev1.WebhookType) (hooks []scribev1.RolloutWebhook, index []int) {
	if w.Spec.Rollout == nil {
		return nil, nil
	}
	for i, h := range w.Spec.Rollout.Webhooks {
		if h.Type == typ {
			hooks, index = append(hooks, h), append(index, i)
		}
	}
	return hooks, index
}

// errWebhookRoundTime is why a gate's webhook round ends early.
var errWebhookRoundTime = errors.New("the gate's webhooks ran out of time")

// CallWebhooks asks w's webhooks of typ, one after the other, in the
// order of spec.rollout.webhooks, within the round's bound
// (WebhookRoundTimeout): a webhook not called when it is up fails unsent.
func (c *Checker) CallWebhooks(ctx context.Context, w *scribev1.Workload, typ scribev1.WebhookType) *WebhookRound {
	round := &WebhookRound{Type: typ}
	hooks, index := webhooksOf(w, typ)
	limit := c.WebhookRoundTimeout
	if limit <= 0 {
		limit = maxWebhookRoundTime
	}
	ctx, cancel := context.WithTimeoutCause(ctx, limit, errWebhookRoundTime)
	defer cancel()
	for k, h := range hooks {
		res := WebhookResult{Name: h.Name}
		field := fmt.Sprintf("spec.rollout.webhooks[%d]", index[k])
		if errors.Is(context.Cause(ctx), errWebhookRoundTime) {
			res.Message = fmt.Sprintf("%s: webhook %s not called: the %s webhooks before it took the gate's %s", field, h.Name, typ, limit)
			round.Results = append(round.Results, res)
			continue
		}
		msg, err := c.callWebhook(ctx, w, h, field)
		if err != nil {
			res.Message = err.Error()
		} else {
			res.OK, res.Message = true, msg
		}
		res.Message = boundMessage(res.Message)
		round.Results = append(round.Results, res)
	}
	return round
}

// callWebhook POSTs the payload to h.URL and says how it answered.
func (c *Checker) callWebhook(ctx context.Context, w *scribev1.Workload, h scribev1.RolloutWebhook, field string) (string, error) {
	if err := validateCheckURL(h.URL, true); err != nil {
		return "", fmt.Errorf("%s.url %w", field, err)
	}
	st := &w.Status
	body, err := json.Marshal(WebhookPayload{
		Kind: scribev1.WorkloadKind, Name: w.Name, Namespace: w.Namespace, Webhook: h.Name, Type: h.Type, Phase: st.Phase,
		StableVersion: st.StableVersion, CanaryVersion: st.CanaryVersion, Step: st.Step + 1, Steps: len(steps(w)),
		Traffic: st.Traffic, Revision: st.Revision, Metadata: h.Metadata,
	})
	if err != nil {
		return "", fmt.Errorf("%s: encode the body: %w", field, err)
	}
	where := h.URL
	if j := strings.IndexByte(where, '?'); j >= 0 {
		where = where[:j]
	}
	e, err := c.endpoint(ctx, w, probe{field: field, check: scribev1.Check{SecretRef: h.SecretRef}}, where)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("%s.url: %s", field, remoteText(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json")
	if key := e.secret["hmac-key"]; len(key) > 0 {
		mac := hmac.New(sha256.New, key)
		mac.Write(body)
		sum := hex.EncodeToString(mac.Sum(nil))
		req.Header.Set(SignatureHeader, "sha256="+sum)
		e.sent = append(e.sent, string(key), strings.TrimSpace(string(key)), sum)
	}
	timeout := defaultWebhookTimeout
	if h.Timeout != nil && h.Timeout.Duration > 0 {
		timeout = min(h.Timeout.Duration, maxWebhookTimeout)
	}
	answer, err := e.doWithin(ctx, req, timeout)
	if err != nil {
		return "", fmt.Errorf("webhook %s: POST %s: %w", h.Name, redactQuery(h.URL), err)
	}
	msg := "webhook " + h.Name + " answered 2xx"
	if len(answer) > 0 {
		msg += ": " + remoteText(string(answer))
	}
	return msg, nil
}
