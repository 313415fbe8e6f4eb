// Package publish writes rendered bundles out. It holds the sinks'
// contract (Change, Result, Sink, Error and its reasons), the Dir sink (a
// local directory) and what the sinks share (the path rule, the sync
// index's format, the bounded file reader). The Git sink is package
// gitsink, the OCI sink package ocisink; together they are the only code
// in Scribe that writes output.
package publish

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/scribe-gitops/scribe/render"
)

// OutputMarker is the file WriteOutputDir writes at the top of a directory
// it owns. It lists every file Scribe wrote there; a directory holding
// anything else is not Scribe's to replace.
const OutputMarker = ".scribe-output"

// maxMarkerSize bounds the marker file read back from a directory.
const maxMarkerSize = 16 << 20

// outputMarker is the content of OutputMarker.
type outputMarker struct {
	// Comment tells a human what the file is for.
	Comment string `json:"comment"`
	// Files are the slash paths, relative to the directory, Scribe wrote.
	Files []string `json:"files"`
}

const markerComment = "Written by Scribe (render/publish -o). Scribe replaces this directory only while it holds nothing but the files listed here; delete this file to keep Scribe out."

// NotOwnedError says why WriteOutputDir refused a directory.
type NotOwnedError struct {
	// Dir is the directory that was refused.
	Dir string
	// Reason says what in it is not Scribe's.
	Reason string
}

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("refusing to write to %s: %s (Scribe writes -o only into a new or empty directory, or one it wrote before, marked by %s)", e.Dir, e.Reason, OutputMarker)
}

// CheckOutputDir says whether dir may be replaced by WriteOutputDir: it
// does not exist, is an empty directory, or is a directory holding only
// OutputMarker and the files that marker lists. Anything else (a regular
// file, a symbolic link, a checkout with .git, a directory of the user's
// files) is a *NotOwnedError and nothing is touched.
func CheckOutputDir(dir string) error {
	dir = filepath.Clean(dir)
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect %s: %w", dir, err)
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return &NotOwnedError{Dir: dir, Reason: "it is a symbolic link"}
	case !st.IsDir():
		return &NotOwnedError{Dir: dir, Reason: "it exists and is not a directory"}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	for _, e := range entries {
		if e.Name() == ".git" {
			return &NotOwnedError{Dir: dir, Reason: "it holds .git (a Git checkout)"}
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer func() { _ = root.Close() }()
	marker, err := readMarker(root)
	if errors.Is(err, fs.ErrNotExist) {
		return &NotOwnedError{Dir: dir, Reason: "it is not empty and has no " + OutputMarker}
	}
	if err != nil {
		return &NotOwnedError{Dir: dir, Reason: fmt.Sprintf("its %s is unreadable: %v", OutputMarker, err)}
	}
	owned := map[string]bool{OutputMarker: true}
	for _, f := range marker.Files {
		owned[f] = true
	}
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read %s: %w", filepath.Join(dir, filepath.FromSlash(p)), err)
		}
		if d.IsDir() || owned[p] {
			return nil
		}
		return &NotOwnedError{Dir: dir, Reason: fmt.Sprintf("it holds %s, which Scribe did not write", p)}
	})
}

// readMarker reads and decodes the marker at the top of root.
func readMarker(root *os.Root) (outputMarker, error) {
	var m outputMarker
	data, err := ReadRegular(root, OutputMarker, maxMarkerSize)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, err
	}
	return m, nil
}

// WriteOutputDir writes bundles to dir, the directory a user named with -o,
// atomically (see WriteDir), after CheckOutputDir found dir Scribe's to
// replace; it writes OutputMarker listing every file. It stops, writing
// nothing, when ctx is done before the new tree is moved into place.
func WriteOutputDir(ctx context.Context, dir string, bundles []*render.Bundle) error {
	dir = filepath.Clean(dir)
	if err := CheckOutputDir(dir); err != nil {
		return err
	}
	return writeDir(ctx, dir, bundles, true)
}

// WriteDir writes bundles under dir atomically: everything is written to a
// temporary sibling directory that is renamed into place only when every
// file is written, so on any error nothing is left at dir. An existing
// directory at dir is replaced whatever it holds, so WriteDir is only for
// directories the caller owns (golden trees); a directory a user names goes
// through WriteOutputDir. Every file path must be a clean relative path:
// files are written through an os.Root on the temporary directory.
func WriteDir(dir string, bundles []*render.Bundle) error {
	return writeDir(context.Background(), filepath.Clean(dir), bundles, false)
}

func writeDir(ctx context.Context, dir string, bundles []*render.Bundle, marker bool) (err error) {
	if st, err := os.Lstat(dir); err == nil && !st.IsDir() {
		return &NotOwnedError{Dir: dir, Reason: "it exists and is not a directory"}
	}
	// The old tree is removed once the new one is in place: a tree that
	// cannot be removed (read-only) is refused first, so the write ends
	// with the new tree alone or with the old one untouched.
	if err := checkReplaceable(dir); err != nil {
		return err
	}
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
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return fmt.Errorf("open %s: %w", tmp, err)
	}
	defer func() { _ = root.Close() }()
	var written []string
	for _, b := range bundles {
		for _, f := range b.Files {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("write %s: %w", dir, context.Cause(ctx))
			}
			if !fs.ValidPath(f.Path) || f.Path == "." || strings.Contains(f.Path, `\`) || (marker && f.Path == OutputMarker) {
				return fmt.Errorf("refusing to write %q outside %s", f.Path, dir)
			}
			if err := root.MkdirAll(path.Dir(f.Path), 0o755); err != nil {
				return fmt.Errorf("create %s: %w", path.Dir(f.Path), err)
			}
			if err := root.WriteFile(f.Path, f.Data, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", f.Path, err)
			}
			written = append(written, f.Path)
		}
	}
	if marker {
		sort.Strings(written)
		data, err := json.MarshalIndent(outputMarker{Comment: markerComment, Files: written}, "", "  ")
		if err != nil {
			return fmt.Errorf("encode %s: %w", OutputMarker, err)
		}
		if err := root.WriteFile(OutputMarker, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", OutputMarker, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write %s: %w", dir, context.Cause(ctx))
	}
	old := ""
	if _, statErr := os.Lstat(dir); statErr == nil {
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
// and leaves every other file alone. Every path is opened through an
// os.Root on Root, so neither a source's name nor a symbolic link in the
// tree makes it read, write or delete anything outside Root.
type Dir struct {
	// Root is the directory that stands for the repository.
	Root string
	// Path is the repository path under Root.
	Path string
}

// Publish writes the changes. Result.Revision is "dir:" plus a digest of the
// changes' bundle digests.
func (d Dir) Publish(ctx context.Context, changes ...Change) (Result, error) {
	if err := CheckRepoPath(d.Path); err != nil {
		return Result{}, err
	}
	for _, c := range changes {
		if err := c.Validate(); err != nil {
			return Result{}, &Error{Reason: ReasonInvalid, Op: "write to", URL: d.Root, Err: err}
		}
	}
	if err := os.MkdirAll(d.Root, 0o755); err != nil {
		return Result{}, fmt.Errorf("create %s: %w", d.Root, err)
	}
	root, err := os.OpenRoot(d.Root)
	if err != nil {
		return Result{}, fmt.Errorf("open %s: %w", d.Root, err)
	}
	defer func() { _ = root.Close() }()
	base := d.Path
	if base == "" {
		base = "."
	}
	h := sha256.New()
	changed := false
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return Result{}, context.Cause(ctx)
		}
		dir := path.Join(base, OwnedDir(c.Source))
		sync := dir + ".sync.yaml"
		if c.Delete {
			for _, p := range []string{dir, sync} {
				if _, err := root.Lstat(p); err == nil {
					changed = true
				}
				if err := root.RemoveAll(p); err != nil {
					return Result{}, fmt.Errorf("remove %s: %w", filepath.Join(d.Root, p), err)
				}
			}
			_, _ = fmt.Fprintf(h, "delete %s\n", ObjectRef(c.Source))
			continue
		}
		same, err := dirHolds(root, base, dir, sync, c.Bundle)
		if err != nil {
			return Result{}, fmt.Errorf("read %s: %w", filepath.Join(d.Root, dir), err)
		}
		_, _ = fmt.Fprintf(h, "%s %s\n", ObjectRef(c.Source), c.Bundle.Digest)
		if same {
			continue
		}
		changed = true
		if err := replaceOwned(root, base, dir, sync, c.Bundle); err != nil {
			return Result{}, fmt.Errorf("write %s: %w", filepath.Join(d.Root, dir), err)
		}
	}
	sum := "sha256:" + hex.EncodeToString(h.Sum(nil))
	return Result{Revision: "dir:" + sum, Commit: sum, Changed: changed, SyncChanged: changed}, nil
}

// dirHolds says whether the owned paths under root hold exactly the bundle.
func dirHolds(root *os.Root, base, dir, sync string, b *render.Bundle) (bool, error) {
	want := map[string][]byte{}
	for _, f := range b.Files {
		want[path.Join(base, f.Path)] = f.Data
	}
	got := map[string]bool{}
	err := fs.WalkDir(root.FS(), dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			got[p] = true
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := root.Lstat(sync); err == nil {
		got[sync] = true
	}
	if len(got) != len(want) {
		return false, nil
	}
	for p, data := range want {
		if !got[p] {
			return false, nil
		}
		have, err := root.ReadFile(p)
		if err != nil || !bytes.Equal(have, data) {
			return false, nil
		}
	}
	return true, nil
}

// tempName is a fresh name beside p for a temporary file or directory.
func tempName(p string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return path.Join(path.Dir(p), "."+path.Base(p)+".tmp-"+hex.EncodeToString(b[:])), nil
}

// replaceOwned writes the bundle's directory next to dir and renames it into
// place, then writes the sync file the same way; all under root.
func replaceOwned(root *os.Root, base, dir, sync string, b *render.Bundle) (err error) {
	if err := root.MkdirAll(path.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", path.Dir(dir), err)
	}
	tmp, err := tempName(dir)
	if err != nil {
		return err
	}
	if err := root.Mkdir(tmp, 0o755); err != nil {
		return fmt.Errorf("create temporary directory %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			_ = root.RemoveAll(tmp)
		}
	}()
	var syncData []byte
	for _, f := range b.Files {
		p := path.Join(base, f.Path)
		if p == sync {
			syncData = f.Data
			continue
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if rel == p {
			return fmt.Errorf("place %s: outside %s", f.Path, dir)
		}
		target := path.Join(tmp, rel)
		if err := root.MkdirAll(path.Dir(target), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", path.Dir(target), err)
		}
		if err := root.WriteFile(target, f.Data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", target, err)
		}
	}
	old := tmp + ".old"
	hadOld := false
	if _, statErr := root.Lstat(dir); statErr == nil {
		if err := root.Rename(dir, old); err != nil {
			return fmt.Errorf("move aside %s: %w", dir, err)
		}
		hadOld = true
	}
	if err := root.Rename(tmp, dir); err != nil {
		if hadOld {
			_ = root.Rename(old, dir)
		}
		return fmt.Errorf("move %s into place: %w", dir, err)
	}
	if hadOld {
		if err := root.RemoveAll(old); err != nil {
			return fmt.Errorf("remove previous %s: %w", dir, err)
		}
	}
	if syncData == nil {
		return root.RemoveAll(sync)
	}
	tmpSync, err := tempName(sync)
	if err != nil {
		return err
	}
	if err := root.WriteFile(tmpSync, syncData, 0o644); err != nil {
		_ = root.Remove(tmpSync)
		return fmt.Errorf("write %s: %w", sync, err)
	}
	if err := root.Rename(tmpSync, sync); err != nil {
		_ = root.Remove(tmpSync)
		return fmt.Errorf("move %s into place: %w", sync, err)
	}
	return nil
}
