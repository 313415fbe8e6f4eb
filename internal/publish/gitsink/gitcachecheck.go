package gitsink

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // git's pack and index checksums
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// The cache's health: what a holder that finds someone else's token checks
// (references, shallow list, packs against their indexes), the sweep of
// what a killed process left, and the reset to an empty repository.

// sweepCache removes what a killed process left beside and inside the
// cache at dir: half-made or half-removed copies, temporary packs and
// reference files. Nothing else writes there while the lock is held.
func sweepCache(dir string) {
	for _, pat := range []string{dir + cacheNewSuffix + "*", dir + cacheOldSuffix + "*"} {
		left, _ := filepath.Glob(pat)
		for _, p := range left {
			_ = os.RemoveAll(p)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "tmp_*"))
	for _, p := range left {
		_ = os.Remove(p)
	}
	_ = filepath.WalkDir(filepath.Join(dir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, refTempSuffix) {
			_ = os.Remove(p)
		}
		return nil
	})
}

// checkCache says whether the cache at dir can be used as it is. A process
// killed while it wrote the cache can leave an empty or garbled reference
// file, a pack index without its pack or cut short, a pack cut short, or a
// reference to objects that never arrived; each of them makes go-git fail
// (or panic) on every later use. The checks read every reference and the
// ends of every pack and index, which costs little next to a fetch; a pack
// damaged in its middle is caught when it is read (see lockedStore.do).
func checkCache(dir, url string, repo *git.Repository) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("git cache %s: reading it panicked: %v", dir, r)
		}
	}()
	rem, err := repo.Remote(remoteName)
	if err != nil {
		return fmt.Errorf("git cache %s: remote: %w", dir, err)
	}
	if urls := rem.Config().URLs; len(urls) != 1 || urls[0] != redactURL(url) {
		return fmt.Errorf("git cache %s: remote is %v, not %s", dir, urls, redactURL(url))
	}
	if err := checkPacks(filepath.Join(dir, "objects", "pack")); err != nil {
		return fmt.Errorf("git cache %s: %w", dir, err)
	}
	if _, err := repo.Storer.Shallow(); err != nil {
		return fmt.Errorf("git cache %s: shallow list: %w", dir, err)
	}
	refs, err := repo.Storer.IterReferences()
	if err != nil {
		return fmt.Errorf("git cache %s: references: %w", dir, err)
	}
	defer refs.Close()
	return refs.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() != plumbing.HashReference {
			return nil
		}
		c, err := object.GetCommit(repo.Storer, ref.Hash())
		if err != nil {
			return fmt.Errorf("git cache %s: %s: commit %s: %w", dir, ref.Name(), ref.Hash(), err)
		}
		if _, err := object.GetTree(repo.Storer, c.TreeHash); err != nil {
			return fmt.Errorf("git cache %s: %s: tree %s: %w", dir, ref.Name(), c.TreeHash, err)
		}
		return nil
	})
}

// checkPacks checks that every pack has its index and the other way
// round, and that each pair is whole: the index's own checksum holds, and
// the pack ends with the checksum the index and the pack's name record.
func checkPacks(packDir string) error {
	entries, err := os.ReadDir(packDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	for name := range names {
		base, ext := strings.TrimSuffix(name, filepath.Ext(name)), filepath.Ext(name)
		if ext != ".pack" && ext != ".idx" {
			continue
		}
		if !names[base+".pack"] || !names[base+".idx"] {
			return fmt.Errorf("pack %s has no %s", base, map[string]string{".pack": ".idx", ".idx": ".pack"}[ext])
		}
		if ext == ".idx" {
			if err := checkPack(filepath.Join(packDir, base)); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkPack(base string) error {
	idx, err := os.ReadFile(base + ".idx")
	if err != nil {
		return err
	}
	// Header, fan-out table, and the two trailing checksums at least.
	if len(idx) < 8+256*4+2*sha1.Size {
		return fmt.Errorf("%s.idx: cut short (%d bytes)", base, len(idx))
	}
	sum := sha1.Sum(idx[:len(idx)-sha1.Size]) //nolint:gosec // git's own checksum
	if !bytes.Equal(sum[:], idx[len(idx)-sha1.Size:]) {
		return fmt.Errorf("%s.idx: checksum mismatch", base)
	}
	packSum := idx[len(idx)-2*sha1.Size : len(idx)-sha1.Size]
	f, err := os.Open(base + ".pack")
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < 12+sha1.Size {
		return fmt.Errorf("%s.pack: cut short (%d bytes)", base, fi.Size())
	}
	tail := make([]byte, sha1.Size)
	if _, err := f.ReadAt(tail, fi.Size()-sha1.Size); err != nil {
		return fmt.Errorf("%s.pack: %w", base, err)
	}
	if !bytes.Equal(tail, packSum) {
		return fmt.Errorf("%s.pack: does not end with the checksum its index records (cut short or overwritten)", base)
	}
	if name := strings.TrimPrefix(filepath.Base(base), "pack-"); name != hex.EncodeToString(packSum) {
		return fmt.Errorf("%s.pack: its name is not its checksum %x", base, packSum)
	}
	return nil
}

// resetGitStore replaces dir with an empty bare repository. The new one is
// made beside it and renamed into place, so a process killed meanwhile
// leaves either the old cache or the new one (or none), never half of one.
func resetGitStore(dir, url string) (*git.Repository, error) {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("create git cache %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, filepath.Base(dir)+cacheNewSuffix)
	if err != nil {
		return nil, fmt.Errorf("create git cache %s: %w", dir, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }() // gone after the rename
	repo, err := git.PlainInit(tmp, true)
	if err != nil {
		return nil, fmt.Errorf("init git cache %s: %w", dir, err)
	}
	// The config holds the URL without credentials: fetches and pushes
	// name the URL in memory (RemoteURL), so nothing secret is on disk.
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: remoteName, URLs: []string{redactURL(url)}}); err != nil {
		return nil, fmt.Errorf("git cache %s: add remote: %w", dir, err)
	}
	if _, err := os.Lstat(dir); err == nil {
		old := dir + cacheOldSuffix + strconv.FormatInt(time.Now().UnixNano(), 36)
		if err := os.Rename(dir, old); err != nil {
			return nil, fmt.Errorf("reset git cache %s: %w", dir, err)
		}
		defer func() { _ = os.RemoveAll(old) }()
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("reset git cache %s: %w", dir, err)
	}
	repo, err = openCache(dir)
	if err != nil {
		return nil, fmt.Errorf("open git cache %s: %w", dir, err)
	}
	return repo, nil
}
