// Package publishtest starts real Git servers on 127.0.0.1 for tests: git's
// own smart-HTTP backend (`git http-backend` behind net/http/cgi) and an SSH
// server that runs git-upload-pack/git-receive-pack. Nothing is faked: the
// servers speak the real protocols with the real git.
package publishtest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// GitServer is `git http-backend` over HTTP on 127.0.0.1 with push enabled.
type GitServer struct {
	// URL is the server's base URL; repositories are at URL + "/<name>.git".
	URL string
	// Root holds the bare repositories.
	Root string

	srv     *httptest.Server
	backend *cgi.Handler

	mu       sync.Mutex
	username string
	password string
	token    string
	requests int
	// beforePush runs before each push request reaches git.
	beforePush func(repo string)
}

// BeforePush makes fn run before every push (POST …/git-receive-pack) is
// handed to git, with the repository name: a test can move the branch
// there to lose the push its compare-and-swap, deterministically.
func (s *GitServer) BeforePush(fn func(repo string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beforePush = fn
}

// NewGitServer starts a server whose repositories live in a temporary
// directory; it is stopped when the test ends.
func NewGitServer(t testing.TB) *GitServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	s := &GitServer{Root: t.TempDir()}
	s.backend = &cgi.Handler{
		Stderr: io.Discard,
		Path:   filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.Root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + s.Root,
			"GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=http.receivepack",
			"GIT_CONFIG_VALUE_0=true",
			"GIT_CONFIG_KEY_1=uploadpack.allowAnySHA1InWant",
			"GIT_CONFIG_VALUE_1=true",
		},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

func (s *GitServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	user, pass, token, before := s.username, s.password, s.token, s.beforePush
	s.requests++
	s.mu.Unlock()
	if before != nil && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
		before(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/git-receive-pack"), "/"), ".git"))
	}
	switch {
	case token != "":
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("WWW-Authenticate", `Bearer realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	case user != "":
		u, p, ok := r.BasicAuth()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if u != user || p != pass {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
	}
	s.backend.ServeHTTP(w, r)
}

// RequireBasicAuth makes every request need these credentials (401 without
// any, 403 with wrong ones, as hosted forges answer).
func (s *GitServer) RequireBasicAuth(username, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.username, s.password, s.token = username, password, ""
}

// RequireBearerToken makes every request need "Authorization: Bearer token".
func (s *GitServer) RequireBearerToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.username, s.password, s.token = "", "", token
}

// Requests counts the HTTP requests served so far.
func (s *GitServer) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Close stops the server; later requests fail as an unreachable remote does.
func (s *GitServer) Close() { s.srv.Close() }

// InitRepo creates the bare repository <name>.git with one commit on branch
// holding README.md, and returns its clone URL.
func (s *GitServer) InitRepo(t testing.TB, name, branch string) string {
	t.Helper()
	bare := filepath.Join(s.Root, name+".git")
	Git(t, "", "init", "--bare", "--initial-branch="+branch, bare)
	work := t.TempDir()
	Git(t, "", "clone", "--quiet", bare, work)
	Git(t, work, "checkout", "--quiet", "-b", branch)
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("# "+name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Git(t, work, "add", "README.md")
	Git(t, work, "commit", "--quiet", "-m", "initial commit")
	Git(t, work, "push", "--quiet", "origin", branch)
	return s.RepoURL(name)
}

// RepoURL is the clone URL of repository name.
func (s *GitServer) RepoURL(name string) string { return s.URL + "/" + name + ".git" }

// BareDir is the on-disk bare repository of name.
func (s *GitServer) BareDir(name string) string { return filepath.Join(s.Root, name+".git") }

// Protect installs a pre-receive hook that declines every update of branch
// with the message a forge prints for a protected branch.
func (s *GitServer) Protect(t testing.TB, name, branch string) {
	t.Helper()
	hook := fmt.Sprintf(`#!/bin/sh
while read old new ref; do
  if [ "$ref" = "refs/heads/%s" ]; then
    echo "GH006: Protected branch update failed for refs/heads/%s." >&2
    exit 1
  fi
done
`, branch, branch)
	p := filepath.Join(s.BareDir(name), "hooks", "pre-receive")
	if err := os.WriteFile(p, []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
}

// Git runs the git CLI in dir with a fixed identity and no user config, and
// fails the test on error. It returns trimmed stdout.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := RunGit(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// RunGit is Git without a test: it returns stdout, or an error with stderr.
func RunGit(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Foreign Writer", "GIT_AUTHOR_EMAIL=foreign@example.com",
		"GIT_COMMITTER_NAME=Foreign Writer", "GIT_COMMITTER_EMAIL=foreign@example.com",
		"GIT_TERMINAL_PROMPT=0",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// CommitOnServer commits one file to branch directly in the bare repository,
// as a forge's web editor or a server-side bot does: read the tip, write a
// new tree and commit, and move the branch only if it is still at the tip
// (git update-ref with the old value), retrying when it moved. It returns
// the new commit.
func (s *GitServer) CommitOnServer(name, branch, file, content string) (string, error) {
	bare := s.BareDir(name)
	index, err := os.CreateTemp("", "scribe-index-")
	if err != nil {
		return "", err
	}
	indexPath := index.Name()
	_ = index.Close()
	defer func() { _ = os.Remove(indexPath) }()
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"--git-dir", bare}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_INDEX_FILE="+indexPath, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=Server Writer", "GIT_AUTHOR_EMAIL=server@example.com",
			"GIT_COMMITTER_NAME=Server Writer", "GIT_COMMITTER_EMAIL=server@example.com")
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(stdout.String()), nil
	}
	for try := 0; try < 100; try++ {
		old, err := run("", "rev-parse", "refs/heads/"+branch)
		if err != nil {
			return "", err
		}
		if _, err := run("", "read-tree", old); err != nil {
			return "", err
		}
		blob, err := run(content, "hash-object", "-w", "--stdin")
		if err != nil {
			return "", err
		}
		if _, err := run("", "update-index", "--add", "--cacheinfo", "100644,"+blob+","+file); err != nil {
			return "", err
		}
		tree, err := run("", "write-tree")
		if err != nil {
			return "", err
		}
		commit, err := run("", "commit-tree", tree, "-p", old, "-m", "server-side edit of "+file)
		if err != nil {
			return "", err
		}
		if _, err := run("", "update-ref", "refs/heads/"+branch, commit, old); err == nil {
			return commit, nil
		}
	}
	return "", fmt.Errorf("commit %s on %s: branch kept moving", file, branch)
}
