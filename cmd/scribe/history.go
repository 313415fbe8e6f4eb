package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/spf13/cobra"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/termtext"
)

// historyFlags are the flags of scribe history.
type historyFlags struct {
	namespace string
	git       string
	branch    string
	path      string
	secretDir string
	output    string
	// maxCommits bounds the commits read.
	maxCommits int
}

func newHistoryCmd() *cobra.Command {
	var f historyFlags
	cmd := &cobra.Command{
		Use:   "history workload NAME -n NAMESPACE --git URL|DIR [--branch B] [--path P] [-o table|json]",
		Short: "List a Workload's past rollouts from the Git history Scribe wrote",
		Long: `History reads the record of a Workload's rollouts back from Git, so nothing
about the past depends on the cluster: every commit Scribe made for the
Workload carries its Scribe-Object trailer, the traffic split its render
routes (the HTTPRoute's weights, or the versions deployed) and, for a
rollback, Scribe's "rollback of VERSION: reason" line.

Each rollout is printed with its version, its outcome (promoted, rolled back,
superseded by a newer version, deleted, or in progress), its start and end
(the commit times), its commits and, when they were merged by a pull
request, the pull request numbers.

--git is a local clone (its branch, or HEAD) or a URL, cloned into a
temporary directory with the credentials scribe publish uses:
--secret-dir and SCRIBE_GIT_USERNAME, SCRIBE_GIT_PASSWORD,
SCRIBE_GIT_TOKEN.

The repository is not trusted: each commit is read once, at most
--max-commits of them (newest first); a rendered file over 4 MiB, or
whose YAML expands beyond 16 MiB, is not read; a commit that cannot be
read is skipped with a warning on stderr, the rest of the history still
shown. Text from the repository (versions, reasons) is printed with
control characters escaped. SIGINT or SIGTERM stops the walk.`,
		Example: `  scribe history workload checkout -n shop --git ./gitops
  scribe history workload checkout -n shop --git https://github.com/acme/gitops --branch main -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 || !strings.EqualFold(args[0], "workload") {
				return &codeError{code: exitError, err: errors.New("want: history workload NAME")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runHistory(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), &f, args[1])
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.namespace, "namespace", "n", "default", "namespace of the Workload")
	fl.StringVar(&f.git, "git", "", "the repository: a local clone, or a URL (https://, ssh://, scp form, file://)")
	fl.StringVar(&f.branch, "branch", "main", "branch to read (a local clone without it: its HEAD)")
	fl.StringVar(&f.path, "path", ".", "path in the repository under which <namespace>/<kind>/<name>/ is written")
	fl.StringVar(&f.secretDir, "secret-dir", "", "with a URL: directory laid out as a mounted Secret: username, password, bearerToken, identity, known_hosts")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	fl.IntVar(&f.maxCommits, "max-commits", defaultHistoryMaxCommits, "read at most this many commits, the newest first")
	return cmd
}

func runHistory(ctx context.Context, w, stderr io.Writer, f *historyFlags, name string) error {
	bad := func(err error) error { return &codeError{code: exitError, err: err} }
	if f.git == "" {
		return bad(errors.New("--git is required: a local clone or the repository's URL"))
	}
	if f.output != "table" && f.output != "json" {
		return bad(fmt.Errorf("-o %q: want table or json", f.output))
	}
	if f.maxCommits < 1 {
		return bad(fmt.Errorf("--max-commits %d: want at least 1", f.maxCommits))
	}
	repoPath, err := cleanRepoPath(f.path)
	if err != nil {
		return bad(err)
	}
	repo, cleanup, err := openHistoryRepo(ctx, f)
	if err != nil {
		return err
	}
	defer cleanup()
	tip, err := historyTip(repo, f.branch)
	if err != nil {
		return err
	}
	src := scribev1.ObjectIdentity{Kind: scribev1.WorkloadKind, Namespace: f.namespace, Name: name}
	walk := newHistoryWalk(repo.Storer, f.maxCommits, src)
	commits, err := walk.workloadCommits(ctx, tip, src, repoPath)
	printWarnings(stderr, walk.warnings)
	if err != nil {
		return err
	}
	return printHistory(w, f.output, rollouts(commits))
}

// printWarnings writes what the walk skipped to stderr, the first
// historyMaxWarnings of them, each on one line with its control
// characters escaped.
func printWarnings(stderr io.Writer, warnings []string) {
	for i, msg := range warnings {
		if i == historyMaxWarnings {
			_, _ = fmt.Fprintf(stderr, "Warning: %d more warnings not shown\n", len(warnings)-i)
			return
		}
		_, _ = fmt.Fprintln(stderr, "Warning:", termtext.Line(msg))
	}
}

// openHistoryRepo opens the local clone --git names, or clones its URL
// into a temporary directory, removed by the cleanup it returns. Either is
// read from storage that reads an object over historyMaxFileBytes only
// when asked to, and then as a stream: nothing inflates a blob whole to
// learn its size.
func openHistoryRepo(ctx context.Context, f *historyFlags) (*git.Repository, func(), error) {
	nothing := func() {}
	if st, err := os.Stat(f.git); err == nil && st.IsDir() {
		repo, err := openBounded(f.git, true)
		if err != nil {
			return nil, nothing, fmt.Errorf("open %s: %w", termtext.Line(f.git), err)
		}
		return repo, nothing, nil
	}
	if err := checkGitURL(f.git); err != nil {
		return nil, nothing, &codeError{code: exitError, err: err}
	}
	data, err := (&publishFlags{secretDir: f.secretDir}).gitSecret(os.Getenv)
	if err != nil {
		return nil, nothing, &codeError{code: exitError, err: err}
	}
	auth, err := gitsink.AuthFromSecret(f.git, data)
	if err != nil {
		return nil, nothing, &codeError{code: exitError, err: err}
	}
	dir, err := os.MkdirTemp("", "scribe-history-")
	if err != nil {
		return nil, nothing, fmt.Errorf("clone %s: %w", redactURL(f.git), err)
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	_, err = git.PlainCloneContext(ctx, dir, true, &git.CloneOptions{
		URL: f.git, Auth: auth, ReferenceName: plumbing.NewBranchReferenceName(f.branch), SingleBranch: true, NoCheckout: true,
	})
	if err != nil {
		cleanup()
		return nil, nothing, fmt.Errorf("clone %s: %w", redactURL(f.git), err)
	}
	repo, err := openBounded(dir, false)
	if err != nil {
		cleanup()
		return nil, nothing, fmt.Errorf("clone %s: %w", redactURL(f.git), err)
	}
	return repo, cleanup, nil
}

// openBounded opens the repository at dir (with detect, or above it; a
// bare one without) on storage that keeps objects over
// historyMaxFileBytes out of memory.
func openBounded(dir string, detect bool) (*git.Repository, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: detect})
	if err != nil {
		return nil, err
	}
	fsStorage, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo, nil
	}
	st := filesystem.NewStorageWithOptions(fsStorage.Filesystem(), cache.NewObjectLRU(16*cache.MiByte),
		filesystem.Options{LargeObjectThreshold: historyMaxFileBytes})
	return git.Open(st, nil)
}

// historyTip is the commit history starts from: the branch, its remote
// tracking branch, or HEAD.
func historyTip(repo *git.Repository, branch string) (plumbing.Hash, error) {
	for _, ref := range []plumbing.ReferenceName{plumbing.NewBranchReferenceName(branch), plumbing.NewRemoteReferenceName("origin", branch)} {
		if r, err := repo.Reference(ref, true); err == nil {
			return r.Hash(), nil
		}
	}
	head, err := repo.Head()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("branch %s not found and no HEAD: %w", branch, err)
	}
	return head.Hash(), nil
}

// pullRequestRef finds a pull request number in a merge commit's subject:
// "Merge pull request #12 from …" (GitHub), "… (#12)" (a squash merge),
// "See merge request …!12" (GitLab).
var pullRequestRef = regexp.MustCompile(`(?:Merge pull request #|\(#|merge request [^\s!]*!)(\d+)`)

// commitBody is a commit message without its subject and Scribe's trailers.
func commitBody(message string) string {
	_, body, _ := strings.Cut(message, "\n")
	var b strings.Builder
	for _, line := range strings.Split(body, "\n") {
		if k, _, ok := strings.Cut(line, ": "); ok && (k == gitsink.TrailerObject || k == gitsink.TrailerGeneration || k == gitsink.TrailerDigest) {
			continue
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimSpace(b.String())
}

// printHistory writes the rollouts as a table, every text from the
// repository in a cell of its own (termtext.CILine: no newline, no tab, no
// control character, and no workflow command should the table reach a
// CI log: a version starts its row), or as JSON whose strings carry no raw control or
// bidirectional character (termtext.JSON).
func printHistory(w io.Writer, format string, rs []rolloutRecord) error {
	if format == "json" {
		if rs == nil {
			rs = []rolloutRecord{}
		}
		data, err := json.MarshalIndent(rs, "", "  ")
		if err != nil {
			return fmt.Errorf("encode the history: %w", err)
		}
		_, err = w.Write(append(termtext.JSON(data), '\n'))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "VERSION\tOUTCOME\tSTART\tEND\tCOMMITS\tPULL REQUESTS\tREASON")
	for _, r := range rs {
		end := "-"
		if !r.End.IsZero() {
			end = r.End.Format(time.RFC3339)
		}
		short := make([]string, len(r.Commits))
		for i, c := range r.Commits {
			short[i] = c[:min(len(c), 7)]
		}
		prs := make([]string, len(r.PullRequests))
		for i, n := range r.PullRequests {
			prs[i] = "#" + strconv.Itoa(n)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash(termtext.CILine(r.Version)), termtext.CILine(r.Outcome), r.Start.Format(time.RFC3339), end,
			termtext.CILine(strings.Join(short, ",")), dash(strings.Join(prs, ",")), dash(termtext.CILine(r.Reason)))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the history: %w", err)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
