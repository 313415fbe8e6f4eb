package gitsink_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
	"github.com/scribe-gitops/scribe/render"
)

// foreignCommits is how many commits each timed writer makes. They are few:
// on a loaded machine Scribe's fetch-commit-push takes seconds, and a writer
// that kept committing every second would win nearly every race; the
// pushRacer makes the races that do not depend on the machine's speed.
const foreignCommits = 6

// serverWriter commits unrelated files directly on the server, as a forge's
// web editor or a server-side bot does, every 0.5-1.5 s, so some of its
// commits land while Scribe fetches and builds its next commit.
func serverWriter(t *testing.T, srv *publishtest.GitServer, repo string, id int) []string {
	var pushed []string
	for n := range foreignCommits {
		rel := fmt.Sprintf("foreign/s%d/%03d.txt", id, n)
		if _, err := srv.CommitOnServer(repo, "main", rel, rel+"\n"); err != nil {
			t.Errorf("server writer %d: %v", id, err)
			return pushed
		}
		pushed = append(pushed, rel)
		time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond) //nolint:gosec // test pacing
	}
	return pushed
}

// pushRacer moves the branch on the server right before half of the pushes
// reach git, chosen at random: those pushes lose their compare-and-swap
// however fast or slow the machine is, and the pusher must fetch the new tip
// and try again. (Timed writers alone race only when the machine is fast
// enough for the race to be close; on a loaded machine they either never
// collide or always win.)
type pushRacer struct {
	mu    sync.Mutex
	files []string
}

func (r *pushRacer) install(t *testing.T, srv *publishtest.GitServer) {
	srv.BeforePush(func(repo string) {
		if rand.IntN(2) == 0 { //nolint:gosec // test randomness
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		rel := fmt.Sprintf("foreign/racer/%04d.txt", len(r.files))
		if _, err := srv.CommitOnServer(repo, "main", rel, rel+"\n"); err != nil {
			t.Errorf("push racer: %v", err)
			return
		}
		r.files = append(r.files, rel)
	})
}

func (r *pushRacer) landed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.files)
}

// foreignWriter commits unrelated files to the branch with the git CLI, the
// way a person or another bot does, every 0.3-0.9 s: commit, push, and on
// rejection pull --rebase and push again. It returns the files it got onto
// the branch.
func foreignWriter(t *testing.T, url string, id int) []string {
	dir := t.TempDir()
	if _, err := publishtest.RunGit("", "clone", "--quiet", url, dir); err != nil {
		t.Errorf("writer %d: %v", id, err)
		return nil
	}
	var pushed []string
	for n := range foreignCommits {
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
			if try > 500 {
				t.Errorf("writer %d: cannot push %s: %v", id, rel, err)
				return pushed
			}
			if _, err := publishtest.RunGit(dir, "pull", "--quiet", "--rebase", "origin", "main"); err != nil {
				t.Errorf("writer %d: pull --rebase: %v", id, err)
				return pushed
			}
		}
		time.Sleep(time.Duration(300+rand.IntN(600)) * time.Millisecond) //nolint:gosec // test pacing
	}
	return pushed
}

func TestGitPublishWithForeignWritersLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("concurrency test")
	}
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "busy", "main")
	racer := &pushRacer{}
	racer.install(t, srv)
	g := gitsink.New(t.TempDir())
	g.CommitInterval = 0 // race the foreign writers with every commit Scribe can make
	// Half of all pushes lose at random, so allow more tries than the
	// default 10 (ten losses in a row happen once in a thousand commits):
	// the test is about losing nothing, not about the bound
	// (TestGitPublishGivesUpAfterBoundedConflicts proves the bound).
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Path: "deploy", MaxAttempts: 40, Backoff: 20 * time.Millisecond})

	const writers, bundles, publishers = 4, 60, 6
	var wg sync.WaitGroup
	foreign := make([][]string, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				foreign[i] = serverWriter(t, srv, "busy", i)
			} else {
				foreign[i] = foreignWriter(t, url, i)
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
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	foreign = append(foreign, racer.landed())
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
	if stats.Conflicts == 0 {
		t.Error("no push of Scribe lost a race: the test proved nothing")
	}
}

func TestGitPublishGivesUpAfterBoundedConflicts(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "racy", "main")
	// Another writer commits just before every push of Scribe arrives, so
	// each push loses the compare-and-swap.
	n := 0
	srv.BeforePush(func(repo string) {
		n++
		if _, err := srv.CommitOnServer(repo, "main", fmt.Sprintf("racer/%d.txt", n), "racing writer\n"); err != nil {
			t.Error(err)
		}
	})
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", MaxAttempts: 3, Backoff: time.Millisecond})
	_, err := sink.Publish(context.Background(), publish.ChangeFor(testBundle("ns", "a", "x")))
	if err == nil {
		t.Fatal("publish succeeded against a branch that always moves")
	}
	if publish.ReasonOf(err) != publish.ReasonConflict || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Fatalf("err = %v (reason %s)", err, publish.ReasonOf(err))
	}
	if c := g.Stats().Conflicts; c != 3 {
		t.Errorf("%d conflicts counted, want 3", c)
	}
	// The racing writer's commits are all there; Scribe's is not.
	work := clone(t, url, "main")
	if n := publishtest.Git(t, work, "rev-list", "--count", "--grep=server-side edit of racer/", "HEAD"); n != "3" {
		t.Errorf("%s racing commits on main, want 3", n)
	}
	if _, err := os.Stat(filepath.Join(work, "ns")); !os.IsNotExist(err) {
		t.Error("a rejected publish left files on the branch")
	}
}

func TestGitPublishRetriesOnTheNewTipAfterLosingARace(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "racy", "main")
	raced := false
	srv.BeforePush(func(repo string) {
		if !raced {
			raced = true
			if _, err := srv.CommitOnServer(repo, "main", "deploy/ns/workload/NOTE", "someone else's file next to Scribe's\n"); err != nil {
				t.Error(err)
			}
		}
	})
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Path: "deploy"})
	b := testBundle("ns", "a", "x")
	res, err := sink.Publish(context.Background(), publish.ChangeFor(b))
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Stats().Conflicts; c != 1 {
		t.Errorf("%d conflicts, want 1", c)
	}
	work := clone(t, url, "main")
	if head := publishtest.Git(t, work, "rev-parse", "HEAD"); head != res.Commit {
		t.Fatalf("main at %s, publish said %s", head, res.Commit)
	}
	// Scribe regenerated its subtree on the new tip: the foreign commit is
	// its parent and the foreign file, next to Scribe's directory, is kept.
	parent := publishtest.Git(t, work, "log", "-1", "--format=%s", "HEAD^")
	if parent != "server-side edit of deploy/ns/workload/NOTE" {
		t.Errorf("parent of Scribe's commit = %q", parent)
	}
	if data := readFile(t, filepath.Join(work, "deploy/ns/workload/NOTE")); data != "someone else's file next to Scribe's\n" {
		t.Errorf("foreign file = %q", data)
	}
	for _, f := range b.Files {
		if data := readFile(t, filepath.Join(work, "deploy", f.Path)); data != string(f.Data) {
			t.Errorf("%s = %q", f.Path, data)
		}
	}
}

func TestGitBatchesNeverMixWritersWithDifferentIdentities(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "shared", "main")
	g := gitsink.New(t.TempDir())
	sinks := map[string]publish.Sink{
		"team-a": newSink(t, g, gitsink.Options{URL: url, Branch: "main", Identity: "team-a/default", Author: gitsink.Signature{Name: "A", Email: "a@example.com"}}),
		"team-b": newSink(t, g, gitsink.Options{URL: url, Branch: "main", Identity: "team-b/default", Author: gitsink.Signature{Name: "B", Email: "b@example.com"}}),
	}
	var wg sync.WaitGroup
	for ns, sink := range sinks {
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := sink.Publish(context.Background(), publish.ChangeFor(testBundle(ns, fmt.Sprintf("app-%d", i), "x"))); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	work := clone(t, url, "main")
	out := publishtest.Git(t, work, "log", "--format=%ae%x00%B%x01", "--author=@example.com")
	for _, rec := range strings.Split(out, "\x01") {
		author, msg, ok := strings.Cut(strings.TrimSpace(rec), "\x00")
		if !ok {
			continue
		}
		want := "Workload/team-a/"
		if author == "b@example.com" {
			want = "Workload/team-b/"
		}
		for _, tr := range gitsink.Trailers(msg) {
			if !strings.HasPrefix(tr[gitsink.TrailerObject], want) {
				t.Errorf("a commit by %s carries %s", author, tr[gitsink.TrailerObject])
			}
		}
	}
}

// A burst of concurrent changes to one branch becomes a handful of
// commits (the first commits at once, the rest pile up behind the commit
// interval), every change lands, and each caller's Result names a commit
// that carries its change.
func TestGitBurstBecomesAFewCommits(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "burst", "main")
	g := gitsink.New(t.TempDir()) // the default commit interval
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Path: "deploy"})
	const n = 60
	results := make([]publish.Result, n)
	bundles := make([]*render.Bundle, n)
	var wg sync.WaitGroup
	for i := range n {
		bundles[i] = testBundle(fmt.Sprintf("ns%d", i%3), fmt.Sprintf("app-%02d", i), fmt.Sprint("content-", i))
		wg.Go(func() {
			res, err := sink.Publish(context.Background(), publish.ChangeFor(bundles[i]))
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	wg.Wait()
	commits := publishtest.Git(t, "", "--git-dir", srv.BareDir("burst"), "rev-list", "--count", "main", "--author=scribe@scribe.dev")
	// Typically 2: the first change alone, then everything else.
	if c, _ := strconv.Atoi(commits); c < 1 || c > 3 {
		t.Errorf("%d concurrent changes took %s commits, want at most 3", n, commits)
	}
	if got := g.Stats().Commits; strconv.FormatInt(got, 10) != commits {
		t.Errorf("the writer counted %d commits, the branch has %s", got, commits)
	}
	work := clone(t, url, "main")
	for i, b := range bundles {
		for _, f := range b.Files {
			if data := readFile(t, filepath.Join(work, "deploy", f.Path)); data != string(f.Data) {
				t.Errorf("%s = %q, want %q", f.Path, data, f.Data)
			}
		}
		if !results[i].Changed {
			t.Errorf("%s: Result says nothing changed", b.Dir)
		}
		msg := publishtest.Git(t, work, "log", "-1", "--format=%B", results[i].Commit)
		found := false
		for _, tr := range gitsink.Trailers(msg) {
			found = found || tr[gitsink.TrailerObject] == publish.ObjectRef(b.Source)
		}
		if !found {
			t.Errorf("%s: its Result's commit %.12s does not carry it", b.Dir, results[i].Commit)
		}
	}
}

// The commit interval paces only commits that follow each other closely:
// a change to a branch that is idle commits at once, even with an interval
// of an hour; the next change waits for the interval (here: its caller
// gives up first, and nothing of it is written).
func TestGitLoneChangeIsNotPaced(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "lone", "main")
	g := gitsink.New(t.TempDir())
	g.CommitInterval = time.Hour
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Path: "deploy"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := sink.Publish(ctx, publish.ChangeFor(testBundle("ns", "first", "x"))); err != nil {
		t.Fatalf("a lone change waited for the commit interval: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	_, err := sink.Publish(short, publish.ChangeFor(testBundle("ns", "second", "y")))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a change right after a commit was not paced: err = %v", err)
	}
	if c := g.Stats().Commits; c != 1 {
		t.Errorf("%d commits, want 1", c)
	}
}

// TestGitBatchAbandonedByEveryCallerPushesNothingMore: the caller of a
// publish gives up (its process stops, its leadership lost) while the
// push of its batch loses a race. The batch does not try again on the
// new tip: nothing of it reaches the branch, so a retry cannot land after
// what the next leader commits (a custom resource's removal).
func TestGitBatchAbandonedByEveryCallerPushesNothingMore(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "handover", "main")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pushes := 0
	srv.BeforePush(func(repo string) {
		pushes++
		if pushes == 1 {
			// The next leader's removal lands first, and this process stops.
			if _, err := srv.CommitOnServer(repo, "main", "other/removal.txt", "the next leader's commit\n"); err != nil {
				t.Error(err)
			}
			cancel()
		}
	})
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", MaxAttempts: 5, Backoff: 50 * time.Millisecond})
	if _, err := sink.Publish(ctx, publish.ChangeFor(testBundle("ns", "a", "x"))); err == nil {
		t.Fatal("a publish whose caller gave up reported success")
	}
	// The batch runs on after Publish returned: wait until it is done
	// (a later publish to the branch is served by the same writer once
	// the abandoned batch stopped).
	if _, err := sink.Publish(context.Background(), publish.ChangeFor(testBundle("other-ns", "b", "y"))); err != nil {
		t.Fatal(err)
	}
	work := clone(t, url, "main")
	if _, err := os.Stat(filepath.Join(work, "ns")); !os.IsNotExist(err) {
		t.Errorf("the abandoned batch was pushed on the new tip (pushes: %d)", pushes)
	}
}
