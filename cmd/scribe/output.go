package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// checkOutput refuses, before anything is rendered, an -o directory that
// Scribe may not replace (see publish.CheckOutputDir) or that holds any of
// the -f inputs: replacing it would delete them.
func checkOutput(dir string, inputs []string) error {
	if err := publish.CheckOutputDir(dir); err != nil {
		return err
	}
	out, err := resolvePath(dir)
	if err != nil {
		return fmt.Errorf("-o %s: %w", dir, err)
	}
	for _, in := range inputs {
		if in == stdinArg {
			continue
		}
		p, err := resolvePath(in)
		if err != nil {
			return fmt.Errorf("--file %s: %w", in, err)
		}
		if within(out, p) {
			return &publish.NotOwnedError{Dir: filepath.Clean(dir), Reason: fmt.Sprintf("it holds the input %s", in)}
		}
	}
	return nil
}

// resolvePath makes p absolute with every symbolic link of its existing
// part resolved, so two names of one file compare equal.
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for cur := abs; ; {
		resolved, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(append([]string{resolved}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}

// within says whether p is dir or lies below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
