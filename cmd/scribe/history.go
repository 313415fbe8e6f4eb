package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
)

// historyFlags are the flags of scribe history.
type historyFlags struct {
	namespace string
	git       string
	branch    string
	path      string
	secretDir string
	output    string
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

--git is a local clone (its branch, or HEAD) or a URL, read with the
credentials scribe publish uses: --secret-dir and SCRIBE_GIT_USERNAME,
SCRIBE_GIT_PASSWORD, SCRIBE_GIT_TOKEN.`,
		Example: `  scribe history workload checkout -n shop --git ./gitops
  scribe history workload checkout -n shop --git https://github.com/acme/gitops --branch main -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 || !strings.EqualFold(args[0], "workload") {
				return &codeError{code: exitError, err: errors.New("want: history workload NAME")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runHistory(cmd.Context(), cmd.OutOrStdout(), &f, args[1])
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.namespace, "namespace", "n", "default", "namespace of the Workload")
	fl.StringVar(&f.git, "git", "", "the repository: a local clone, or a URL (https://, ssh://, scp form, file://)")
	fl.StringVar(&f.branch, "branch", "main", "branch to read (a local clone without it: its HEAD)")
	fl.StringVar(&f.path, "path", ".", "path in the repository under which <namespace>/<kind>/<name>/ is written")
	fl.StringVar(&f.secretDir, "secret-dir", "", "with a URL: directory laid out as a mounted Secret: username, password, bearerToken, identity, known_hosts")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	return cmd
}

func runHistory(ctx context.Context, w io.Writer, f *historyFlags, name string) error {
	bad := func(err error) error { return &codeError{code: exitError, err: err} }
	if f.git == "" {
		return bad(errors.New("--git is required: a local clone or the repository's URL"))
	}
	if f.output != "table" && f.output != "json" {
		return bad(fmt.Errorf("-o %q: want table or json", f.output))
	}
	repoPath, err := cleanRepoPath(f.path)
	if err != nil {
		return bad(err)
	}
	repo, err := openHistoryRepo(ctx, f)
	if err != nil {
		return err
	}
	tip, err := historyTip(repo, f.branch)
	if err != nil {
		return err
	}
	src := scribev1.ObjectIdentity{Kind: scribev1.WorkloadKind, Namespace: f.namespace, Name: name}
	commits, err := workloadCommits(ctx, repo, tip, src, repoPath)
	if err != nil {
		return err
	}
	return printHistory(w, f.output, rollouts(commits))
}

// openHistoryRepo opens the local clone --git names, or clones its URL
// into memory.
func openHistoryRepo(ctx context.Context, f *historyFlags) (*git.Repository, error) {
	if st, err := os.Stat(f.git); err == nil && st.IsDir() {
		repo, err := git.PlainOpenWithOptions(f.git, &git.PlainOpenOptions{DetectDotGit: true})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", f.git, err)
		}
		return repo, nil
	}
	if err := checkGitURL(f.git); err != nil {
		return nil, &codeError{code: exitError, err: err}
	}
	data, err := (&publishFlags{secretDir: f.secretDir}).gitSecret(os.Getenv)
	if err != nil {
		return nil, &codeError{code: exitError, err: err}
	}
	auth, err := gitsink.AuthFromSecret(f.git, data)
	if err != nil {
		return nil, &codeError{code: exitError, err: err}
	}
	repo, err := git.CloneContext(ctx, memory.NewStorage(), nil, &git.CloneOptions{
		URL: f.git, Auth: auth, ReferenceName: plumbing.NewBranchReferenceName(f.branch), SingleBranch: true, NoCheckout: true,
	})
	if err != nil {
		return nil, fmt.Errorf("clone %s: %w", redactURL(f.git), err)
	}
	return repo, nil
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

// workloadCommits are the commits reachable from tip that carry src's
// trailer, oldest first, each with the traffic its tree routes.
func workloadCommits(ctx context.Context, repo *git.Repository, tip plumbing.Hash, src scribev1.ObjectIdentity, repoPath string) ([]historyCommit, error) {
	iter, err := repo.Log(&git.LogOptions{From: tip, Order: git.LogOrderCommitterTime})
	if err != nil {
		return nil, fmt.Errorf("read the log: %w", err)
	}
	ref := publish.ObjectRef(src)
	dir := path.Join(strings.TrimPrefix(repoPath, "."), publish.OwnedDir(src))
	dir = strings.TrimPrefix(dir, "/")
	var ours []*object.Commit
	prs := map[plumbing.Hash]int{}
	err = iter.ForEach(func(c *object.Commit) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		subject, _, _ := strings.Cut(c.Message, "\n")
		if m := pullRequestRef.FindStringSubmatch(subject); m != nil {
			n, _ := strconv.Atoi(m[1])
			if c.NumParents() >= 2 {
				if err := markMerged(c, n, prs); err != nil {
					return err
				}
			} else if _, ok := prs[c.Hash]; !ok {
				prs[c.Hash] = n
			}
		}
		for _, t := range gitsink.Trailers(c.Message) {
			if t[gitsink.TrailerObject] == ref {
				ours = append(ours, c)
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the log: %w", err)
	}
	out := make([]historyCommit, 0, len(ours))
	for i := len(ours) - 1; i >= 0; i-- {
		c := ours[i]
		hc := historyCommit{SHA: c.Hash.String(), Time: c.Committer.When.UTC(), Message: commitBody(c.Message), PullRequest: prs[c.Hash]}
		tree, err := c.Tree()
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", c.Hash, err)
		}
		sub, err := tree.Tree(dir)
		switch {
		case errors.Is(err, object.ErrDirectoryNotFound):
			hc.Deleted = true
		case err != nil:
			return nil, fmt.Errorf("commit %s: %s: %w", c.Hash, dir, err)
		default:
			if hc.Traffic, err = renderedTraffic(sub, src.Name); err != nil {
				return nil, fmt.Errorf("commit %s: %w", c.Hash, err)
			}
		}
		out = append(out, hc)
	}
	return out, nil
}

// markMerged records n as the pull request of the commits merge brought in:
// its second parent and that parent's first-parent ancestors not already
// on its first parent.
func markMerged(merge *object.Commit, n int, prs map[plumbing.Hash]int) error {
	base, err := merge.Parent(0)
	if err != nil {
		return fmt.Errorf("merge %s: %w", merge.Hash, err)
	}
	c, err := merge.Parent(1)
	if err != nil {
		return fmt.Errorf("merge %s: %w", merge.Hash, err)
	}
	for c != nil {
		if on, err := c.IsAncestor(base); err != nil || on {
			return err
		}
		if _, ok := prs[c.Hash]; !ok {
			prs[c.Hash] = n
		}
		if c.NumParents() == 0 {
			return nil
		}
		if c, err = c.Parent(0); err != nil {
			return fmt.Errorf("merge %s: %w", merge.Hash, err)
		}
	}
	return nil
}

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

// renderedTraffic is the split a Workload's rendered directory routes: the
// weights of its HTTPRoutes' backends (Services NAME-VERSION), or, with
// no route, every version it deploys (Deployments NAME-VERSION) at an
// equal share.
func renderedTraffic(dir *object.Tree, name string) ([]versionWeight, error) {
	var routed, deployed []versionWeight
	for _, e := range dir.Entries {
		if !e.Mode.IsFile() {
			continue
		}
		isRoute := strings.HasPrefix(e.Name, "httproute-")
		isDeployment := strings.HasPrefix(e.Name, "deployment-"+name+"-")
		if !isRoute && !isDeployment {
			continue
		}
		f, err := dir.File(e.Name)
		if err != nil {
			return nil, err
		}
		text, err := f.Contents()
		if err != nil {
			return nil, err
		}
		var obj struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Rules []struct {
					BackendRefs []struct {
						Name   string `json:"name"`
						Weight *int32 `json:"weight"`
					} `json:"backendRefs"`
				} `json:"rules"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
		if isDeployment {
			deployed = append(deployed, versionWeight{Version: strings.TrimPrefix(obj.Metadata.Name, name+"-")})
			continue
		}
		if len(routed) > 0 || len(obj.Spec.Rules) == 0 {
			continue // the first rule of the first route tells the split
		}
		for _, b := range obj.Spec.Rules[0].BackendRefs {
			v, ok := strings.CutPrefix(b.Name, name+"-")
			if !ok {
				continue
			}
			w := int32(1)
			if b.Weight != nil {
				w = *b.Weight
			}
			routed = append(routed, versionWeight{Version: v, Weight: w})
		}
	}
	if len(routed) > 0 {
		return routed, nil
	}
	for i := range deployed {
		deployed[i].Weight = int32(100 / len(deployed))
	}
	return deployed, nil
}

func printHistory(w io.Writer, format string, rs []rolloutRecord) error {
	if format == "json" {
		if rs == nil {
			rs = []rolloutRecord{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rs)
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
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Version, r.Outcome, r.Start.Format(time.RFC3339), end,
			strings.Join(short, ","), dash(strings.Join(prs, ",")), dash(r.Reason))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
