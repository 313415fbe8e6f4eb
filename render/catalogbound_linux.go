package render

import (
	"os/exec"
	"syscall"
	"time"
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

// limitCPU caps this process's CPU time (RLIMIT_CPU, whole seconds,
// rounded up): the kernel sends SIGXCPU at the soft limit, which the Go
// runtime ignores without a handler, and kills the process at the hard
// limit a second later. A cap that cannot be set leaves the watchdog alone
// to bound CPU time.
func limitCPU(d time.Duration) {
	secs := uint64((d + time.Second - 1) / time.Second)
	_ = syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: secs, Max: secs + 1})
}

// processCPU is the CPU time this process used so far: user and system
// time of all its threads.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
