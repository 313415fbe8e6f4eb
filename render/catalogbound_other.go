//go:build !linux

package render

import (
	"os/exec"
	"time"
)

// setCheckerAttr: no parent-death signal outside Linux.
func setCheckerAttr(*exec.Cmd) {}

// limitAddressSpace: outside Linux the watchdog alone bounds memory.
func limitAddressSpace(uint64) {}

// limitCPU: outside Linux the checker sets no kernel cap on its CPU time.
func limitCPU(time.Duration) {}

// processCPU: outside Linux the checker does not read its own CPU time;
// the parent's wall-clock backstop bounds the check, and the parent still
// reports a checker that ended past its CPU bound as such.
func processCPU() (time.Duration, bool) { return 0, false }
