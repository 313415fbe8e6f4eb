package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	hostname := func() (string, error) { return "host-1", nil }
	def := config{port: 8080, version: version, pod: "host-1", ready: true}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr string
	}{
		{name: "defaults", want: def},
		{name: "the environment", env: map[string]string{
			"PORT": "9090", "VERSION": "v2", "POD_NAME": "web-v2-abc", "READY": "false",
			"STARTUP_DELAY": "5s", "ERROR_RATE": "0.3", "LATENCY": "20ms", "DRAIN_DELAY": "2s",
		}, want: config{port: 9090, version: "v2", pod: "web-v2-abc", ready: false, startupDelay: 5 * time.Second,
			errorRate: 0.3, latency: 20 * time.Millisecond, drainDelay: 2 * time.Second}},
		{name: "flags win over the environment",
			args: []string{"-port", "7070", "-version", "v3", "-error-rate", "1", "-ready=true"},
			env:  map[string]string{"PORT": "9090", "VERSION": "v2", "ERROR_RATE": "0.3", "READY": "false"},
			want: config{port: 7070, version: "v3", pod: "host-1", ready: true, errorRate: 1}},
		{name: "an error rate above 1", env: map[string]string{"ERROR_RATE": "1.5"}, wantErr: "error rate"},
		{name: "a negative error rate", args: []string{"-error-rate", "-0.1"}, wantErr: "error rate"},
		{name: "an error rate that is not a number", env: map[string]string{"ERROR_RATE": "NaN"}, wantErr: "error rate"},
		{name: "a port out of range", env: map[string]string{"PORT": "70000"}, wantErr: "port"},
		{name: "a port that is not a number", args: []string{"-port", "http"}, wantErr: "port"},
		{name: "READY that is not a boolean", env: map[string]string{"READY": "maybe"}, wantErr: "ready"},
		{name: "a bad startup delay", env: map[string]string{"STARTUP_DELAY": "5"}, wantErr: "startup delay"},
		{name: "a negative latency", args: []string{"-latency", "-1s"}, wantErr: "latency"},
		{name: "an empty version", args: []string{"-version", ""}, wantErr: "version"},
		{name: "stray arguments", args: []string{"serve"}, wantErr: "unexpected arguments"},
		{name: "http-echo's flags: -listen wins over -port, -text is the answer",
			args: []string{"-listen=:5678", "-port=9090", "-text=hello from demo-http"},
			want: config{port: 5678, version: version, pod: "host-1", ready: true, text: "hello from demo-http"}},
		{name: "a -listen that is no address", args: []string{"-listen=5678"}, wantErr: "listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig(tt.args, func(k string) string { return tt.env[k] }, hostname, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("config = %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("no pod name and no host name", func(t *testing.T) {
		_, err := parseConfig(nil, func(string) string { return "" }, func() (string, error) { return "", errors.New("no uts") }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "pod name") {
			t.Fatalf("err = %v, want a pod name error", err)
		}
	})
}

func TestFails(t *testing.T) {
	tests := []struct {
		rate  float64
		n     int
		fails int
	}{
		{rate: 0, n: 100, fails: 0},
		{rate: 0.3, n: 10, fails: 3},
		{rate: 0.3, n: 1000, fails: 300},
		{rate: 0.05, n: 100, fails: 5},
		{rate: 0.5, n: 7, fails: 3},
		{rate: 1, n: 50, fails: 50},
	}
	for _, tt := range tests {
		got := 0
		for i := 1; i <= tt.n; i++ {
			if fails(uint64(i), tt.rate) {
				got++
			}
		}
		if got != tt.fails {
			t.Errorf("rate %g over %d requests: %d failures, want %d", tt.rate, tt.n, got, tt.fails)
		}
	}
}

func TestRoot(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64
		requests int
		want500  int
	}{
		{name: "healthy", rate: 0, requests: 10, want500: 0},
		{name: "three in ten fail", rate: 0.3, requests: 10, want500: 3},
		{name: "every one fails", rate: 1, requests: 4, want500: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newApp(config{version: "v2", pod: "web-v2-abc", ready: true, errorRate: tt.rate}, time.Now)
			h := a.handler()
			got500 := 0
			for range tt.requests {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
				var body struct{ Version, Pod, Error string }
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
					t.Fatalf("body %q: %v", rec.Body, err)
				}
				if body.Version != "v2" || body.Pod != "web-v2-abc" {
					t.Errorf("body = %+v, want version v2 and pod web-v2-abc", body)
				}
				switch rec.Code {
				case http.StatusOK:
				case http.StatusInternalServerError:
					got500++
				default:
					t.Errorf("status %d", rec.Code)
				}
			}
			if got500 != tt.want500 {
				t.Errorf("%d of %d answered 500, want %d", got500, tt.requests, tt.want500)
			}
			metrics := scrape(t, h)
			if ok := tt.requests - tt.want500; ok > 0 && !strings.Contains(metrics, `demo_app_http_requests_total{code="200",version="v2"} `+strconv.Itoa(ok)) {
				t.Errorf("metrics lack %d requests answered 200:\n%s", ok, metrics)
			}
			if tt.want500 > 0 {
				for _, m := range []string{"demo_app_http_requests_total", "demo_app_http_errors_total"} {
					if !strings.Contains(metrics, m+`{code="500",version="v2"} `+strconv.Itoa(tt.want500)) {
						t.Errorf("metrics lack %s of %d answered 500:\n%s", m, tt.want500, metrics)
					}
				}
			} else if strings.Contains(metrics, "demo_app_http_errors_total{") {
				t.Errorf("metrics count errors where there were none:\n%s", metrics)
			}
		})
	}
}

func TestRootAnswersTheTextAsHTTPEchoDoes(t *testing.T) {
	h := newApp(config{version: "v1", pod: "p", ready: true, text: "hello from demo-http"}, time.Now).handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "hello from demo-http\n" || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Errorf("GET /: %d %q (%s), want 200 and the text", rec.Code, rec.Body, rec.Header().Get("Content-Type"))
	}
}

func TestNotFound(t *testing.T) {
	h := newApp(config{version: "v1", pod: "p", ready: true}, time.Now).handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nope", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", rec.Code)
	}
}

func TestProbes(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		ready     bool
		startup   time.Duration
		elapsed   time.Duration
		stopping  bool
		wantReady int
	}{
		{name: "ready at once", ready: true, wantReady: http.StatusOK},
		{name: "READY=false never passes", ready: false, elapsed: time.Hour, wantReady: http.StatusServiceUnavailable},
		{name: "still starting", ready: true, startup: 5 * time.Second, elapsed: 4 * time.Second, wantReady: http.StatusServiceUnavailable},
		{name: "started", ready: true, startup: 5 * time.Second, elapsed: 5 * time.Second, wantReady: http.StatusOK},
		{name: "stopping", ready: true, stopping: true, wantReady: http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := start
			a := newApp(config{version: "v1", pod: "p", ready: tt.ready, startupDelay: tt.startup}, func() time.Time { return now })
			now = start.Add(tt.elapsed)
			a.stopping.Store(tt.stopping)
			h := a.handler()
			for _, probe := range []struct {
				path string
				want int
			}{{"/healthz", http.StatusOK}, {"/readyz", tt.wantReady}} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, probe.path, nil))
				if rec.Code != probe.want {
					t.Errorf("GET %s: %d %q, want %d", probe.path, rec.Code, rec.Body, probe.want)
				}
			}
		})
	}
}

// TestGracefulShutdown: once ctx ends (SIGTERM), a request in flight still
// gets its answer, new connections are refused, and run returns nil.
func TestGracefulShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	cfg := config{version: "v1", pod: "p", ready: true, latency: 500 * time.Millisecond}
	go func() { done <- run(ctx, cfg, ln, log.New(io.Discard, "", 0)) }()

	type answer struct {
		code int
		err  error
	}
	inFlight := make(chan answer, 1)
	go func() {
		resp, err := http.Get(addr + "/")
		if err != nil {
			inFlight <- answer{err: err}
			return
		}
		_ = resp.Body.Close()
		inFlight <- answer{code: resp.StatusCode}
	}()
	time.Sleep(150 * time.Millisecond) // the request is in its latency
	cancel()
	if a := <-inFlight; a.err != nil || a.code != http.StatusOK {
		t.Errorf("the request in flight: %d, %v; want 200", a.code, a.err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatal("run did not return after the shutdown")
	}
	c := http.Client{Timeout: 2 * time.Second}
	if resp, err := c.Get(addr + "/healthz"); err == nil {
		_ = resp.Body.Close()
		t.Error("the server still answers after the shutdown")
	}
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	return rec.Body.String()
}
