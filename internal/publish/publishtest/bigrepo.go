package publishtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BigRepo describes a generated repository for benchmarks: Commits commits
// on Branch, the first adding Files small files spread over directories and
// each later one editing a single file, as a long-lived GitOps repository
// looks after years of one-line changes.
//
// The layout is clusters/team-NNN/workload/app-NN/<file>: four files per
// app directory, fifty apps per team (BigRepoFile), so a publish into
// clusters/team-NNN/workload/ grafts next to fifty foreign siblings.
type BigRepo struct {
	Branch  string
	Commits int
	Files   int
}

// bigRepoVersion changes whenever the generated content or layout changes,
// so a stale cached repository is never reused.
const bigRepoVersion = "v1"

// bigRepoTimeout bounds the generation (fast-import and repack).
const bigRepoTimeout = 15 * time.Minute

// Key names the repository in the cache: every parameter and the version.
func (r BigRepo) Key() string {
	return fmt.Sprintf("bigrepo-%s-c%d-f%d-%s", r.Branch, r.Commits, r.Files, bigRepoVersion)
}

// BigRepoFile is the path of file k (0 <= k < Files) of a BigRepo.
func BigRepoFile(k int) string {
	name := "kustomization.yaml"
	switch k % 4 {
	case 0:
		name = "deployment.yaml"
	case 1:
		name = "service.yaml"
	case 2:
		name = "configmap.yaml"
	}
	return fmt.Sprintf("clusters/team-%03d/workload/app-%02d/%s", k/200, (k/4)%50, name)
}

// bigRepoContent is file k at revision rev: a small manifest.
func bigRepoContent(k, rev int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-%d-%d\n  namespace: team-%03d\ndata:\n  revision: \"%d\"\n  owner: team-%03d@example.com\n",
		k/4, k%4, k/200, rev, k/200)
}

// Generated says where a cached repository is and, when this call made it,
// how long that took.
type Generated struct {
	// Dir is the bare repository.
	Dir string
	// Took is the generation time; zero when the cached copy was used.
	Took time.Duration
	// Phases is how Took splits, for example "fast-import 30s, repack 9s".
	Phases string
}

// CachedBigRepo returns the bare repository r, generating it on first use
// under ${XDG_CACHE_HOME:-$HOME/.cache}/scribe/bench/<r.Key()>/ with git
// fast-import. Callers copy it (AddBareRepo) rather than write to it.
func CachedBigRepo(t testing.TB, r BigRepo) Generated {
	t.Helper()
	if r.Branch == "" || r.Commits < 1 || r.Files < 1 {
		t.Fatalf("big repo %+v: branch, commits and files are required", r)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("big repo: %v", err)
	}
	parent := filepath.Join(base, "scribe", "bench", r.Key())
	dir := filepath.Join(parent, "repo.git")
	if _, err := os.Stat(dir); err == nil {
		return Generated{Dir: dir}
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatalf("big repo: %v", err)
	}
	// Generate beside the final place and rename: a half-written repository
	// (an interrupted run) is never mistaken for a finished one, and two
	// concurrent runs each generate and the first rename wins.
	tmp, err := os.MkdirTemp(parent, "gen-")
	if err != nil {
		t.Fatalf("big repo: %v", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), bigRepoTimeout)
	defer cancel()
	phases, err := generateBigRepo(ctx, filepath.Join(tmp, "repo.git"), r)
	if err != nil {
		t.Fatalf("generate big repo %s: %v", r.Key(), err)
	}
	took := time.Since(start)
	if err := os.Rename(filepath.Join(tmp, "repo.git"), dir); err != nil {
		if _, statErr := os.Stat(dir); statErr != nil {
			t.Fatalf("big repo: %v", err)
		}
	}
	return Generated{Dir: dir, Took: took, Phases: phases}
}

func generateBigRepo(ctx context.Context, bare string, r BigRepo) (string, error) {
	var phases []string
	start := time.Now()
	phase := func(name string) {
		phases = append(phases, name+" "+time.Since(start).Round(time.Millisecond).String())
		start = time.Now()
	}
	if _, err := RunGit("", "init", "--quiet", "--bare", "--initial-branch="+r.Branch, bare); err != nil {
		return "", err
	}
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	cmd := exec.CommandContext(ctx, "git", "--git-dir", bare, "fast-import", "--quiet", "--done")
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	werr := writeBigRepoStream(stdin, r)
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("git fast-import: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if werr != nil {
		return "", fmt.Errorf("write fast-import stream: %w", werr)
	}
	phase("fast-import")
	// One pack with a reachability bitmap, as a hosted forge serves it; the
	// deltas fast-import found are reused, not searched again.
	repack := exec.CommandContext(ctx, "git", "--git-dir", bare, "repack", "-a", "-d", "-q", "--write-bitmap-index")
	repack.Env = env
	if out, err := repack.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git repack: %w: %s", err, strings.TrimSpace(string(out)))
	}
	phase("repack with bitmap")
	count, err := RunGit("", "--git-dir", bare, "rev-list", "--count", "refs/heads/"+r.Branch)
	if err != nil {
		return "", err
	}
	if count != strconv.Itoa(r.Commits) {
		return "", fmt.Errorf("generated %s commits, want %d", count, r.Commits)
	}
	phase("check")
	return strings.Join(phases, ", "), nil
}

// writeBigRepoStream writes the fast-import stream of r: a first commit
// with every file, then one commit per edit of a single file.
func writeBigRepoStream(out io.Writer, r BigRepo) error {
	w := bufio.NewWriterSize(out, 1<<20)
	const epoch = 1_600_000_000
	data := func(s string) {
		_, _ = fmt.Fprintf(w, "data %d\n%s\n", len(s), s)
	}
	commit := func(n int, msg string) {
		_, _ = fmt.Fprintf(w, "commit refs/heads/%s\n", r.Branch)
		_, _ = fmt.Fprintf(w, "author Bench Writer <bench@example.com> %d +0000\n", epoch+n*60)
		_, _ = fmt.Fprintf(w, "committer Bench Writer <bench@example.com> %d +0000\n", epoch+n*60)
		data(msg)
	}
	_, _ = w.WriteString("feature done\n")
	commit(0, "initial import of "+strconv.Itoa(r.Files)+" files")
	for k := 0; k < r.Files; k++ {
		_, _ = fmt.Fprintf(w, "M 100644 inline %s\n", BigRepoFile(k))
		data(bigRepoContent(k, 0))
	}
	for n := 1; n < r.Commits; n++ {
		// A fixed stride over the files: deterministic, and every file is
		// touched about Commits/Files times.
		k := int((uint64(n)*7919 + 13) % uint64(r.Files))
		p := BigRepoFile(k)
		commit(n, "edit "+p)
		_, _ = fmt.Fprintf(w, "M 100644 inline %s\n", p)
		data(bigRepoContent(k, n))
	}
	_, _ = w.WriteString("done\n")
	return w.Flush()
}

// AddBareRepo copies the bare repository src into the server as
// <name>.git, hard-linking its objects when the file system allows, and
// returns the clone URL. The copy is the server's own: pushes to it never
// touch src.
func (s *GitServer) AddBareRepo(t testing.TB, name, src string) string {
	t.Helper()
	dst := s.BareDir(name)
	if _, err := os.Stat(dst); err == nil {
		t.Fatalf("add repo %s: %s exists", name, dst)
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("add repo %s: %v", name, err)
	}
	// A plain path (not file://) makes a local clone: objects are
	// hard-linked, or copied across file systems.
	Git(t, "", "clone", "--quiet", "--bare", src, dst)
	return s.RepoURL(name)
}
