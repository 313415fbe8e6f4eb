package gitsink_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
	"github.com/scribe-gitops/scribe/render"
)

// testBundle is a Workload's bundle of one ConfigMap holding content.
func testBundle(ns, name, content string) *render.Bundle {
	return publishtest.Bundle(ns, name, content)
}

// clone checks out url@branch with the git CLI and returns the work tree.
func clone(t *testing.T, url, branch string) string {
	t.Helper()
	dir := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", "--branch", branch, url, dir)
	return dir
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newSink(t *testing.T, g *gitsink.Git, opts gitsink.Options) publish.Sink {
	t.Helper()
	s, err := g.Sink(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGitPublishWritesOwnedPathsAndTrailers(t *testing.T) {
	ctx := context.Background()
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	// A foreign file inside the repository path, next to Scribe's.
	work := clone(t, url, "main")
	if err := os.MkdirAll(filepath.Join(work, "clusters/team-a/workload"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "clusters/team-a/workload/NOTES.md"), []byte("hands off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	publishtest.Git(t, work, "add", ".")
	publishtest.Git(t, work, "commit", "--quiet", "-m", "foreign notes")
	publishtest.Git(t, work, "push", "--quiet", "origin", "main")

	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Path: "clusters", Author: gitsink.Signature{Name: "Scribe Bot", Email: "bot@example.com"}})
	b := testBundle("team-a", "web", "one")
	b.Generation = 7
	res, err := sink.Publish(ctx, publish.ChangeFor(b))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || len(res.Commit) != 40 || res.Revision != "main@sha1:"+res.Commit {
		t.Fatalf("result = %+v", res)
	}
	got := clone(t, url, "main")
	if head := publishtest.Git(t, got, "rev-parse", "HEAD"); head != res.Commit {
		t.Fatalf("branch at %s, publish said %s", head, res.Commit)
	}
	for _, f := range b.Files {
		if data := readFile(t, filepath.Join(got, "clusters", f.Path)); data != string(f.Data) {
			t.Errorf("%s = %q, want %q", f.Path, data, f.Data)
		}
	}
	if data := readFile(t, filepath.Join(got, "clusters/team-a/workload/NOTES.md")); data != "hands off\n" {
		t.Errorf("foreign file changed: %q", data)
	}
	msg := publishtest.Git(t, got, "log", "-1", "--format=%B")
	trailers := gitsink.Trailers(msg)
	want := map[string]string{gitsink.TrailerObject: "Workload/team-a/web", gitsink.TrailerGeneration: "7", gitsink.TrailerDigest: b.Digest}
	if len(trailers) != 1 || fmt.Sprint(trailers[0]) != fmt.Sprint(want) {
		t.Errorf("trailers = %v, want %v\nmessage:\n%s", trailers, want, msg)
	}
	// git itself parses the same trailers.
	if out := publishtest.Git(t, got, "log", "-1", "--format=%(trailers:key=Scribe-Object,valueonly)"); out != "Workload/team-a/web" {
		t.Errorf("git interprets trailers as %q", out)
	}
	if out := publishtest.Git(t, got, "log", "-1", "--format=%an <%ae>|%cn <%ce>"); out != "Scribe Bot <bot@example.com>|Scribe Bot <bot@example.com>" {
		t.Errorf("author|committer = %q", out)
	}
	publishtest.Git(t, got, "fsck", "--strict", "--no-progress")

	// The same bundle again: no commit.
	again, err := sink.Publish(ctx, publish.ChangeFor(b))
	if err != nil {
		t.Fatal(err)
	}
	if again.Changed || again.Commit != res.Commit {
		t.Fatalf("republish of equal content = %+v, want unchanged at %s", again, res.Commit)
	}
}

func TestGitPublishReplacesTheWholeOwnedSubtreeAndDeletes(t *testing.T) {
	ctx := context.Background()
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main"})

	web := testBundle("team-a", "web", "one")
	api := testBundle("team-a", "api", "one")
	if _, err := sink.Publish(ctx, publish.ChangeFor(web), publish.ChangeFor(api)); err != nil {
		t.Fatal(err)
	}
	// A new render of web drops a file: it must disappear from the repo.
	web2 := testBundle("team-a", "web", "two")
	web2.Files = web2.Files[1:]
	if _, err := sink.Publish(ctx, publish.ChangeFor(web2)); err != nil {
		t.Fatal(err)
	}
	got := clone(t, url, "main")
	if _, err := os.Stat(filepath.Join(got, "team-a/workload/web/.scribe.json")); !os.IsNotExist(err) {
		t.Errorf("stale file of the previous render survived: %v", err)
	}
	if data := readFile(t, filepath.Join(got, "team-a/workload/web/configmap-web.yaml")); !strings.Contains(data, "v: two") {
		t.Errorf("web not updated: %q", data)
	}

	res, err := sink.Publish(ctx, publish.DeleteFor(web.Source, 3))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed {
		t.Fatal("delete reported no change")
	}
	got = clone(t, url, "main")
	for _, p := range []string{"team-a/workload/web", "team-a/workload/web.sync.yaml"} {
		if _, err := os.Stat(filepath.Join(got, p)); !os.IsNotExist(err) {
			t.Errorf("%s survived the delete", p)
		}
	}
	if _, err := os.Stat(filepath.Join(got, "team-a/workload/api/kustomization.yaml")); err != nil {
		t.Errorf("delete of web touched api: %v", err)
	}
	if msg := publishtest.Git(t, got, "log", "-1", "--format=%s"); msg != "scribe: delete Workload team-a/web" {
		t.Errorf("subject = %q", msg)
	}
	// Deleting what is not there is no commit.
	res, err = sink.Publish(ctx, publish.DeleteFor(web.Source, 3))
	if err != nil || res.Changed {
		t.Fatalf("second delete = %+v, %v; want unchanged", res, err)
	}
}

func TestGitPublishIntoEmptyRepositoryCreatesTheBranch(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	publishtest.Git(t, "", "init", "--quiet", "--bare", srv.BareDir("empty"))
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: srv.RepoURL("empty"), Branch: "deploy"})
	res, err := sink.Publish(context.Background(), publish.ChangeFor(testBundle("ns", "a", "x")))
	if err != nil {
		t.Fatal(err)
	}
	got := clone(t, srv.RepoURL("empty"), "deploy")
	if head := publishtest.Git(t, got, "rev-parse", "HEAD"); head != res.Commit {
		t.Fatalf("deploy at %s, want %s", head, res.Commit)
	}
}

func TestGitPublishRejectsChangesOutsideOwnedPaths(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main"})
	before := srv.Requests()
	b := testBundle("ns", "a", "x")
	b.Files = append(b.Files, render.File{Path: "ns/workload/b/evil.yaml", Data: []byte("x")})
	_, err := sink.Publish(context.Background(), publish.ChangeFor(b))
	if err == nil || !strings.Contains(err.Error(), `file "ns/workload/b/evil.yaml" is outside the owned paths`) {
		t.Fatalf("err = %v", err)
	}
	if publish.ReasonOf(err) != publish.ReasonInvalid {
		t.Errorf("reason = %s", publish.ReasonOf(err))
	}
	if srv.Requests() != before {
		t.Error("an invalid change reached the server")
	}
}

func TestGitPublishTemplateMessage(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main",
		MessageTemplate: "deploy({{range .Changes}}{{.Namespace}}/{{.Name}}@{{.Generation}}{{end}}) on {{.Branch}}"})
	if _, err := sink.Publish(context.Background(), publish.ChangeFor(testBundle("ns", "a", "x"))); err != nil {
		t.Fatal(err)
	}
	got := clone(t, url, "main")
	msg := publishtest.Git(t, got, "log", "-1", "--format=%B")
	if !strings.HasPrefix(msg, "deploy(ns/a@1) on main\n\nScribe-Object: Workload/ns/a\n") {
		t.Errorf("message = %q", msg)
	}
	if _, err := g.Sink(gitsink.Options{URL: url, Branch: "main", MessageTemplate: "{{.Nope"}); err == nil {
		t.Error("a broken template was accepted")
	}
}

func TestDescendsTracksScribesPathsAcrossOtherCommits(t *testing.T) {
	ctx := context.Background()
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	opts := gitsink.Options{URL: url, Branch: "main", Path: "deploy"}
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, opts)
	b := testBundle("ns", "web", "one")
	initial := publishtest.Git(t, "", "--git-dir", srv.BareDir("exp"), "rev-parse", "main")
	first, err := sink.Publish(ctx, publish.ChangeFor(b))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := srv.CommitOnServer("exp", "main", "other/file.txt", "x\n")
	if err != nil {
		t.Fatal(err)
	}
	// A fresh cache has to fetch the foreign commit to answer.
	fresh := gitsink.New(t.TempDir())
	for _, tc := range []struct {
		name          string
		g             *gitsink.Git
		ours, applied string
		want          bool
	}{
		{"same commit", g, first.Commit, first.Commit, true},
		{"later foreign commit keeps our path", g, first.Commit, foreign, true},
		{"from a fresh cache", fresh, first.Commit, foreign, true},
		{"an applied commit without our paths does not carry ours", g, first.Commit, initial, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.g.Descends(ctx, opts, b.Source, tc.ours, tc.applied)
			if err != nil || got != tc.want {
				t.Fatalf("Descends = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	second, err := sink.Publish(ctx, publish.ChangeFor(testBundle("ns", "web", "two")))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := g.Descends(ctx, opts, b.Source, first.Commit, second.Commit); err != nil || ok {
		t.Fatalf("a commit that changed our path counts as carrying the old one: %v, %v", ok, err)
	}
}

func TestGitDeleteOnAMissingBranchCreatesNothing(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "never"})
	b := testBundle("ns", "a", "x")
	res, err := sink.Publish(context.Background(), publish.DeleteFor(b.Source, 1))
	if err != nil || res.Changed {
		t.Fatalf("delete on a missing branch = %+v, %v", res, err)
	}
	if out, _ := publishtest.RunGit("", "--git-dir", srv.BareDir("exp"), "rev-parse", "--verify", "--quiet", "refs/heads/never"); out != "" {
		t.Fatalf("the delete created branch never at %s", out)
	}
}

func TestGitPublishNeverReplacesSomeoneElsesFileWithADirectory(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	if _, err := srv.CommitOnServer("exp", "main", "tools", "a file named like a namespace\n"); err != nil {
		t.Fatal(err)
	}
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main"})
	_, err := sink.Publish(context.Background(), publish.ChangeFor(testBundle("tools", "a", "x")))
	if err == nil || !strings.Contains(err.Error(), `"tools" is a file of someone else`) {
		t.Fatalf("err = %v", err)
	}
	work := clone(t, url, "main")
	if data := readFile(t, filepath.Join(work, "tools")); data != "a file named like a namespace\n" {
		t.Fatalf("the file was changed: %q", data)
	}
}

func TestGitSyncIndexListsExactlyTheSyncFiles(t *testing.T) {
	ctx := context.Background()
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	g := gitsink.New(t.TempDir())
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Path: "clusters/dev", SyncIndex: true})
	a, b := testBundle("team-a", "web", "x"), testBundle("team-b", "api", "x")
	if _, err := sink.Publish(ctx, publish.ChangeFor(a), publish.ChangeFor(b)); err != nil {
		t.Fatal(err)
	}
	work := clone(t, url, "main")
	want := "resources:\n- team-a/workload/web.sync.yaml\n- team-b/workload/api.sync.yaml\n"
	if got := readFile(t, filepath.Join(work, "clusters/dev/kustomization.yaml")); !strings.HasSuffix(got, want) {
		t.Fatalf("index = %q, want it to end with %q", got, want)
	}
	// kustomize applies exactly the two sync objects from the index.
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(work, "clusters/dev"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range res.Resources() {
		names = append(names, r.GetKind()+"/"+r.GetName())
	}
	if fmt.Sprint(names) != "[Kustomization/web Kustomization/api]" {
		t.Fatalf("the index applies %v", names)
	}
	if _, err := sink.Publish(ctx, publish.DeleteFor(a.Source, 2)); err != nil {
		t.Fatal(err)
	}
	work = clone(t, url, "main")
	if got := readFile(t, filepath.Join(work, "clusters/dev/kustomization.yaml")); !strings.HasSuffix(got, "resources:\n- team-b/workload/api.sync.yaml\n") {
		t.Fatalf("index after delete = %q", got)
	}
	if _, err := sink.Publish(ctx, publish.DeleteFor(b.Source, 2)); err != nil {
		t.Fatal(err)
	}
	// The last object gone: the index stays, empty, so the path still
	// exists and the root applier object prunes instead of failing.
	work = clone(t, url, "main")
	if got := readFile(t, filepath.Join(work, "clusters/dev/kustomization.yaml")); !strings.HasSuffix(got, "resources: []\n") {
		t.Fatalf("index after the last delete = %q", got)
	}
}
