//go:build !unix

package main

import "os"

// openNonBlocking opens name for reading; off Unix there are no FIFOs to
// block on.
func openNonBlocking(name string) (*os.File, error) {
	return os.Open(name)
}
