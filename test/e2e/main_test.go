package e2e

import (
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
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
