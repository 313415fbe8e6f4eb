// Command k6 stands in for grafana/k6 in the loop: k6 cannot be built
// here (its module is AGPL-licensed, which the project does not take in,
// and this machine pulls no docker.io image). It runs what the catalog's
// k6-http-loadgen script does, the way k6 runs it, and speaks k6's own
// interface:
//
//	k6 run --vus=N --duration=D --summary-export=FILE SCRIPT
//
// Every virtual user GETs $TARGET_URL in a loop for the duration and
// checks the answer is 2xx (the script's `http.get(__ENV.TARGET_URL)` and
// `check`); the script's `http_req_failed: ['rate<X']` threshold is
// applied. It writes the summary k6's --summary-export writes (its
// metrics http_reqs, http_req_failed, http_req_duration, iterations,
// checks, and root_group's checks) and exits 99 when a threshold is
// crossed, as k6 does. A script it cannot run as k6 would (no
// http.get(__ENV.TARGET_URL)) exits 107, k6's code for a script error.
package main

import (
	"context"
	"crypto/md5" //nolint:gosec // k6's ids are MD5 sums of paths
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// k6's exit codes (errext/exitcodes).
const (
	exitThresholdsFailed = 99
	exitScriptException  = 107
	exitInvalidConfig    = 104
)

var thresholdRE = regexp.MustCompile(`http_req_failed:\s*\[\s*['"]rate\s*<\s*([0-9.]+)['"]`)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "run" {
		_, _ = fmt.Fprintln(stderr, "usage: k6 run [--vus N] [--duration D] [--summary-export FILE] SCRIPT")
		return exitInvalidConfig
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	vus := fs.Int("vus", 1, "virtual users")
	duration := fs.Duration("duration", 10*time.Second, "test duration")
	export := fs.String("summary-export", "", "file to write the summary to")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 || *vus < 1 || *duration <= 0 {
		_, _ = fmt.Fprintln(stderr, "k6 run: want --vus ≥ 1, --duration > 0 and one script")
		return exitInvalidConfig
	}
	script, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "k6 run: %v\n", err)
		return exitScriptException
	}
	if !regexp.MustCompile(`http\.get\(\s*__ENV\.TARGET_URL\s*\)`).Match(script) {
		_, _ = fmt.Fprintln(stderr, "k6 run: this stand-in runs only scripts that GET __ENV.TARGET_URL")
		return exitScriptException
	}
	target := os.Getenv("TARGET_URL")
	if target == "" {
		_, _ = fmt.Fprintln(stderr, "k6 run: TARGET_URL is empty")
		return exitScriptException
	}
	maxRate := -1.0
	if m := thresholdRE.FindSubmatch(script); m != nil {
		if maxRate, err = strconv.ParseFloat(string(m[1]), 64); err != nil {
			_, _ = fmt.Fprintf(stderr, "k6 run: threshold %q: %v\n", m[1], err)
			return exitInvalidConfig
		}
	}
	res := load(context.Background(), target, *vus, *duration)
	failedRate := 0.0
	if res.requests > 0 {
		failedRate = float64(res.failed) / float64(res.requests)
	}
	crossed := maxRate >= 0 && failedRate >= maxRate
	_, _ = fmt.Fprintf(stdout, "     http_reqs......................: %d %.2f/s\n", res.requests, float64(res.requests)/res.elapsed.Seconds())
	_, _ = fmt.Fprintf(stdout, "     http_req_failed................: %.2f%% %d out of %d\n", 100*failedRate, res.failed, res.requests)
	_, _ = fmt.Fprintf(stdout, "     checks.........................: %d passed, %d failed\n", res.requests-res.failed, res.failed)
	if len(res.errors) > 0 {
		_, _ = fmt.Fprintf(stdout, "     errors.........................: %v\n", res.errors)
	}
	if *export != "" {
		if err := writeSummary(*export, res, failedRate, maxRate, crossed); err != nil {
			_, _ = fmt.Fprintf(stderr, "k6 run: summary: %v\n", err)
			return exitScriptException
		}
	}
	if crossed {
		_, _ = fmt.Fprintf(stderr, "thresholds on metrics 'http_req_failed' have been crossed (rate %.4f, want < %g)\n", failedRate, maxRate)
		return exitThresholdsFailed
	}
	return 0
}

// result is what the virtual users measured.
type result struct {
	requests, failed int
	durations        []time.Duration
	elapsed          time.Duration
	// errors counts the distinct transport errors seen.
	errors map[string]int
}

func load(ctx context.Context, target string, vus int, d time.Duration) result {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	client := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	res := result{errors: map[string]int{}}
	start := time.Now()
	var wg sync.WaitGroup
	for range vus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				ok, errText := get(ctx, client, target)
				if ctx.Err() != nil && !ok {
					return // cut by the end of the test, as k6 drops it
				}
				mu.Lock()
				res.requests++
				res.durations = append(res.durations, time.Since(t0))
				if !ok {
					res.failed++
					if errText != "" {
						res.errors[errText]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

func get(ctx context.Context, client *http.Client, target string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			return false, ue.Unwrap().Error()
		}
		return false, err.Error()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300, ""
}

// writeSummary writes k6's --summary-export document. For a rate metric,
// k6 counts as passes the samples that are true: for http_req_failed,
// the failed requests. A threshold's value is true when it was crossed.
func writeSummary(path string, r result, failedRate, maxRate float64, crossed bool) error {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	sort.Slice(r.durations, func(i, j int) bool { return r.durations[i] < r.durations[j] })
	pct := func(p float64) float64 {
		if len(r.durations) == 0 {
			return 0
		}
		return ms(r.durations[int(p*float64(len(r.durations)-1))])
	}
	var sum time.Duration
	for _, d := range r.durations {
		sum += d
	}
	avg := 0.0
	if len(r.durations) > 0 {
		avg = ms(sum) / float64(len(r.durations))
	}
	rate := float64(r.requests) / r.elapsed.Seconds()
	failed := map[string]any{"passes": r.failed, "fails": r.requests - r.failed, "value": failedRate}
	if maxRate >= 0 {
		failed["thresholds"] = map[string]bool{fmt.Sprintf("rate<%g", maxRate): crossed}
	}
	// k6 names a check by its path, and ids a group or check by the
	// MD5 of its path.
	const checkPath = "::status is 2xx"
	passed := r.requests - r.failed
	checkRate := 0.0
	if r.requests > 0 {
		checkRate = float64(passed) / float64(r.requests)
	}
	doc := map[string]any{
		"root_group": map[string]any{
			"name": "", "path": "", "id": fmt.Sprintf("%x", md5.Sum(nil)), "groups": map[string]any{},
			"checks": map[string]any{"status is 2xx": map[string]any{
				"name": "status is 2xx", "path": checkPath, "id": fmt.Sprintf("%x", md5.Sum([]byte(checkPath))),
				"passes": passed, "fails": r.failed,
			}},
		},
		"metrics": map[string]any{
			"http_reqs":       map[string]any{"count": r.requests, "rate": rate},
			"iterations":      map[string]any{"count": r.requests, "rate": rate},
			"http_req_failed": failed,
			"checks":          map[string]any{"passes": passed, "fails": r.failed, "value": checkRate},
			"http_req_duration": map[string]any{
				"avg": avg, "min": pct(0), "med": pct(0.5), "max": pct(1), "p(90)": pct(0.9), "p(95)": pct(0.95),
			},
		},
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
