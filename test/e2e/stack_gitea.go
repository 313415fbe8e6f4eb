package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Gitea is a real Gitea (hack/build-gitea.sh) serving HTTP on 127.0.0.1,
// with SQLite, one admin user and its token made by Gitea's own CLI, and
// the experiments repository made through its API. Flux syncs from it
// through the GitRepository FluxSource.
type Gitea struct {
	// URL is the web and API root, http://127.0.0.1:P (no trailing slash).
	URL string
	// User and Password are the admin user's; Token is its API token
	// (all scopes).
	User, Password, Token string
	// Owner/Repo is the experiments repository; RepoURL its clone URL.
	Owner, Repo, RepoURL string
	// FluxSource is the GitRepository (in flux-system) that syncs RepoURL's
	// main branch, with the root Kustomization FluxSource+"-root" applying
	// SyncPath.
	FluxSource string

	hc *http.Client
}

// GiteaRepo is the experiments repository's name on Gitea.
const GiteaRepo = "experiments"

// StartGitea builds (or finds cached) and starts Gitea as part of the loop,
// creates the admin user, its token and the experiments repository, and the
// Flux GitRepository and root Kustomization that sync it.
func (s *Stack) StartGitea(t testing.TB) *Gitea {
	t.Helper()
	g, err := s.startGitea(context.Background())
	if err != nil {
		t.Fatalf("start gitea: %v\n--- gitea log:\n%s", err, s.Logs("gitea", 30))
	}
	return g
}

// StartGiteaOnly starts Gitea alone (no control plane, no Flux), for
// tests of the forge client and the pull-request branch against it.
func StartGiteaOnly(t testing.TB) *Gitea {
	t.Helper()
	s := &Stack{Dir: t.TempDir(), logf: t.Logf}
	t.Cleanup(func() { s.keepLogsOnFailure(t) })
	t.Cleanup(s.stop)
	return s.StartGitea(t)
}

func (s *Stack) startGitea(ctx context.Context) (*Gitea, error) {
	start := time.Now()
	bin, err := buildDir(s.logf, "build-gitea.sh")
	if err != nil {
		return nil, err
	}
	static, err := os.ReadFile(filepath.Join(bin, "static-root"))
	if err != nil {
		return nil, fmt.Errorf("gitea's static root: %w", err)
	}
	port, err := s.port()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(s.Dir, "gitea")
	for _, d := range []string{"data", "repos", "log", "custom"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	g := &Gitea{
		URL:  "http://127.0.0.1:" + port,
		User: "scribe", Password: "scribe-e2e-password",
		Owner: "scribe", Repo: GiteaRepo,
		FluxSource: "gitea",
		hc:         &http.Client{Timeout: 30 * time.Second},
	}
	g.RepoURL = g.URL + "/" + g.Owner + "/" + g.Repo + ".git"
	ini := filepath.Join(dir, "app.ini")
	if err := os.WriteFile(ini, []byte(giteaINI(dir, strings.TrimSpace(string(static)), port, g.URL)), 0o600); err != nil {
		return nil, err
	}
	gitea := filepath.Join(bin, "gitea")
	env := []string{"GITEA_WORK_DIR=" + dir, "GITEA_CUSTOM=" + filepath.Join(dir, "custom"), "HOME=" + dir}
	cli := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, gitea, append(args, "--config", ini)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Dir = dir
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("gitea %s: %w: %s%s", args[0], err, errb.String(), out.String())
		}
		return strings.TrimSpace(out.String()), nil
	}
	if _, err := cli("migrate"); err != nil {
		return nil, err
	}
	if _, err := cli("admin", "user", "create", "--admin", "--username", g.User, "--password", g.Password,
		"--email", "scribe@example.com", "--must-change-password=false"); err != nil {
		return nil, err
	}
	out, err := cli("admin", "user", "generate-access-token", "--username", g.User, "--token-name", "e2e", "--scopes", "all", "--raw")
	if err != nil {
		return nil, err
	}
	// The token is the last line; Gitea may log warnings before it.
	lines := strings.Split(out, "\n")
	if g.Token = strings.TrimSpace(lines[len(lines)-1]); g.Token == "" || strings.ContainsAny(g.Token, " \t") {
		return nil, fmt.Errorf("gitea admin user generate-access-token printed no token: %q", out)
	}
	if err := s.run("gitea", gitea, env, "web", "--config", ini); err != nil {
		return nil, err
	}
	if err := g.waitReady(ctx); err != nil {
		return nil, err
	}
	if err := g.API(ctx, http.MethodPost, "/user/repos", map[string]any{
		"name": g.Repo, "auto_init": true, "default_branch": "main", "private": false,
	}, nil); err != nil {
		return nil, fmt.Errorf("create repository: %w", err)
	}
	if s.Client != nil { // a stack with a control plane: Flux syncs from Gitea
		if err := s.createGiteaFluxSync(ctx, g); err != nil {
			return nil, err
		}
	}
	s.logf("gitea %s is up in %s (repository %s)", g.URL, time.Since(start).Round(time.Millisecond), g.RepoURL)
	return g, nil
}

// giteaINI is the configuration: SQLite, HTTP on 127.0.0.1 only, no SSH,
// mail, cron, indexers or actions.
func giteaINI(dir, static, port, rootURL string) string {
	return fmt.Sprintf(`APP_NAME = Scribe e2e
RUN_MODE = prod
RUN_USER = %[5]s
WORK_PATH = %[1]s
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[3]s
ROOT_URL = %[4]s/
LOCAL_ROOT_URL = %[4]s/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
APP_DATA_PATH = %[1]s/data
STATIC_ROOT_PATH = %[2]s

[database]
DB_TYPE = sqlite3
PATH = %[1]s/data/gitea.db

[repository]
ROOT = %[1]s/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = scribe-e2e-secret-key-not-for-production
INTERNAL_TOKEN = eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJuYmYiOjE3MDAwMDAwMDB9.scribe-e2e-internal-token

[oauth2]
ENABLED = false

[service]
DISABLE_REGISTRATION = true

[queue]
TYPE = channel

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[mailer]
ENABLED = false

[actions]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[log]
MODE = console
LEVEL = Warn
ROOT_PATH = %[1]s/log
`, dir, static, port, rootURL, currentUser())
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if os.Getuid() == 0 {
		return "root"
	}
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		return "root"
	}
	return strings.TrimSpace(string(out))
}

// waitReady waits (bounded) for Gitea's API to answer.
func (g *Gitea) waitReady(ctx context.Context) error {
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = g.API(ctx, http.MethodGet, "/version", nil, nil); err == nil {
			return nil
		}
	}
	return fmt.Errorf("gitea %s did not answer within 60s: %w", g.URL, err)
}

// API calls Gitea's REST API (/api/v1 + path) as the admin user with the
// token; body and out are JSON (either may be nil).
func (g *Gitea) API(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.URL+"/api/v1"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if g.Token != "" {
		req.Header.Set("Authorization", "token "+g.Token)
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// RepoAPI is API on /repos/{owner}/{repo} + path.
func (g *Gitea) RepoAPI(ctx context.Context, method, path string, body, out any) error {
	return g.API(ctx, method, "/repos/"+g.Owner+"/"+g.Repo+path, body, out)
}

// GiteaPull is the part of Gitea's pull request the tests read.
type GiteaPull struct {
	Number         int     `json:"number"`
	State          string  `json:"state"`
	Title          string  `json:"title"`
	Body           string  `json:"body"`
	HTMLURL        string  `json:"html_url"`
	Merged         bool    `json:"merged"`
	MergeCommitSHA *string `json:"merge_commit_sha"`
	Head           struct {
		Ref string `json:"ref"`
		Sha string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

// Pulls lists the repository's pull requests in state (open, closed, all).
func (g *Gitea) Pulls(ctx context.Context, state string) ([]GiteaPull, error) {
	var out []GiteaPull
	err := g.RepoAPI(ctx, http.MethodGet, "/pulls?state="+state+"&limit=50", nil, &out)
	return out, err
}

// Pull reads one pull request.
func (g *Gitea) Pull(ctx context.Context, number int) (GiteaPull, error) {
	var out GiteaPull
	err := g.RepoAPI(ctx, http.MethodGet, fmt.Sprintf("/pulls/%d", number), nil, &out)
	return out, err
}

// Merge merges a pull request with a merge commit, as the "Merge" button
// does, and returns the merge commit. The head branch is left in place:
// deleting it is Scribe's job.
func (g *Gitea) Merge(ctx context.Context, number int) (string, error) {
	// Gitea checks a pull request's mergeability after each push, in the
	// background, and answers 405 "Please try again later" until it is done.
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		err = g.RepoAPI(ctx, http.MethodPost, fmt.Sprintf("/pulls/%d/merge", number), map[string]any{"Do": "merge"}, nil)
		if err == nil || !strings.Contains(err.Error(), "try again later") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	p, err := g.Pull(ctx, number)
	if err != nil {
		return "", err
	}
	if !p.Merged || p.MergeCommitSHA == nil {
		return "", fmt.Errorf("pull request #%d not merged after the merge call: state %s", number, p.State)
	}
	return *p.MergeCommitSHA, nil
}

// SetPullState closes ("closed") or reopens ("open") a pull request.
func (g *Gitea) SetPullState(ctx context.Context, number int, state string) error {
	return g.RepoAPI(ctx, http.MethodPatch, fmt.Sprintf("/pulls/%d", number), map[string]any{"state": state}, nil)
}

// BranchSHA is the commit at the tip of branch, or "" when the branch does
// not exist.
func (g *Gitea) BranchSHA(ctx context.Context, branch string) (string, error) {
	var out struct {
		Commit struct {
			ID string `json:"id"`
		} `json:"commit"`
	}
	err := g.RepoAPI(ctx, http.MethodGet, "/branches/"+branch, nil, &out)
	if err != nil && strings.Contains(err.Error(), "404") {
		return "", nil
	}
	return out.Commit.ID, err
}

// createGiteaFluxSync makes the GitRepository that syncs Gitea's main
// branch and the root Kustomization that applies Scribe's sync index there.
func (s *Stack) createGiteaFluxSync(ctx context.Context, g *Gitea) error {
	gr := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: g.FluxSource, Namespace: "flux-system"},
		Spec: sourcev1.GitRepositorySpec{
			URL:       g.RepoURL,
			Interval:  metav1.Duration{Duration: time.Minute},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
		},
	}
	if err := s.Client.Create(ctx, gr); err != nil {
		return fmt.Errorf("create GitRepository %s: %w", g.FluxSource, err)
	}
	root := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Name: g.FluxSource + "-root", Namespace: "flux-system"},
		Spec: kustomizev1.KustomizationSpec{
			Interval:  metav1.Duration{Duration: time.Minute},
			Path:      "./" + SyncPath,
			Prune:     true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: g.FluxSource},
		},
	}
	if err := s.Client.Create(ctx, root); err != nil {
		return fmt.Errorf("create root Kustomization %s-root: %w", g.FluxSource, err)
	}
	return nil
}
