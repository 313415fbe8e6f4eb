//go:build !unix

package gitsink

import (
	"context"
	"fmt"
	"os"
)

// fileLock on systems without flock(2) only opens the file: the cache is
// then safe within one process (see lockedStore) but not across processes.
type fileLock struct {
	f *os.File
}

func acquireFileLock(_ context.Context, path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

func (l *fileLock) release() { _ = l.f.Close() }
