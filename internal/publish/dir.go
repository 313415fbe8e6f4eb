// Package publish writes rendered bundles out: to Git, to an OCI registry or
// to a local directory. It is the only code in Scribe that writes output.
package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// Dir is the offline sink: it writes changes into a directory on disk with
// the same ownership rules as the Git sink. Each change replaces only its
// source's owned paths, atomically (a temporary sibling renamed into place),
// and leaves every other file alone.
type Dir struct {
	// Root is the directory that stands for the repository.
	Root string
	// Path is the repository path under Root.
	Path string
}

// Publish writes the changes. Result.Revision is "dir:" plus a digest of the
// changes' bundle digests.
func (d Dir) Publish(_ context.Context, changes ...Change) (Result, error) {
	if err := checkRepoPath(d.Path); err != nil {
		return Result{}, err
	}
	for _, c := range changes {
		if err := c.Validate(); err != nil {
			return Result{}, &Error{Reason: ReasonInvalid, Op: "write to", URL: d.Root, Err: err}
		}
	}
	base := filepath.Join(d.Root, filepath.FromSlash(d.Path))
	h := sha256.New()
	changed := false
	for _, c := range changes {
		dir := filepath.Join(base, filepath.FromSlash(OwnedDir(c.Source)))
		sync := dir + ".sync.yaml"
		if c.Delete {
			for _, p := range []string{dir, sync} {
				if _, err := os.Lstat(p); err == nil {
					changed = true
				}
				if err := os.RemoveAll(p); err != nil {
					return Result{}, fmt.Errorf("remove %s: %w", p, err)
				}
			}
			_, _ = fmt.Fprintf(h, "delete %s\n", ObjectRef(c.Source))
			continue
		}
		same, err := dirHolds(base, dir, sync, c.Bundle)
		if err != nil {
			return Result{}, err
		}
		_, _ = fmt.Fprintf(h, "%s %s\n", ObjectRef(c.Source), c.Bundle.Digest)
		if same {
			continue
		}
		changed = true
		if err := replaceOwned(base, dir, sync, c.Bundle); err != nil {
			return Result{}, err
		}
	}
	sum := "sha256:" + hex.EncodeToString(h.Sum(nil))
	return Result{Revision: "dir:" + sum, Commit: sum, Changed: changed, SyncChanged: changed}, nil
}

// dirHolds says whether the owned paths on disk hold exactly the bundle.
func dirHolds(base, dir, sync string, b *render.Bundle) (bool, error) {
	want := map[string][]byte{}
	for _, f := range b.Files {
		want[filepath.Join(base, filepath.FromSlash(f.Path))] = f.Data
	}
	got := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			got[p] = true
		}
		return nil
	})
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", dir, err)
	}
	if _, err := os.Stat(sync); err == nil {
		got[sync] = true
	}
	if len(got) != len(want) {
		return false, nil
	}
	for p, data := range want {
		if !got[p] {
			return false, nil
		}
		have, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(have, data) {
			return false, nil
		}
	}
	return true, nil
}

// replaceOwned writes the bundle's directory next to dir and renames it into
// place, then writes the sync file the same way.
func replaceOwned(base, dir, sync string, b *render.Bundle) (err error) {
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
	var syncData []byte
	for _, f := range b.Files {
		p := filepath.Join(base, filepath.FromSlash(f.Path))
		if p == sync {
			syncData = f.Data
			continue
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return fmt.Errorf("place %s: %w", f.Path, err)
		}
		target := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(target), err)
		}
		if err := os.WriteFile(target, f.Data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", target, err)
		}
	}
	old := tmp + ".old"
	hadOld := false
	if _, statErr := os.Lstat(dir); statErr == nil {
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("move aside %s: %w", dir, err)
		}
		hadOld = true
	}
	if err := os.Rename(tmp, dir); err != nil {
		if hadOld {
			_ = os.Rename(old, dir)
		}
		return fmt.Errorf("move %s into place: %w", dir, err)
	}
	if hadOld {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("remove previous %s: %w", dir, err)
		}
	}
	if syncData == nil {
		return os.RemoveAll(sync)
	}
	f, err := os.CreateTemp(parent, "."+filepath.Base(sync)+".tmp-")
	if err != nil {
		return fmt.Errorf("write %s: %w", sync, err)
	}
	if _, err := f.Write(syncData); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", sync, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", sync, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", sync, err)
	}
	if err := os.Rename(f.Name(), sync); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("move %s into place: %w", sync, err)
	}
	return nil
}
