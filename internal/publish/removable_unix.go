//go:build unix

package publish

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkReplaceable says why the tree at dir could not be removed once a
// new one took its place, or nil when it could (or there is none):
// removing an entry needs write and search permission on its directory,
// and a read-only file system refuses it whoever asks (access(2) answers
// EROFS even for root). Asked before anything is written, so a refusal
// leaves dir as it was and nothing beside it.
func checkReplaceable(dir string) error {
	if _, err := os.Lstat(dir); err != nil {
		return nil //nolint:nilerr // nothing there to replace; creating it reports its own error
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if !d.IsDir() {
			return nil
		}
		if err := unix.Access(p, unix.W_OK|unix.X_OK); err != nil {
			return fmt.Errorf("%s cannot be replaced: %s is not writable (%w)", dir, p, err)
		}
		return nil
	})
}
