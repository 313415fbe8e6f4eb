package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// benchProfiles is where a benchmark of the controller process keeps the
// process's profiles: SCRIBE_BENCH_PROFILE names a folder, and the
// process is started with --pprof-bind-address. The CPU profile covers
// SCRIBE_BENCH_PROFILE_SECONDS (10 by default) from the burst's start; the
// heap profile (in use and allocated) is taken when every CR is
// committed. The API server's CPU profile (its /debug/pprof, read with
// the benchmark's admin credentials) covers the same seconds. Read them
// with `go tool pprof`.
type benchProfiles struct {
	dir, addr string
	seconds   int
	cpu       chan error
}

// newBenchProfiles returns nil when SCRIBE_BENCH_PROFILE is unset.
func newBenchProfiles(b *testing.B) *benchProfiles {
	dir := os.Getenv("SCRIBE_BENCH_PROFILE")
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	seconds := 10
	if v, err := strconv.Atoi(os.Getenv("SCRIBE_BENCH_PROFILE_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	return &benchProfiles{dir: dir, addr: freePort(b), seconds: seconds}
}

// args are the controller's flags that serve the profiles.
func (p *benchProfiles) args() []string {
	if p == nil {
		return nil
	}
	return []string{"--pprof-bind-address", p.addr}
}

// startCPU starts the CPU profiles of the controller and of the API
// server cfg reaches in the background.
func (p *benchProfiles) startCPU(cfg *rest.Config) {
	if p == nil {
		return
	}
	p.cpu = make(chan error, 2)
	timeout := time.Duration(p.seconds+30) * time.Second
	query := fmt.Sprintf("profile?seconds=%d", p.seconds)
	go func() {
		p.cpu <- p.saveFrom(&http.Client{Timeout: timeout}, "http://"+p.addr, query, "cpu.pprof")
	}()
	go func() {
		c, err := rest.HTTPClientFor(cfg)
		if err != nil {
			p.cpu <- err
			return
		}
		c.Timeout = timeout
		p.cpu <- p.saveFrom(c, cfg.Host, query, "apiserver-cpu.pprof")
	}()
}

// finish takes the heap profile and waits for the CPU profile.
func (p *benchProfiles) finish(b *testing.B) {
	if p == nil {
		return
	}
	if err := p.saveFrom(&http.Client{Timeout: 30 * time.Second}, "http://"+p.addr, "heap", "heap.pprof"); err != nil {
		b.Error(err)
	}
	for range 2 {
		if err := <-p.cpu; err != nil {
			b.Error(err)
		}
	}
	b.Logf("the profiles are in %s (cpu.pprof and apiserver-cpu.pprof: the burst's first %d s; heap.pprof: the controller's, at the end)", p.dir, p.seconds)
}

// saveFrom writes what base's /debug/pprof/path serves through c to file.
func (p *benchProfiles) saveFrom(c *http.Client, base, path, file string) error {
	resp, err := c.Get(strings.TrimSuffix(base, "/") + "/debug/pprof/" + path)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: status %d", path, resp.StatusCode)
	}
	f, err := os.Create(filepath.Join(p.dir, file))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("profile %s: %w", path, err)
	}
	return f.Close()
}
