//go:build unix

package main

import (
	"os"
	"syscall"
)

// openNonBlocking opens name for reading without blocking on a FIFO that
// has no writer.
func openNonBlocking(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
