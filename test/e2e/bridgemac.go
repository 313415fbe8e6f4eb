package e2e

import (
	"fmt"
	"net/netip"
)

// bridgeMAC is the fixed hardware address a pods' bridge is created with,
// derived from its gateway address as the CNI bridge plugin once did
// (0a:58 and the IPv4 address: locally administered, unicast).
//
// A Linux bridge whose address was never set takes the lowest address of
// its ports, and changes it whenever a pod's veth with a lower one comes or
// goes. The pods' ARP entries for their gateway then name an address
// nobody answers to: every pod on the node loses the host (its probes, the
// API server, the git server) until its entry is resolved again, which
// made Scribe's pod lose its network as a workflow's pod finished beside
// it. An address set explicitly stays.
func bridgeMAC(gateway string) (string, error) {
	ip, err := netip.ParseAddr(gateway)
	if err != nil || !ip.Is4() {
		return "", fmt.Errorf("bridge gateway %q: not an IPv4 address", gateway)
	}
	b := ip.As4()
	return fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3]), nil
}
