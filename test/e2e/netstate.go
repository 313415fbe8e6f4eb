package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// hostNetworkState is what the host's network looks like when a loop on
// the real node fails, for its kept logs: the addresses and routes, the
// neighbours and bridge forwarding entries (a pod whose probes time out
// while its node's other paths work points at them), and the connection
// tracking table's size and busiest destinations. Each command is bounded;
// one missing or failing is noted and the rest still run.
func hostNetworkState(ctx context.Context) string {
	var b strings.Builder
	for _, cmd := range [][]string{
		{"ip", "-br", "addr"},
		{"ip", "route"},
		{"ip", "neigh"},
		{"ip", "-d", "link", "show", nodeBridge},
		{"bridge", "fdb", "show", "br", nodeBridge},
		{"ip", "-br", "link", "show", "master", nodeBridge},
		{"conntrack", "-C"},
		{"sh", "-c", "conntrack -L 2>/dev/null | grep -o 'dst=[0-9.]*' | sort | uniq -c | sort -rn | head -20"},
	} {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := exec.CommandContext(cctx, cmd[0], cmd[1:]...).CombinedOutput()
		cancel()
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(cmd, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
		b.WriteString("\n")
	}
	return b.String()
}
