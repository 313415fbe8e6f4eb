// Package publish writes rendered bundles out: to Git, to an OCI registry or
// to a local directory. It is the only code in Scribe that writes output.
package publish

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/scribe-gitops/scribe/render"
)

// WriteDir writes bundles under dir atomically: everything is written to a
// temporary sibling directory that is renamed into place only when every
// file is written, so on any error nothing is left at dir. An existing dir
// is replaced.
func WriteDir(dir string, bundles []*render.Bundle) (err error) {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("create temporary directory in %s: %w", parent, err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	for _, b := range bundles {
		for _, f := range b.Files {
			if strings.Contains(f.Path, "..") || filepath.IsAbs(f.Path) {
				return fmt.Errorf("refusing to write %q outside %s", f.Path, dir)
			}
			p := filepath.Join(tmp, filepath.FromSlash(f.Path))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return fmt.Errorf("create %s: %w", filepath.Dir(p), err)
			}
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", p, err)
			}
		}
	}
	old := ""
	if _, statErr := os.Stat(dir); statErr == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("move aside %s: %w", dir, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			_ = os.Rename(old, dir)
		}
		return fmt.Errorf("move %s into place: %w", dir, err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("remove previous %s: %w", dir, err)
		}
	}
	return nil
}
