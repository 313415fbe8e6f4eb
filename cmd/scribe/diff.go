package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"

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
Exit code 0: no change; 1: changes; 2: error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bundles, err := f.renderAll(cmd.Context())
			if err != nil {
				return &codeError{code: exitError, err: err}
			}
			changed, err := diffBundles(cmd.OutOrStdout(), filepath.Join(dir, f.path), bundles)
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

// diffBundles writes a unified diff of every owned path and says whether any differs.
func diffBundles(w interface{ Write([]byte) (int, error) }, root string, bundles []*render.Bundle) (bool, error) {
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return false, fmt.Errorf("--dir: %s is not a directory", root)
	}
	changed := false
	for _, b := range bundles {
		want := map[string][]byte{}
		for _, f := range b.Files {
			want[f.Path] = f.Data
		}
		have := map[string][]byte{}
		ownedDir := filepath.Join(root, filepath.FromSlash(b.Dir))
		err := filepath.WalkDir(ownedDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return filepath.SkipAll
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			have[filepath.ToSlash(rel)] = data
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("read %s: %w", ownedDir, err)
		}
		if data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(b.Dir+".sync.yaml"))); err == nil {
			have[b.Dir+".sync.yaml"] = data
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
