//go:build linux

package gitsink_test

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// TestFullCacheDiskIsCacheUnwritableNotTheRemote: a Git cache on a full
// volume (a 256 KiB tmpfs, a repository of 1 MiB that does not compress)
// fails with CacheUnwritable and a hint about the cache directory, not
// RemoteUnreachable: the remote answered, the local disk did not take it.
// It needs root for the mount and is skipped without; the cleanup
// unmounts.
func TestFullCacheDiskIsCacheUnwritableNotTheRemote(t *testing.T) {
	cache := t.TempDir()
	if err := unix.Mount("tmpfs", cache, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("mount a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(cache, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", cache, err)
		}
	})
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "big", "main")
	noise := make([]byte, 512<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	if _, err := srv.CommitOnServer("big", "main", "blob.txt", hex.EncodeToString(noise)); err != nil {
		t.Fatal(err)
	}
	g := gitsink.New(filepath.Join(cache, "git"))
	g.CommitInterval = 0
	sink, err := g.Sink(gitsink.Options{URL: url, Branch: "main", Path: "clusters"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sink.Publish(context.Background(), publish.ChangeFor(testBundle("team-a", "web", "one")))
	if err == nil {
		t.Fatal("published through a full cache")
	}
	if r := publish.ReasonOf(err); r != publish.ReasonCacheUnwritable || !strings.Contains(err.Error(), "cache directory") {
		t.Fatalf("reason %s: %v; want %s with a hint about the cache directory", r, err, publish.ReasonCacheUnwritable)
	}
	if _, err := os.Stat(cache); err != nil {
		t.Fatal(err)
	}
}
