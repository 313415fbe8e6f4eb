package e2e

import (
	"context"
	"strings"
	"testing"
)

// TestHostNetworkStateRunsEveryCommand: the failure dump names each
// command it ran, whether or not the host has the tool.
func TestHostNetworkStateRunsEveryCommand(t *testing.T) {
	got := hostNetworkState(context.Background())
	for _, want := range []string{"$ ip -br addr", "$ ip neigh", "$ bridge fdb show br " + nodeBridge, "$ conntrack -C"} {
		if !strings.Contains(got, want) {
			t.Errorf("the dump lacks %q:\n%s", want, got)
		}
	}
}
