package controller

import "testing"

// Plain HTTP goes only to a registry on loopback: a host that merely
// starts like one is not loopback.
func TestLoopbackRegistryParsesTheHost(t *testing.T) {
	cases := []struct {
		name, url string
		want      bool
	}{
		{"127.0.0.1 with a port", "oci://127.0.0.1:5000/team/app", true},
		{"127.0.0.1 without a port", "oci://127.0.0.1/team/app", true},
		{"elsewhere in 127/8", "oci://127.0.0.2:5000/app", true},
		{"localhost with a port", "oci://localhost:5000/app", true},
		{"localhost without a port", "oci://localhost/app", true},
		{"LOCALHOST", "oci://LOCALHOST:5000/app", true},
		{"IPv6 loopback", "oci://[::1]:5000/app", true},
		{"IPv6 loopback without a port", "oci://[::1]/app", true},
		{"a name that starts like 127.0.0.1", "oci://127.0.0.1.attacker.example/app", false},
		{"a name that starts like 127.0.0.1, with a port", "oci://127.0.0.1.attacker.example:5000/app", false},
		{"a name that starts like localhost", "oci://localhost.attacker.example/app", false},
		{"a name that starts like localhost, with a dash", "oci://localhost-registry.example:5000/app", false},
		{"user info that looks like loopback", "oci://127.0.0.1@attacker.example/app", false},
		{"a public registry", "oci://ghcr.io/team/app", false},
		{"a private address", "oci://10.0.0.5:5000/app", false},
		{"not an oci URL", "https://127.0.0.1:5000/app", false},
		{"loopback with a zone", "oci://[::1%25lo]:5000/app", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := loopbackRegistry(c.url); got != c.want {
				t.Errorf("loopbackRegistry(%q) = %v, want %v", c.url, got, c.want)
			}
		})
	}
}
