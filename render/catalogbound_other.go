//go:build !linux

package render

import "os/exec"

// setCheckerAttr: no parent-death signal outside Linux.
func setCheckerAttr(*exec.Cmd) {}

// limitAddressSpace: outside Linux the watchdog alone bounds memory.
func limitAddressSpace(uint64) {}
