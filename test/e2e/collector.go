package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The hub's OpenTelemetry collector: the real collector (hack/build-otelcol.sh)
// run on the host as a process of the loop, where the app cluster's pods
// reach it, on the host's end of the app node's veth. Its otlp receiver
// keeps the request's metadata (include_metadata), the attributes processor
// copies the tenant header a target's collector sends (X-Scope-OrgID) into
// the span, data point or log attribute TenantHeaderAttribute, as a hub's
// collector routing tenants reads it, and the file exporter writes what
// arrives, one OTLP/JSON line per batch, for the test to read.

// TenantHeaderAttribute is the attribute the hub's collector copies the
// X-Scope-OrgID header of a request into.
const TenantHeaderAttribute = "scribe.tenant.header"

// HubCollector is the hub's collector StartHubCollector runs.
type HubCollector struct {
	// Endpoint is its OTLP/gRPC address as the app cluster's pods reach
	// it: an Experiment's spec.observability.endpoint.
	Endpoint string
	out      string
}

// StartHubCollector runs the collector bin as the hub's collector beside
// the app cluster; t.Cleanup stops it (the loop's stop does too).
func (a *AppCluster) StartHubCollector(t testing.TB, bin string) *HubCollector {
	t.Helper()
	port, err := a.s.port()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(appLinkHost, port)
	h := &HubCollector{Endpoint: "http://" + addr, out: filepath.Join(a.s.Dir, "hub-collector.jsonl")}
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc: {endpoint: %q, include_metadata: true}
processors:
  attributes/tenant:
    actions:
      - {key: %s, from_context: metadata.x-scope-orgid, action: upsert}
exporters:
  file: {path: %q}
service:
  telemetry:
    metrics: {level: none}
  pipelines:
    traces: {receivers: [otlp], processors: [attributes/tenant], exporters: [file]}
    metrics: {receivers: [otlp], processors: [attributes/tenant], exporters: [file]}
    logs: {receivers: [otlp], processors: [attributes/tenant], exporters: [file]}
`, addr, TenantHeaderAttribute, h.out)
	path := filepath.Join(a.s.Dir, "hub-collector.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const name = "otelcol-hub"
	if err := a.s.run(name, bin, nil, "--config="+path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.s.stopNamed(name) })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hub's collector does not listen on %s after 30s; its log:\n%s", addr, a.s.Logs(name, 30))
		}
	}
	a.s.logf("the hub's collector receives OTLP/gRPC at %s", h.Endpoint)
	return h
}

// ReceivedSpan is a span as the hub's collector wrote it: its name, its
// resource's and its own string attributes.
type ReceivedSpan struct {
	Name     string
	Resource map[string]string
	Attrs    map[string]string
}

// Spans are the spans the hub's collector has written so far.
func (h *HubCollector) Spans() ([]ReceivedSpan, error) {
	b, err := os.ReadFile(h.out)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type attr struct {
		Key   string `json:"key"`
		Value struct {
			StringValue string `json:"stringValue"`
		} `json:"value"`
	}
	strs := func(as []attr) map[string]string {
		m := map[string]string{}
		for _, a := range as {
			m[a.Key] = a.Value.StringValue
		}
		return m
	}
	var spans []ReceivedSpan
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var line struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []attr `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []struct {
						Name       string `json:"name"`
						Attributes []attr `json:"attributes"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, fmt.Errorf("the hub collector's output %s: %w", h.out, err)
		}
		for _, rs := range line.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans = append(spans, ReceivedSpan{Name: s.Name, Resource: strs(rs.Resource.Attributes), Attrs: strs(s.Attributes)})
				}
			}
		}
	}
	return spans, sc.Err()
}

// SendSpan posts one span named name as OTLP/HTTP JSON to the collector at
// addr (host:port of its otlp receiver's http protocol), as a workload's
// SDK would.
func SendSpan(ctx context.Context, addr, name string) error {
	now := time.Now().UnixNano()
	body := fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"scribe-e2e"}}]},`+
		`"scopeSpans":[{"scope":{"name":"scribe-e2e"},"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",`+
		`"name":%q,"kind":1,"startTimeUnixNano":"%d","endTimeUnixNano":"%d"}]}]}]}`, name, now, now)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/traces", bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST http://%s/v1/traces: %s", addr, resp.Status)
	}
	return nil
}
