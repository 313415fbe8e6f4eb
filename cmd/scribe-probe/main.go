// Command scribe-probe is the program of the catalog's validation workflow
// (catalog/workflows/gateway-validation): it sends the same GET requests to
// two base URLs, the Ingress's and the Gateway's, and exits non-zero when
// the share of requests whose answers differ (or fail, or are 5xx) is above
// the allowed rate. It is Scribe's image ghcr.io/scribe-gitops/scribe-probe:
// a static binary, so a workflow runs it without a language runtime.
//
// Configured by the environment, as the workflow template sets it:
//
//	EXPERIMENT      the Experiment's name, for the report line
//	INGRESS_URL     base URL of the first route
//	GATEWAY_URL     base URL of the second route
//	PATHS           comma-separated paths asked of both (default "/")
//	REQUESTS        requests per path (default 50)
//	MAX_ERROR_RATE  the largest share of differing requests that passes
//	                (default 0.01)
//	TIMEOUT         per-request timeout, a Go duration (default 5s)
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is the command: 0 when the comparison passes, 1 when it fails, 2 on
// bad configuration.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "version" || args[0] == "--version") {
		_, _ = fmt.Fprintln(stdout, "scribe-probe", version)
		return 0
	}
	if len(args) > 0 && args[0] != "compare" {
		_, _ = fmt.Fprintf(stderr, "scribe-probe: unknown command %q (known: compare, version)\n", args[0])
		return 2
	}
	cfg, err := configFrom(getenv)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "scribe-probe: %v\n", err)
		return 2
	}
	client := &http.Client{Timeout: cfg.Timeout}
	res := compareRoutes(ctx, cfg, func(ctx context.Context, url string) answer { return get(ctx, client, url) })
	_, _ = fmt.Fprintln(stdout, res.Report(cfg))
	for _, ex := range res.Examples {
		_, _ = fmt.Fprintln(stdout, "  "+ex)
	}
	if !res.Passed(cfg) {
		return 1
	}
	return 0
}

// get asks for url; a transport error is an answer with code 0.
func get(ctx context.Context, c *http.Client, url string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return answer{Err: err.Error()}
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{Err: err.Error()}
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return answer{Code: resp.StatusCode}
}
