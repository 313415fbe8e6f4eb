package e2e

import "testing"

func TestBridgeMACIsFixedPerGatewayAndLocallyAdministered(t *testing.T) {
	for _, tc := range []struct {
		gateway, want string
		err           bool
	}{
		{gateway: nodeGateway, want: "0a:58:0a:d5:07:01"},
		{gateway: appPodGateway, want: "0a:58:0a:d5:08:01"},
		{gateway: "fd00::1", err: true},
		{gateway: "not-an-ip", err: true},
	} {
		got, err := bridgeMAC(tc.gateway)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("bridgeMAC(%q) = %q, %v; want %q, error %v", tc.gateway, got, err, tc.want, tc.err)
		}
	}
}
