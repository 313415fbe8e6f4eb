//go:build unix

package publish

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fileLock is an exclusive flock(2) on a file: held by one open file
// description at a time, across processes and within one, and released by
// the kernel when the holder exits, however it dies, so a lock can never
// be left stale.
type fileLock struct {
	f *os.File
}

// lockPoll bounds the wait between two tries of a lock that is taken.
const lockPoll = 20 * time.Millisecond

// acquireFileLock takes the lock on path (creating the file), waiting as
// long as ctx allows.
func acquireFileLock(ctx context.Context, path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			_ = f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		}
		wait = min(wait*2, lockPoll)
	}
}

// release drops the lock.
func (l *fileLock) release() {
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	_ = l.f.Close()
}
