//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO without a writer at a path Scribe opens for reading is refused at
// once, exit 2 naming it, never waited on: diff -d's owned files, -o's
// marker and --secret-dir's credential files.
func TestFIFOAtAPathScribeReadsIsRefusedWithoutBlocking(t *testing.T) {
	input := filepath.Join(fixtures, "hostile", "cli-git-ftp", "input.yaml")
	mkfifo := func(t *testing.T, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	for _, tc := range []struct {
		name string
		// setup makes the FIFO under dir and returns the arguments.
		setup func(t *testing.T, dir string) []string
		want  []string
	}{
		{"an owned file of diff -d", func(t *testing.T, dir string) []string {
			mkfifo(t, filepath.Join(dir, "checkout", "shop", "workload", "web", "service-web.yaml"))
			return []string{"diff", "-f", input, "-d", filepath.Join(dir, "checkout")}
		}, []string{"service-web.yaml", "not a regular file"}},
		{"the marker of -o", func(t *testing.T, dir string) []string {
			mkfifo(t, filepath.Join(dir, "out", ".scribe-output"))
			return []string{"render", "-f", input, "-o", filepath.Join(dir, "out")}
		}, []string{".scribe-output", "not a regular file"}},
		{"a file of --secret-dir", func(t *testing.T, dir string) []string {
			mkfifo(t, filepath.Join(dir, "secret", "password"))
			return []string{"publish", "-f", input, "--git", "http://127.0.0.1:1/org/r.git", "--secret-dir", filepath.Join(dir, "secret"), "--cache-dir", filepath.Join(dir, "cache")}
		}, []string{"--secret-dir", "password", "not a regular file"}},
		{"--docker-config", func(t *testing.T, dir string) []string {
			mkfifo(t, filepath.Join(dir, "config.json"))
			return []string{"publish", "-f", input, "--oci", "oci://127.0.0.1:1/org/r", "--docker-config", filepath.Join(dir, "config.json")}
		}, []string{"--docker-config", "not a regular file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearGitEnv(t)
			args := tc.setup(t, t.TempDir())
			type result struct {
				code   int
				stderr string
			}
			done := make(chan result, 1)
			go func() {
				code, _, stderr := scribe(t, args...)
				done <- result{code, stderr}
			}()
			select {
			case r := <-done:
				if r.code != exitError {
					t.Fatalf("exit %d, want 2:\n%s", r.code, r.stderr)
				}
				for _, w := range tc.want {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
					}
				}
			case <-time.After(30 * time.Second):
				t.Fatal("scribe blocked on the FIFO")
			}
		})
	}
}
