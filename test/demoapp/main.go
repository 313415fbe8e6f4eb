// Command demoapp is the HTTP server the demo and the end-to-end tests roll
// out: each version of a Workload runs it with its own VERSION, and the
// knobs below make a version fail the way a rollout must notice. It is
// not shipped to users. Its image (make demo-app-image) is a static binary
// on a root from scratch, run as 65532.
//
//	GET /         200 {"version": ..., "pod": ...}, or 500 for ERROR_RATE of them
//	GET /healthz  200 while the process runs (liveness)
//	GET /readyz   200 once STARTUP_DELAY has passed, unless READY=false; 503 once stopping
//	GET /metrics  Prometheus: demo_app_http_requests_total and
//	              demo_app_http_errors_total by version and code
//
// Configuration, each a flag or its environment variable (the flag wins):
//
//	-port PORT                   8080
//	-version VERSION             the version built in (-ldflags -X main.version), else dev
//	-pod POD_NAME                the host name (a pod's name, unless the downward API says it)
//	-ready READY                 true; false never passes readiness (rollback tests)
//	-startup-delay STARTUP_DELAY 0s; readiness fails until it has passed
//	-error-rate ERROR_RATE       0; the share of GET / answered 500, spread evenly (0.3: 3 of every 10)
//	-latency LATENCY             0s; added to every GET /
//	-drain-delay DRAIN_DELAY     0s; on SIGTERM, how long readiness fails before the server stops
//
// On SIGTERM (or SIGINT) it fails readiness, waits DRAIN_DELAY, then stops
// accepting connections and lets requests in flight finish (10 s at most).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// shutdownTimeout bounds how long requests in flight may take to finish.
const shutdownTimeout = 10 * time.Second

// config is the server's configuration.
type config struct {
	port         int
	version      string
	pod          string
	ready        bool
	startupDelay time.Duration
	errorRate    float64
	latency      time.Duration
	drainDelay   time.Duration
	// text, when set, is what GET / answers (as text), as hashicorp's
	// http-echo does: the demo app stands in for it in the loop.
	text string
}

func main() {
	logger := log.New(os.Stderr, "demo-app: ", log.LstdFlags|log.LUTC)
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Hostname, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		logger.Print(err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(cfg.port))
	if err != nil {
		logger.Print(err)
		os.Exit(1)
	}
	if err := run(ctx, cfg, ln, logger); err != nil {
		logger.Print(err)
		os.Exit(1)
	}
}

// parseConfig reads the flags, with the environment as their defaults.
func parseConfig(args []string, getenv func(string) string, hostname func() (string, error), stderr io.Writer) (config, error) {
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	pod := getenv("POD_NAME")
	if pod == "" {
		h, err := hostname()
		if err != nil {
			return config{}, fmt.Errorf("pod name: no POD_NAME and no host name: %w", err)
		}
		pod = h
	}
	fl := flag.NewFlagSet("demo-app", flag.ContinueOnError)
	fl.SetOutput(stderr)
	port := fl.String("port", env("PORT", "8080"), "the port to listen on (env PORT)")
	ver := fl.String("version", env("VERSION", version), "the version GET / answers and the metrics carry (env VERSION)")
	podName := fl.String("pod", pod, "the pod name GET / answers (env POD_NAME)")
	ready := fl.String("ready", env("READY", "true"), "false: readiness never passes (env READY)")
	startup := fl.String("startup-delay", env("STARTUP_DELAY", "0s"), "readiness fails until this has passed since the start (env STARTUP_DELAY)")
	rate := fl.String("error-rate", env("ERROR_RATE", "0"), "the share of GET / answered 500, in [0, 1] (env ERROR_RATE)")
	latency := fl.String("latency", env("LATENCY", "0s"), "added to every GET / (env LATENCY)")
	drain := fl.String("drain-delay", env("DRAIN_DELAY", "0s"), "on SIGTERM, how long readiness fails before the server stops (env DRAIN_DELAY)")
	// http-echo's flags, so the demo app can stand in for it.
	listen := fl.String("listen", "", `the address to listen on, as ":8080" (http-echo's flag); wins over -port`)
	text := fl.String("text", env("TEXT", ""), "GET / answers this text instead of JSON (http-echo's flag; env TEXT)")
	if err := fl.Parse(args); err != nil {
		return config{}, err
	}
	if fl.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	cfg := config{version: *ver, pod: *podName, text: *text}
	var err error
	if *listen != "" {
		_, p, splitErr := net.SplitHostPort(*listen)
		if splitErr != nil {
			return config{}, fmt.Errorf("listen %q: want an address such as :8080", *listen)
		}
		*port = p
	}
	if cfg.port, err = strconv.Atoi(*port); err != nil || cfg.port < 0 || cfg.port > 65535 {
		return config{}, fmt.Errorf("port %q: want a number from 0 to 65535", *port)
	}
	if cfg.version == "" {
		return config{}, errors.New("version: empty")
	}
	if cfg.ready, err = strconv.ParseBool(*ready); err != nil {
		return config{}, fmt.Errorf("ready %q: want true or false", *ready)
	}
	for _, d := range []struct {
		name string
		in   string
		out  *time.Duration
	}{
		{"startup delay", *startup, &cfg.startupDelay},
		{"latency", *latency, &cfg.latency},
		{"drain delay", *drain, &cfg.drainDelay},
	} {
		if *d.out, err = time.ParseDuration(d.in); err != nil || *d.out < 0 {
			return config{}, fmt.Errorf("%s %q: want a duration such as 5s", d.name, d.in)
		}
	}
	cfg.errorRate, err = strconv.ParseFloat(*rate, 64)
	if err != nil || math.IsNaN(cfg.errorRate) || cfg.errorRate < 0 || cfg.errorRate > 1 {
		return config{}, fmt.Errorf("error rate %q: want a number from 0 to 1", *rate)
	}
	return cfg, nil
}

// app serves the demo's endpoints.
type app struct {
	cfg      config
	started  time.Time
	now      func() time.Time
	served   atomic.Uint64 // GET / so far
	stopping atomic.Bool
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	errs     *prometheus.CounterVec
}

func newApp(cfg config, now func() time.Time) *app {
	a := &app{
		cfg:      cfg,
		started:  now(),
		now:      now,
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "demo_app_http_requests_total",
			Help: "Requests to / by version and status code.",
		}, []string{"version", "code"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "demo_app_http_errors_total",
			Help: "Requests to / answered with a 5xx status, by version and status code.",
		}, []string{"version", "code"}),
	}
	a.registry.MustRegister(a.requests, a.errs)
	return a
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.root)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := a.ready(); !ok {
			writeText(w, http.StatusServiceUnavailable, why)
			return
		}
		writeText(w, http.StatusOK, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	return mux
}

// ready says whether the server takes traffic, and why not.
func (a *app) ready() (bool, string) {
	switch {
	case a.stopping.Load():
		return false, "stopping"
	case !a.cfg.ready:
		return false, "not ready: READY=false"
	case a.now().Sub(a.started) < a.cfg.startupDelay:
		return false, fmt.Sprintf("starting: ready %s after the start", a.cfg.startupDelay)
	}
	return true, ""
}

// fails reports whether the n-th GET / (from 1) fails: the failures are
// spread evenly, floor(n·rate) of the first n.
func fails(n uint64, rate float64) bool {
	if rate <= 0 || n == 0 {
		return false
	}
	const scale = 1_000_000
	ppm := uint64(math.Round(rate * scale))
	return n*ppm/scale > (n-1)*ppm/scale
}

func (a *app) root(w http.ResponseWriter, r *http.Request) {
	sleepCtx(r.Context(), a.cfg.latency)
	code := http.StatusOK
	if fails(a.served.Add(1), a.cfg.errorRate) {
		code = http.StatusInternalServerError
	}
	labels := prometheus.Labels{"version": a.cfg.version, "code": strconv.Itoa(code)}
	a.requests.With(labels).Inc()
	if code >= 500 {
		a.errs.With(labels).Inc()
	}
	if a.cfg.text != "" {
		writeText(w, code, a.cfg.text)
		return
	}
	body := struct {
		Version string `json:"version"`
		Pod     string `json:"pod"`
		Error   string `json:"error,omitempty"`
	}{Version: a.cfg.version, Pod: a.cfg.pod}
	if code != http.StatusOK {
		body.Error = "injected failure (ERROR_RATE)"
	}
	data, err := json.Marshal(body)
	if err != nil {
		writeText(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}

func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, text+"\n")
}

// run serves on ln until ctx ends, then fails readiness for the drain
// delay and shuts the server down, letting requests in flight finish.
func run(ctx context.Context, cfg config, ln net.Listener, logger *log.Logger) error {
	a := newApp(cfg, time.Now)
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Printf("version %s, pod %s, listening on %s (ready %t, startup delay %s, error rate %g, latency %s)",
		cfg.version, cfg.pod, ln.Addr(), cfg.ready, cfg.startupDelay, cfg.errorRate, cfg.latency)
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	a.stopping.Store(true)
	logger.Printf("stopping: readiness fails for %s, then the server drains", cfg.drainDelay)
	sleepCtx(context.Background(), cfg.drainDelay)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	logger.Print("stopped")
	return nil
}
