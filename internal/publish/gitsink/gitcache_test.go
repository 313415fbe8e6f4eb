package gitsink_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// The test binary doubles as a publishing process: with childEnv set,
// TestMain publishes instead of running tests (see childPublish), so the
// tests below can run several real processes against one cache.
const (
	childEnv      = "SCRIBE_PUBLISH_TEST_CHILD"
	childURL      = "SCRIBE_PUBLISH_TEST_URL"
	childCache    = "SCRIBE_PUBLISH_TEST_CACHE"
	childName     = "SCRIBE_PUBLISH_TEST_NAME"
	childContent  = "SCRIBE_PUBLISH_TEST_CONTENT"
	childForever  = "SCRIBE_PUBLISH_TEST_FOREVER"
	childExitFail = 1
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childPublish())
	}
	os.Exit(m.Run())
}

// childPublish publishes the Workload named by the environment with its
// content, once through a fresh Git on the shared cache (as one `scribe
// publish` does); with childForever set it publishes new content in a loop
// until it is killed. A panic is not recovered here: it exits 2.
func childPublish() int {
	ctx := context.Background()
	name, content := os.Getenv(childName), os.Getenv(childContent)
	for round := 0; ; round++ {
		g := gitsink.New(os.Getenv(childCache))
		g.CommitInterval = 0
		sink, err := g.Sink(gitsink.Options{URL: os.Getenv(childURL), Branch: "main", Path: "clusters", SyncIndex: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return childExitFail
		}
		c := content
		if os.Getenv(childForever) != "" {
			c = content + "-" + strconv.Itoa(round)
		}
		if _, err := sink.Publish(ctx, publish.ChangeFor(testBundle("team-a", name, c))); err != nil {
			fmt.Fprintf(os.Stderr, "publish %s: %v (reason %s)\n", name, err, publish.ReasonOf(err))
			return childExitFail
		}
		if os.Getenv(childForever) == "" {
			return 0
		}
	}
}

// child makes the command of a publishing process.
func child(t *testing.T, url, cache, name, content string, forever bool) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childURL+"="+url, childCache+"="+cache, childName+"="+name, childContent+"="+content)
	if forever {
		cmd.Env = append(cmd.Env, childForever+"=1")
	}
	return cmd
}

// configMapData reads the data value of a testBundle's ConfigMap on the
// server's branch.
func configMapData(t *testing.T, url, name string) string {
	t.Helper()
	work := clone(t, url, "main")
	data := readFile(t, filepath.Join(work, "clusters/team-a/workload", name, "configmap-"+name+".yaml"))
	_, v, ok := strings.Cut(data, "  v: ")
	if !ok {
		t.Fatalf("configmap of %s: no data: %q", name, data)
	}
	return strings.TrimSpace(v)
}

func fsck(t *testing.T, bare string) {
	t.Helper()
	if out, err := publishtest.RunGit(bare, "fsck", "--strict", "--no-progress", "--no-dangling"); err != nil {
		t.Fatalf("git fsck --strict %s: %v\n%s", bare, err, out)
	}
}

func TestGitTwoProcessesSharingACacheBothLandTheirChange(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "shared", "main")
	var cache string
	const rounds = 6
	for round := range rounds {
		// Even rounds start on an empty cache (both processes create and
		// fill it at once), odd ones reuse the cache of the round before.
		if round%2 == 0 {
			cache = t.TempDir()
		}
		content := fmt.Sprintf("round-%d", round)
		var wg sync.WaitGroup
		for _, name := range []string{"alpha", "beta"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := child(t, url, cache, name, content, false).CombinedOutput()
				if err != nil {
					t.Errorf("round %d: process publishing %s: %v\n%s", round, name, err, out)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		for _, name := range []string{"alpha", "beta"} {
			if got := configMapData(t, url, name); got != content {
				t.Fatalf("round %d: %s holds %q, want %q", round, name, got, content)
			}
		}
	}
	fsck(t, srv.BareDir("shared"))
}

func TestGitCacheSurvivesKilledPublishes(t *testing.T) {
	if testing.Short() {
		t.Skip("kill loop skipped in -short mode")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SCRIBE_KILL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SCRIBE_KILL_SEED: %v", err)
		}
	}
	t.Logf("kill seed %d (rerun with SCRIBE_KILL_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5c0be))

	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "killed", "main")
	cache := t.TempDir()
	const kills = 30
	for i := range kills {
		cmd := child(t, url, cache, "victim", fmt.Sprintf("kill-%d", i), true)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) && !ee.Exited() {
			continue // killed, as meant
		}
		// It ended on its own: only a failure does that.
		t.Fatalf("kill %d: the publishing process ended before the kill: %v", i, err)
	}
	// A later publish, in a new process as a next `scribe publish` is, lands.
	if out, err := child(t, url, cache, "victim", "after-the-kills", false).CombinedOutput(); err != nil {
		t.Fatalf("publish after %d kills: %v\n%s", kills, err, out)
	}
	if got := configMapData(t, url, "victim"); got != "after-the-kills" {
		t.Fatalf("victim holds %q after the kills, want %q", got, "after-the-kills")
	}
	fsck(t, srv.BareDir("killed"))
}

// cacheRepo returns the one cached repository under cache.
func cacheRepo(t *testing.T, cache string) string {
	t.Helper()
	var dirs []string
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(cache, e.Name()))
		}
	}
	if len(dirs) != 1 {
		t.Fatalf("cache %s holds %v, want one repository", cache, dirs)
	}
	return dirs[0]
}

func packs(t *testing.T, repo, ext string) []string {
	t.Helper()
	ps, err := filepath.Glob(filepath.Join(repo, "objects", "pack", "pack-*"+ext))
	if err != nil || len(ps) == 0 {
		t.Fatalf("no %s in %s (%v)", ext, repo, err)
	}
	return ps
}

func truncate(t *testing.T, p string, keep float64) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, int64(float64(fi.Size())*keep)); err != nil {
		t.Fatal(err)
	}
}

func TestGitBrokenCacheIsRebuiltNotFailedForever(t *testing.T) {
	ref := func(repo string) string { return filepath.Join(repo, "refs/remotes/origin/main") }
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, cache, repo string)
	}{
		{"an empty ref file", func(t *testing.T, _, repo string) {
			if err := os.WriteFile(ref(repo), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a garbage ref file", func(t *testing.T, _, repo string) {
			if err := os.WriteFile(ref(repo), []byte("\x00\x17not a hash\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a ref to a commit the cache lacks", func(t *testing.T, _, repo string) {
			if err := os.WriteFile(ref(repo), []byte(strings.Repeat("ab", 20)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"every pack cut short mid-object", func(t *testing.T, _, repo string) {
			for _, p := range packs(t, repo, ".pack") {
				truncate(t, p, 0.6)
			}
		}},
		{"a pack overwritten with garbage in the middle", func(t *testing.T, _, repo string) {
			for _, p := range packs(t, repo, ".pack") {
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				fi, _ := f.Stat()
				if _, err := f.WriteAt([]byte(strings.Repeat("\xff", 64)), fi.Size()/3); err != nil {
					t.Fatal(err)
				}
				_ = f.Close()
			}
		}},
		{"every index cut short", func(t *testing.T, _, repo string) {
			for _, p := range packs(t, repo, ".idx") {
				truncate(t, p, 0.5)
			}
		}},
		{"missing objects: every pack gone, its index left", func(t *testing.T, _, repo string) {
			for _, p := range packs(t, repo, ".pack") {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"missing objects: every pack and index gone", func(t *testing.T, _, repo string) {
			for _, ext := range []string{".pack", ".idx"} {
				for _, p := range packs(t, repo, ext) {
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
				}
			}
		}},
		{"a garbled config", func(t *testing.T, _, repo string) {
			if err := os.WriteFile(filepath.Join(repo, "config"), []byte("[remote \"origin\"\n\turl = "), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a stale lock and half-made copies left by a killed process", func(t *testing.T, cache, repo string) {
			locks, _ := filepath.Glob(filepath.Join(cache, "*.lock"))
			for _, l := range locks {
				if err := os.WriteFile(l, []byte("pid 4242 was here"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range []string{repo + ".new-x", repo + ".old-y", filepath.Join(repo, "objects/pack/tmp_pack_z")} {
				if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(d, []byte("half"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(repo, "packed-refs.lock"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"the cache directory replaced by a file", func(t *testing.T, _, repo string) {
			if err := os.RemoveAll(repo); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(repo, []byte("not a repository"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		// Found by the next process (the cache is checked when another
		// process used it), and by the same Git (the damage shows when it
		// is read: dropped and fetched again).
		for _, same := range []bool{false, true} {
			mode := map[bool]string{false: "next process", true: "same process"}[same]
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				ctx := context.Background()
				srv := publishtest.NewGitServer(t)
				url := srv.InitRepo(t, "broken", "main")
				cache := t.TempDir()
				opts := gitsink.Options{URL: url, Branch: "main", Path: "clusters", SyncIndex: true}
				g := gitsink.New(cache)
				g.CommitInterval = 0
				if _, err := newSink(t, g, opts).Publish(ctx, publish.ChangeFor(testBundle("team-a", "web", "one"))); err != nil {
					t.Fatal(err)
				}
				// Someone else moves the branch: the next publish fetches.
				if _, err := srv.CommitOnServer("broken", "main", "NOTES.md", "foreign\n"); err != nil {
					t.Fatal(err)
				}
				tc.break_(t, cache, cacheRepo(t, cache))
				if !same {
					g = gitsink.New(cache)
					g.CommitInterval = 0
				}
				res, err := newSink(t, g, opts).Publish(ctx, publish.ChangeFor(testBundle("team-a", "web", "two")))
				if err != nil {
					t.Fatalf("publish on the broken cache: %v (reason %s)", err, publish.ReasonOf(err))
				}
				if !res.Changed {
					t.Fatalf("publish on the broken cache changed nothing: %+v", res)
				}
				if got := configMapData(t, url, "web"); got != "two" {
					t.Fatalf("web holds %q, want %q", got, "two")
				}
				// And the rebuilt cache keeps working.
				if _, err := newSink(t, gitsink.New(cache), opts).Publish(ctx, publish.ChangeFor(testBundle("team-a", "web", "three"))); err != nil {
					t.Fatalf("publish after the rebuild: %v", err)
				}
				fsck(t, srv.BareDir("broken"))
			})
		}
	}
}
