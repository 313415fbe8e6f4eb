package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/termtext"
	"github.com/scribe-gitops/scribe/render"
)

func newDiffCmd() *cobra.Command {
	var f renderFlags
	var dir string
	var allowRemovals bool
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR|- -d DIR",
		Short: "Show how the rendered tree differs from a checked-out repository",
		Long: `Diff renders the custom resources and compares the result with the paths
Scribe owns in DIR (<namespace>/<kind>/<name>/ and its .sync.yaml under --path).
Nothing outside DIR is read: every path is opened below DIR, and a symbolic
link that leads out of DIR is an error, never followed.

A custom resource whose tree is in DIR (a <namespace>/<kind>/<name>/
directory with Scribe's .scribe.json) but that is not in -f was removed:
its tree would be deleted, and diff says so, one line each; it counts as a
change unless --allow-removals is given (then it is still reported). The
stage Workloads of a Pipeline in -f (<pipeline>-<stage>) are its own, not
removed. A tree is known by its name only, so such a stage tree is
reported on a line of its own ("stage:"), not counted as a change: a
Workload of that name removed from -f would leave its tree to the
Pipeline's stage. Pipelines, Repositories and TenantPolicies in -f are
validated, not rendered.

Text from the input and the checkout (paths, names, file contents) is
printed with control characters escaped, and no line of it can start a
CI workflow command ("::error::").

Exit code 0: no change; 1: changes; 2: error.`,
		Example: `  # In CI: does the checked-out branch hold what the CRs render?
  scribe diff -f deploy/ -d .

  # The repository's Scribe tree is under clusters/prod
  scribe diff -f deploy/ -d fleet --path clusters/prod

  # Custom resources are being retired: report their trees, do not fail
  scribe diff -f deploy/ -d fleet --allow-removals`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			crs, err := f.checkAll(cmd.Context())
			if err != nil {
				return &codeError{code: exitError, err: err}
			}
			var bundles []*render.Bundle
			kept := map[string]string{}
			for _, c := range crs {
				if c.bundle != nil {
					bundles = append(bundles, c.bundle)
				}
				if p, ok := c.typed.(*scribev1.Pipeline); ok {
					for _, st := range p.Spec.Stages {
						kept[path.Join(p.Namespace, strings.ToLower(scribev1.WorkloadKind), controller.StageWorkloadName(p.Name, st.Name))] = fmt.Sprintf("Pipeline %s/%s's stage %s", p.Namespace, p.Name, st.Name)
					}
				}
			}
			changed, err := diffBundles(cmd.Context(), cmd.OutOrStdout(), dir, f.path, bundles, diffRemovals{kept: kept, allowed: allowRemovals})
			if err != nil {
				return &codeError{code: exitError, err: err}
			}
			if changed {
				return &codeError{code: exitChanges}
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&dir, "dir", "d", "", "checked-out repository to compare with")
	cmd.Flags().BoolVar(&allowRemovals, "allow-removals", false, "report the trees of custom resources not in -f without counting them as changes (exit 0 if nothing else differs)")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// diffRemovals says how diff treats trees in the checkout that no custom
// resource of the input renders: kept are those a Pipeline of the input
// may own (its stages' Workloads, by directory, each saying which stage),
// reported but not counted as changes; allowed reports the others without
// counting them as changes.
type diffRemovals struct {
	kept    map[string]string
	allowed bool
}

// maxDiffFile bounds one file read back from the checkout.
const maxDiffFile = 16 << 20

// diffBundles writes a unified diff of every owned path under dir/repoPath
// and says whether any differs. Every read goes through an os.Root opened
// on dir, so neither a path from the input nor a symbolic link in the
// checkout reads anything outside dir.
func diffBundles(ctx context.Context, w io.Writer, dir, repoPath string, bundles []*render.Bundle, removals diffRemovals) (bool, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return false, fmt.Errorf("--dir: %s is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return false, fmt.Errorf("--dir: %w", err)
	}
	defer func() { _ = root.Close() }()
	fsys := root.FS()
	// inDir is the slash path, relative to dir, of a bundle path.
	inDir := func(p string) (string, error) {
		full := path.Join(repoPath, p)
		if !fs.ValidPath(full) || strings.Contains(full, `\`) {
			raw := p
			if repoPath != "." {
				raw = repoPath + "/" + p
			}
			return "", fmt.Errorf("refusing to read %q: not a path inside --dir %s", raw, dir)
		}
		return full, nil
	}
	// Reads never block: a FIFO in the checkout is refused, not waited on.
	read := func(p string) ([]byte, error) { return publish.ReadRegular(root, p, maxDiffFile) }
	changed := false
	for _, b := range bundles {
		if err := ctx.Err(); err != nil {
			return false, context.Cause(ctx)
		}
		want := map[string][]byte{}
		for _, f := range b.Files {
			want[f.Path] = f.Data
		}
		have := map[string][]byte{}
		ownedDir, err := inDir(b.Dir)
		if err != nil {
			return false, err
		}
		err = fs.WalkDir(fsys, ownedDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == ownedDir {
					return fs.SkipAll
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			data, err := read(p)
			if err != nil {
				return err
			}
			rel := p
			if repoPath != "." {
				rel = strings.TrimPrefix(p, repoPath+"/")
			}
			have[rel] = data
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("read %s in --dir %s: %w", ownedDir, dir, err)
		}
		syncPath, err := inDir(b.Dir + ".sync.yaml")
		if err != nil {
			return false, err
		}
		data, err := read(syncPath)
		switch {
		case err == nil:
			have[b.Dir+".sync.yaml"] = data
		case !errors.Is(err, fs.ErrNotExist):
			return false, fmt.Errorf("read %s in --dir %s: %w", syncPath, dir, err)
		}
		paths := map[string]bool{}
		for p := range want {
			paths[p] = true
		}
		for p := range have {
			paths[p] = true
		}
		sorted := make([]string, 0, len(paths))
		for p := range paths {
			sorted = append(sorted, p)
		}
		sort.Strings(sorted)
		for _, p := range sorted {
			a, inHave := have[p]
			bb, inWant := want[p]
			if inHave && inWant && bytes.Equal(a, bb) {
				continue
			}
			changed = true
			from, to := "a/"+p, "b/"+p
			if !inHave {
				from = "/dev/null"
			}
			if !inWant {
				to = "/dev/null"
			}
			text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(bb)),
				FromFile: from, ToFile: to, Context: 3,
			})
			if err != nil {
				return false, fmt.Errorf("diff %s: %w", p, err)
			}
			// The checkout's files and paths are anyone's text: no control
			// character, and no line read as a workflow command by CI.
			if _, err := w.Write([]byte(termtext.CIText(strings.TrimRight(text, "\n")) + "\n")); err != nil {
				return false, fmt.Errorf("write diff: %w", err)
			}
		}
	}
	// Trees of custom resources that are no longer in the input.
	base, err := inDir(".")
	if err != nil {
		return false, err
	}
	found, err := findRenderedTrees(ctx, fsys, base, read)
	if err != nil {
		return false, fmt.Errorf("read %s in --dir %s: %w", base, dir, err)
	}
	rendered := map[string]bool{}
	for _, b := range bundles {
		rendered[b.Dir] = true
	}
	removed, stages := removedTrees(found, rendered, removals.kept)
	for _, t := range removed {
		note := ""
		if removals.allowed {
			note = "; allowed by --allow-removals"
		} else {
			changed = true
		}
		line := fmt.Sprintf("removed: %s is not in --file: %s/ and %s.sync.yaml would be deleted (%s%s)", t.source, t.dir, t.dir, fileCount(t.files), note)
		if _, err := fmt.Fprintln(w, termtext.CILine(line)); err != nil {
			return false, fmt.Errorf("write diff: %w", err)
		}
	}
	for _, t := range stages {
		line := fmt.Sprintf("stage: %s is not in --file: %s/ is kept as the Workload of %s (%s); were it another Workload, removed from --file, its tree would be deleted and the stage's written in its place",
			t.source, t.dir, removals.kept[t.dir], fileCount(t.files))
		if _, err := fmt.Fprintln(w, termtext.CILine(line)); err != nil {
			return false, fmt.Errorf("write diff: %w", err)
		}
	}
	return changed, nil
}

func fileCount(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}
