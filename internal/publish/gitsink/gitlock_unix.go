//go:build unix

package gitsink

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
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

// lockBackoff is the wait between two tries of a lock that is taken:
// 1ms, doubling up to lockPoll (wait.Backoff stops doubling at its cap).
func lockBackoff() wait.DelayFunc {
	return wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: lockPoll}.DelayFunc()
}

// acquireFileLock takes the lock on path (creating the file), waiting as
// long as ctx allows.
func acquireFileLock(ctx context.Context, path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	err = lockBackoff().Until(ctx, true, true, func(context.Context) (bool, error) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return false, fmt.Errorf("lock %s: %w", path, err)
		}
		return false, nil
	})
	if err != nil {
		_ = f.Close()
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, fmt.Errorf("wait for lock %s: %w", path, err)
		}
		return nil, err
	}
	return &fileLock{f: f}, nil
}

// release drops the lock.
func (l *fileLock) release() {
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	_ = l.f.Close()
}
