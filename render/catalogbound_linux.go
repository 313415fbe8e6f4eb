package render

import (
	"os/exec"
	"syscall"
)

// setCheckerAttr kills the checker when its parent dies.
func setCheckerAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// limitAddressSpace caps this process's virtual memory (RLIMIT_AS): past
// it, the Go runtime's mappings fail and it exits "out of memory". Go
// reserves address space generously, so the cap must leave room beyond the
// heap. A cap that cannot be set leaves the watchdog alone to bound memory.
func limitAddressSpace(bytes uint64) {
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: bytes, Max: bytes})
}
