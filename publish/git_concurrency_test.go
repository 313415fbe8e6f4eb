package publish_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scribe-gitops/scribe/publish"
	"github.com/scribe-gitops/scribe/publish/publishtest"
	"github.com/scribe-gitops/scribe/render"
)

// serverWriter commits unrelated files directly on the server, as a forge's
// web editor or a server-side bot does, every 150-450 ms (two of them make
// several commits a second, far more than people do), so it races Scribe's
// pushes, whose compare-and-swap window is 100-300 ms here.
func serverWriter(ctx context.Context, t *testing.T, srv *publishtest.GitServer, repo string, id int) []string {
	var pushed []string
	for n := 0; ctx.Err() == nil; n++ {
		rel := fmt.Sprintf("foreign/s%d/%03d.txt", id, n)
		if _, err := srv.CommitOnServer(repo, "main", rel, rel+"\n"); err != nil {
			t.Errorf("server writer %d: %v", id, err)
			return pushed
		}
		pushed = append(pushed, rel)
		time.Sleep(time.Duration(150+rand.IntN(300)) * time.Millisecond) //nolint:gosec // test pacing
	}
	return pushed
}

// foreignWriter commits unrelated files to the branch with the git CLI, the
// way a person or another bot does: commit, push, and on rejection pull
// --rebase and push again. It returns the files it got onto the branch.
func foreignWriter(ctx context.Context, t *testing.T, url string, id int) []string {
	dir := t.TempDir()
	if _, err := publishtest.RunGit("", "clone", "--quiet", url, dir); err != nil {
		t.Errorf("writer %d: %v", id, err)
		return nil
	}
	var pushed []string
	for n := 0; ctx.Err() == nil; n++ {
		rel := fmt.Sprintf("foreign/w%d/%03d.txt", id, n)
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Error(err)
			return pushed
		}
		if err := os.WriteFile(p, []byte(rel+"\n"), 0o644); err != nil {
			t.Error(err)
			return pushed
		}
		if _, err := publishtest.RunGit(dir, "add", rel); err != nil {
			t.Error(err)
			return pushed
		}
		if _, err := publishtest.RunGit(dir, "commit", "--quiet", "-m", "foreign "+rel); err != nil {
			t.Error(err)
			return pushed
		}
		for try := 0; ; try++ {
			_, err := publishtest.RunGit(dir, "push", "--quiet", "origin", "HEAD:main")
			if err == nil {
				pushed = append(pushed, rel)
				break
			}
			if ctx.Err() != nil {
				return pushed // stopped while losing races: this file never landed
			}
			if try > 500 {
				t.Errorf("writer %d: cannot push %s: %v", id, rel, err)
				return pushed
			}
			if _, err := publishtest.RunGit(dir, "pull", "--quiet", "--rebase", "origin", "main"); err != nil {
				t.Errorf("writer %d: pull --rebase: %v", id, err)
				return pushed
			}
		}
	}
	return pushed
}

func TestGitPublishWithForeignWritersLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("concurrency test")
	}
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "busy", "main")
	g := publish.NewGit(t.TempDir())
	sink := newSink(t, g, publish.GitOptions{URL: url, Branch: "main", Path: "deploy"})

	const writers, bundles, publishers = 4, 200, 8
	ctx, stopForeign := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	foreign := make([][]string, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				foreign[i] = serverWriter(ctx, t, srv, "busy", i)
			} else {
				foreign[i] = foreignWriter(ctx, t, url, i)
			}
		}()
	}

	want := map[string]*render.Bundle{}
	var mu sync.Mutex
	var pwg sync.WaitGroup
	errs := make(chan error, bundles)
	for p := range publishers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := p; i < bundles; i += publishers {
				b := testBundle(fmt.Sprintf("ns%d", i%7), fmt.Sprintf("app-%03d", i), fmt.Sprint("content-", i))
				mu.Lock()
				want[b.Dir] = b
				mu.Unlock()
				time.Sleep(time.Duration(i%5) * 5 * time.Millisecond) // spread the publishes out
				if _, err := sink.Publish(context.Background(), publish.ChangeFor(b)); err != nil {
					errs <- fmt.Errorf("bundle %d: %w", i, err)
				}
			}
		}()
	}
	pwg.Wait()
	stopForeign()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	got := clone(t, url, "main")
	total := 0
	for i, files := range foreign {
		for _, rel := range files {
			total++
			if data := readFile(t, filepath.Join(got, rel)); data != rel+"\n" {
				t.Errorf("writer %d lost %s", i, rel)
			}
		}
	}
	for dir, b := range want {
		for _, f := range b.Files {
			if data := readFile(t, filepath.Join(got, "deploy", f.Path)); data != string(f.Data) {
				t.Errorf("bundle %s: %s = %q, want %q", dir, f.Path, data, f.Data)
			}
		}
	}
	publishtest.Git(t, "", "--git-dir", srv.BareDir("busy"), "fsck", "--strict", "--no-progress")
	scribeCommits := publishtest.Git(t, got, "log", "--format=%H", "--author=scribe@scribe.dev")
	stats := g.Stats()
	t.Logf("%d foreign commits, %d bundles in %d Scribe commits; %d push conflicts retried, %d fetches",
		total, len(want), len(strings.Fields(scribeCommits)), stats.Conflicts, stats.Fetches)
	for i, files := range foreign {
		if len(files) == 0 {
			t.Errorf("foreign writer %d got nothing onto the branch: the test proved nothing", i)
		}
	}
}
