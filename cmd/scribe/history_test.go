package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

func split(vw ...any) []versionWeight {
	var out []versionWeight
	for i := 0; i < len(vw); i += 2 {
		out = append(out, versionWeight{Version: vw[i].(string), Weight: int32(vw[i+1].(int))})
	}
	return out
}

func TestHistoryRolloutsFromCommits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		commits []historyCommit
		want    []rolloutRecord
	}{{
		name: "a first version is promoted in its own commit, then a canary walks its steps to promotion",
		commits: []historyCommit{
			{SHA: "a1", Time: at(0), Traffic: split("v1", 100)},
			{SHA: "a2", Time: at(1), Traffic: split("v1", 100, "v2", 0)},
			{SHA: "a3", Time: at(2), Traffic: split("v1", 90, "v2", 10)},
			{SHA: "a4", Time: at(5), Traffic: split("v1", 50, "v2", 50)},
			{SHA: "a5", Time: at(9), Traffic: split("v2", 100)},
			{SHA: "a6", Time: at(20), Traffic: split("v2", 100)}, // a decommission: no rollout
		},
		want: []rolloutRecord{
			{Version: "v1", Outcome: outcomePromoted, Start: at(0), End: at(0), Commits: []string{"a1"}},
			{Version: "v2", Outcome: outcomePromoted, Start: at(1), End: at(9), Commits: []string{"a2", "a3", "a4", "a5"}},
		},
	}, {
		name: "a rollback names its reason from Scribe's message",
		commits: []historyCommit{
			{SHA: "b1", Time: at(0), Traffic: split("v1", 100)},
			{SHA: "b2", Time: at(1), Traffic: split("v1", 90, "v2", 10)},
			{SHA: "b3", Time: at(3), Traffic: split("v1", 100), Message: "rollback of v2: errors: 0.2 > 0.05\n\nStep 1 held 2m."},
		},
		want: []rolloutRecord{
			{Version: "v1", Outcome: outcomePromoted, Start: at(0), End: at(0), Commits: []string{"b1"}},
			{Version: "v2", Outcome: outcomeRolledBack, Start: at(1), End: at(3), Commits: []string{"b2", "b3"}, Reason: "errors: 0.2 > 0.05"},
		},
	}, {
		name: "a newer version supersedes the canary and is still in progress",
		commits: []historyCommit{
			{SHA: "c1", Time: at(0), Traffic: split("v1", 100)},
			{SHA: "c2", Time: at(1), Traffic: split("v1", 90, "v2", 10), PullRequest: 7},
			{SHA: "c3", Time: at(2), Traffic: split("v1", 90, "v3", 10), PullRequest: 8},
		},
		want: []rolloutRecord{
			{Version: "v1", Outcome: outcomePromoted, Start: at(0), End: at(0), Commits: []string{"c1"}},
			{Version: "v2", Outcome: outcomeSuperseded, Start: at(1), End: at(2), Commits: []string{"c2"}, PullRequests: []int{7}},
			{Version: "v3", Outcome: outcomeInProgress, Start: at(2), Commits: []string{"c3"}, PullRequests: []int{8}},
		},
	}, {
		name: "a deletion ends the rollout in flight",
		commits: []historyCommit{
			{SHA: "d1", Time: at(0), Traffic: split("v1", 100)},
			{SHA: "d2", Time: at(1), Traffic: split("v1", 90, "v2", 10)},
			{SHA: "d3", Time: at(2), Deleted: true},
		},
		want: []rolloutRecord{
			{Version: "v1", Outcome: outcomePromoted, Start: at(0), End: at(0), Commits: []string{"d1"}},
			{Version: "v2", Outcome: outcomeDeleted, Start: at(1), End: at(2), Commits: []string{"d2", "d3"}},
		},
	}, {
		name: "versions at weight 0 take no traffic: a rolled-back version left routed at 0, an older version kept in spec",
		commits: []historyCommit{
			{SHA: "e1", Time: at(0), Traffic: split("v1", 0, "v2", 100)},
			{SHA: "e2", Time: at(1), Traffic: split("v1", 0, "v2", 90, "v3", 10)},
			{SHA: "e3", Time: at(2), Traffic: split("v1", 0, "v2", 100, "v3", 0), Message: "rollback of v3: restarts: 4 > 2"},
			{SHA: "e4", Time: at(3), Traffic: split("v1", 0, "v2", 100, "v3", 0)},
			{SHA: "e5", Time: at(4), Traffic: split("v2", 100)},
		},
		want: []rolloutRecord{
			{Version: "v2", Outcome: outcomePromoted, Start: at(0), End: at(0), Commits: []string{"e1"}},
			{Version: "v3", Outcome: outcomeRolledBack, Start: at(1), End: at(2), Commits: []string{"e2", "e3"}, Reason: "restarts: 4 > 2"},
		},
	}, {
		name:    "no commits, no rollouts",
		commits: nil,
		want:    nil,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rollouts(tc.commits); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rollouts:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// historyRepo builds a repository whose main branch holds the Workload
// shop/checkout's rollouts: v1 first, v2 through two canary steps, merged
// by pull request #4, then v3 rolled back.
func historyRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	minute := 0
	sig := func() *object.Signature {
		minute++
		return &object.Signature{Name: "Scribe", Email: "scribe@scribe.dev", When: at(minute)}
	}
	route := func(vw ...any) string {
		var b strings.Builder
		b.WriteString("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: checkout\n  namespace: shop\nspec:\n  rules:\n  - backendRefs:\n")
		for _, v := range split(vw...) {
			fmt.Fprintf(&b, "    - kind: Service\n      name: checkout-%s\n      port: 80\n      weight: %d\n", v.Version, v.Weight)
		}
		return b.String()
	}
	commit := func(subject, body, routeYAML string, gen int) plumbing.Hash {
		t.Helper()
		if routeYAML != "" {
			p := filepath.Join(dir, "clusters", "shop", "workload", "checkout", "httproute-checkout.yaml")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(routeYAML), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := wt.Add("."); err != nil {
			t.Fatal(err)
		}
		msg := subject + "\n\n"
		if body != "" {
			msg += body + "\n\n"
		}
		msg += fmt.Sprintf("Scribe-Object: Workload/shop/checkout\nScribe-Generation: %d\nScribe-Digest: sha256:%064d\n", gen, gen)
		h, err := wt.Commit(msg, &git.CommitOptions{Author: sig(), AllowEmptyCommits: true})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	other := func(subject string) {
		t.Helper()
		p := filepath.Join(dir, "README.md")
		if err := os.WriteFile(p, []byte(subject), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add("README.md"); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Commit(subject, &git.CommitOptions{Author: sig()}); err != nil {
			t.Fatal(err)
		}
	}
	commit("scribe: update Workload shop/checkout", "", route("v1", 100), 1)
	other("docs: a commit of someone else")
	// v2's steps on a pull request branch, merged into main.
	base, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("scribe/checkout"), Create: true}); err != nil {
		t.Fatal(err)
	}
	commit("scribe: update Workload shop/checkout", "", route("v1", 90, "v2", 10), 2)
	head := commit("scribe: update Workload shop/checkout", "Step 1 held 5m; checks: errors=0.01.", route("v1", 50, "v2", 50), 2)
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("master")}); err != nil {
		if err := wt.Checkout(&git.CheckoutOptions{Hash: base.Hash()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := wt.Commit("Merge pull request #4 from acme/scribe/checkout\n", &git.CommitOptions{Author: sig(), Parents: []plumbing.Hash{base.Hash(), head}, AllowEmptyCommits: true}); err != nil {
		t.Fatal(err)
	}
	if err := wt.Reset(&git.ResetOptions{Mode: git.HardReset}); err != nil {
		t.Fatal(err)
	}
	commit("scribe: update Workload shop/checkout", "", route("v2", 100), 3)
	commit("scribe: update Workload shop/checkout", "", route("v2", 90, "v3", 10), 4)
	commit("scribe: update Workload shop/checkout", "rollback of v3: errors: 0.3 > 0.05 (3 failed rounds)\n\nStep 1 held 2m.", route("v2", 100), 4)
	return dir
}

func TestHistoryPrintsTheRolloutsGitRecords(t *testing.T) {
	dir := historyRepo(t)
	for _, tc := range []struct {
		name, golden string
		args         []string
	}{
		{"a table", "workload.txt", nil},
		{"json", "workload.json", []string{"-o", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"history", "workload", "checkout", "-n", "shop", "--git", dir, "--branch", "master", "--path", "clusters"}, tc.args...)
			if code := run(context.Background(), args, &out, &errOut); code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			// Commit hashes depend on nothing but the content and times
			// above, so the golden holds them.
			path := filepath.Join("testdata", "history", tc.golden)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (go test -run TestHistory -update writes it): %v", err)
			}
			if out.String() != string(want) {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
			}
		})
	}
}

func TestHistoryRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no repository", []string{"history", "workload", "x"}, "--git is required"},
		{"another kind", []string{"history", "pipeline", "x", "--git", "."}, "want: history workload NAME"},
		{"an unknown format", []string{"history", "workload", "x", "--git", ".", "-o", "yaml"}, `-o "yaml"`},
		{"a URL with credentials", []string{"history", "workload", "x", "--git", "https://user:secret@example.com/r.git"}, "credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), tc.args, &out, &errOut); code != exitError {
				t.Fatalf("exit %d, want %d: %s", code, exitError, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.want) || strings.Contains(errOut.String(), ":secret@") {
				t.Errorf("stderr %q, want it to say %q (and no secret)", errOut.String(), tc.want)
			}
		})
	}
}

// TestHistoryReadsTheCommitsScribePublishes: what scribe publish commits
// for a Workload walking a canary (its status carrying each step's split)
// reads back, over the repository's URL, as one rollout promoted with one
// commit per step.
func TestHistoryReadsTheCommitsScribePublishes(t *testing.T) {
	clearGitEnv(t)
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "hist", "main")
	fixture, err := os.ReadFile(canary)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, ok := strings.Cut(string(fixture), "\nstatus:\n")
	if !ok {
		t.Fatalf("%s has no status", canary)
	}
	cache := t.TempDir()
	for i, status := range []string{
		"  phase: Healthy\n  stableVersion: v1\n  step: -1\n  traffic:\n    - {version: v1, weight: 100}\n",
		"  phase: Progressing\n  stableVersion: v1\n  canaryVersion: v2\n  step: 0\n  traffic:\n    - {version: v1, weight: 90}\n    - {version: v2, weight: 10}\n",
		"  phase: Progressing\n  stableVersion: v1\n  canaryVersion: v2\n  step: 1\n  traffic:\n    - {version: v1, weight: 50}\n    - {version: v2, weight: 50}\n",
		"  phase: Progressing\n  stableVersion: v2\n  step: -1\n  traffic:\n    - {version: v2, weight: 100}\n",
	} {
		file := filepath.Join(t.TempDir(), "workload.yaml")
		if err := os.WriteFile(file, []byte(spec+"\nstatus:\n"+status), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := scribe(t, "publish", "-f", file, "--git", url, "--path", "clusters/dev", "--cache-dir", cache); code != exitOK {
			t.Fatalf("publish %d: exit %d: %s", i, code, stderr)
		}
	}
	code, stdout, stderr := scribe(t, "history", "workload", "checkout", "-n", "shop", "--git", url, "--path", "clusters/dev", "-o", "json")
	if code != exitOK {
		t.Fatalf("history: exit %d: %s", code, stderr)
	}
	var got []rolloutRecord
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	var summary []string
	for _, r := range got {
		summary = append(summary, fmt.Sprintf("%s %s %d", r.Version, r.Outcome, len(r.Commits)))
	}
	if want := []string{"v1 promoted 1", "v2 promoted 3"}; !reflect.DeepEqual(summary, want) {
		t.Errorf("rollouts %v, want %v\n%s", summary, want, stdout)
	}
}
