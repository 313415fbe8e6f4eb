//go:build unix

package gitsink

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileLockWaitsForItsHolderAsLongAsTheContextAllows: a taken lock is
// tried again, 1ms apart doubling to lockPoll, until it is released or the
// context ends, which the error says.
func TestFileLockWaitsForItsHolderAsLongAsTheContextAllows(t *testing.T) {
	ms := time.Millisecond
	next := lockBackoff()
	for i, want := range []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, lockPoll, lockPoll, lockPoll} {
		if got := next(); got != want {
			t.Errorf("wait %d = %s, want %s", i+1, got, want)
		}
	}

	path := filepath.Join(t.TempDir(), "lock")
	held, err := acquireFileLock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		l, err := acquireFileLock(ctx, path)
		if err == nil {
			l.release()
		}
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "wait for lock") {
		t.Fatalf("err = %v, want the wait for the lock cancelled", err)
	}

	go func() {
		l, err := acquireFileLock(context.Background(), path)
		if err == nil {
			l.release()
		}
		done <- err
	}()
	held.release()
	if err := <-done; err != nil {
		t.Fatalf("err = %v after the holder released the lock", err)
	}
}
