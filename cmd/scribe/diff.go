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

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

func newDiffCmd() *cobra.Command {
	var f renderFlags
	var dir string
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR -d DIR",
		Short: "Show how the rendered tree differs from a checked-out repository",
		Long: `Diff renders the custom resources and compares the result with the paths
Scribe owns in DIR (<namespace>/<kind>/<name>/ and its .sync.yaml under --path).
Nothing outside DIR is read: every path is opened below DIR, and a symbolic
link that leads out of DIR is an error, never followed.
Exit code 0: no change; 1: changes; 2: error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bundles, err := f.renderAll(cmd.Context())
			if err != nil {
				return &codeError{code: exitError, err: err}
			}
			changed, err := diffBundles(cmd.Context(), cmd.OutOrStdout(), dir, f.path, bundles)
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
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// maxDiffFile bounds one file read back from the checkout.
const maxDiffFile = 16 << 20

// diffBundles writes a unified diff of every owned path under dir/repoPath
// and says whether any differs. Every read goes through an os.Root opened
// on dir, so neither a path from the input nor a symbolic link in the
// checkout reads anything outside dir.
func diffBundles(ctx context.Context, w io.Writer, dir, repoPath string, bundles []*render.Bundle) (bool, error) {
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
			if _, err := w.Write([]byte(strings.TrimRight(text, "\n") + "\n")); err != nil {
				return false, fmt.Errorf("write diff: %w", err)
			}
		}
	}
	return changed, nil
}
