package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// TestMain gives controller-runtime its process-wide logger before the
// loop starts: envtest and the loop's clients log through it while the first
// run builds the control plane and Flux for many minutes, and without a
// logger controller-runtime prints a "log.SetLogger(...) was never called"
// stack dump 30 s into the process. Those lines are discarded; each Scribe
// manager logs to its own scribe.log in the stack's folder (startScribe),
// which a failed test keeps.
//
// It also stops the machine's real node (node.go) when a test started it,
// and fails the run if the host is not as it was before: processes,
// mounts, network interfaces, iptables rules, cgroups, sysctls and the
// paths the node's parts hard-code. Machines are reused by later runs.
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	before := readHostState()
	nodeHolder.mu.Lock()
	nodeHolder.before = &before
	nodeHolder.mu.Unlock()
	code := m.Run()
	os.Exit(checkHostAfterNode(before, code))
}

// checkHostAfterNode closes the real node if this process started one,
// restores the sysctls it changed, and returns code, or 1 when the host
// kept anything of the node.
func checkHostAfterNode(before hostState, code int) int {
	nodeHolder.mu.Lock()
	started := nodeHolder.node != nil || nodeHolder.err != nil
	nodeHolder.mu.Unlock()
	if !started {
		return code
	}
	// The node lock is held until the host is checked.
	defer releaseNodeLock()
	if err := closeNodeAndRestore(); err != nil {
		fmt.Fprintf(os.Stderr, "real node: close: %v\n", err)
		code = 1
	}
	if left := diffHostState(before, readHostState()); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the real node left the host changed (machines are reused by later runs):\n")
		for _, l := range left {
			fmt.Fprintf(os.Stderr, "  %s\n", l)
		}
		code = 1
	} else {
		fmt.Println("real node: stopped; the host is as it was before the run (processes, mounts, interfaces, iptables, cgroups, sysctls, paths)")
	}
	return code
}
