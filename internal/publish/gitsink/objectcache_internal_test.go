package gitsink

import (
	"crypto/rand"
	"io"
	"runtime"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// TestTheGitCacheKeepsABoundedAmountOfDecodedObjectsInMemory: reading 64
// MiB of objects through a cache opened by openCache leaves at most about
// objectCacheSize of them on the heap (go-git's default would keep up to
// 96 MiB per repository).
func TestTheGitCacheKeepsABoundedAmountOfDecodedObjectsInMemory(t *testing.T) {
	dir := t.TempDir()
	init, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	var hashes []plumbing.Hash
	buf := make([]byte, 1<<20)
	for range 64 {
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		o := init.Storer.NewEncodedObject()
		o.SetType(plumbing.BlobObject)
		w, err := o.Writer()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
		h, err := init.Storer.SetEncodedObject(o)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	repo, err := openCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	for _, h := range hashes {
		o, err := repo.Storer.EncodedObject(plumbing.BlobObject, h)
		if err != nil {
			t.Fatal(err)
		}
		r, err := o.Reader()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			t.Fatal(err)
		}
		_ = r.Close()
	}
	grown := int64(heapInUse()) - int64(before)
	runtime.KeepAlive(repo)
	if limit := int64(2 * objectCacheSize); grown > limit {
		t.Fatalf("reading 64 MiB of objects grew the heap by %d MiB; the object cache should keep about %d MiB", grown>>20, int64(objectCacheSize)>>20)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
