package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// config is what the comparison asks.
type config struct {
	Experiment   string
	IngressURL   string
	GatewayURL   string
	Paths        []string
	Requests     int
	MaxErrorRate float64
	Timeout      time.Duration
}

// configFrom reads the configuration from the environment; an error names
// the variable.
func configFrom(getenv func(string) string) (config, error) {
	cfg := config{
		Experiment: getenv("EXPERIMENT"),
		IngressURL: strings.TrimSuffix(getenv("INGRESS_URL"), "/"),
		GatewayURL: strings.TrimSuffix(getenv("GATEWAY_URL"), "/"),
		Requests:   50, MaxErrorRate: 0.01, Timeout: 5 * time.Second,
	}
	for name, u := range map[string]string{"INGRESS_URL": cfg.IngressURL, "GATEWAY_URL": cfg.GatewayURL} {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return config{}, fmt.Errorf("%s=%q: want an http:// or https:// URL", name, u)
		}
	}
	for _, p := range strings.Split(getenv("PATHS"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			if !strings.HasPrefix(p, "/") {
				return config{}, fmt.Errorf("PATHS: path %q does not start with /", p)
			}
			cfg.Paths = append(cfg.Paths, p)
		}
	}
	if len(cfg.Paths) == 0 {
		cfg.Paths = []string{"/"}
	}
	if v := getenv("REQUESTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return config{}, fmt.Errorf("REQUESTS=%q: want a positive integer", v)
		}
		cfg.Requests = n
	}
	if v := getenv("MAX_ERROR_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r > 1 {
			return config{}, fmt.Errorf("MAX_ERROR_RATE=%q: want a number from 0 to 1", v)
		}
		cfg.MaxErrorRate = r
	}
	if v := getenv("TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return config{}, fmt.Errorf("TIMEOUT=%q: want a positive Go duration", v)
		}
		cfg.Timeout = d
	}
	return cfg, nil
}

// answer is one response: its status code, or 0 and why the request failed.
type answer struct {
	Code int
	Err  string
}

func (a answer) String() string {
	if a.Code == 0 {
		return "error: " + a.Err
	}
	return strconv.Itoa(a.Code)
}

// differs decides one pair of answers: a request fails the comparison when
// either route did not answer, the codes differ, or either is a 5xx.
func differs(a, b answer) bool {
	return a.Code == 0 || b.Code == 0 || a.Code != b.Code || a.Code >= 500 || b.Code >= 500
}

// result is the comparison's outcome.
type result struct {
	Total, Mismatched int
	// Examples are the first differing pairs, for the log.
	Examples []string
}

// Rate is the share of requests that differ; 1 when none was made.
func (r result) Rate() float64 {
	if r.Total == 0 {
		return 1
	}
	return float64(r.Mismatched) / float64(r.Total)
}

// Passed: the share of differing requests is within the allowed rate.
func (r result) Passed(cfg config) bool { return r.Rate() <= cfg.MaxErrorRate }

// Report is the one line the workflow's log shows.
func (r result) Report(cfg config) string {
	verdict := "passed"
	if !r.Passed(cfg) {
		verdict = "failed"
	}
	return fmt.Sprintf("experiment %s: %d of %d requests differ between %s and %s (rate %.4f, max %g): %s",
		cfg.Experiment, r.Mismatched, r.Total, cfg.IngressURL, cfg.GatewayURL, r.Rate(), cfg.MaxErrorRate, verdict)
}

// maxExamples bounds the differing pairs a result keeps.
const maxExamples = 5

// compareRoutes asks both routes every path cfg.Requests times.
func compareRoutes(ctx context.Context, cfg config, get func(context.Context, string) answer) result {
	var r result
	for _, p := range cfg.Paths {
		for range cfg.Requests {
			if ctx.Err() != nil {
				return r
			}
			a, b := get(ctx, cfg.IngressURL+p), get(ctx, cfg.GatewayURL+p)
			r.Total++
			if differs(a, b) {
				r.Mismatched++
				if len(r.Examples) < maxExamples {
					r.Examples = append(r.Examples, fmt.Sprintf("%s: %s vs %s", p, a, b))
				}
			}
		}
	}
	return r
}
