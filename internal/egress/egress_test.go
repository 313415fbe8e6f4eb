package egress

import (
	"errors"
	"net/netip"
	"testing"
)

func TestAllowedRefusesWhatATenantMustNotReach(t *testing.T) {
	strict := Policy{}
	cluster := Policy{AllowPrivate: true}
	local := Policy{AllowLoopback: true}
	listed := Policy{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("169.254.0.0/16")}}
	everything := Policy{AllowLoopback: true, AllowPrivate: true, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}
	cases := []struct {
		name   string
		policy Policy
		ip     string
		ok     bool
	}{
		{"a public IPv4 address", strict, "93.184.215.14", true},
		{"a public IPv6 address", strict, "2606:2800:21f:cb07:6820:80da:af6b:8b2c", true},
		{"a 6to4 address of a public IPv4 address", strict, "2002:5db8:d70e::1", true},
		{"a NAT64 address of a public IPv4 address", strict, "64:ff9b::5db8:d70e", true},

		{"the metadata service", everything, "169.254.169.254", false},
		{"ECS task metadata", everything, "169.254.170.2", false},
		{"IPv6 link-local", everything, "fe80::1", false},
		{"IPv6 link-local with a zone", everything, "fe80::1%lo", false},
		{"a public address with a zone", everything, "2606:2800::1%eth0", false},
		{"AWS's IPv6 metadata service", everything, "fd00:ec2::254", false},
		{"Alibaba's metadata service inside CGNAT", everything, "100.100.100.200", false},
		{"Azure's WireServer", everything, "168.63.129.16", false},
		{"metadata as NAT64", everything, "64:ff9b::a9fe:a9fe", false},
		{"metadata as IPv4-mapped IPv6", everything, "::ffff:169.254.169.254", false},
		{"metadata as IPv4-compatible IPv6", everything, "::a9fe:a9fe", false},
		{"metadata as 6to4", everything, "2002:a9fe:a9fe::1", false},
		{"Alibaba's metadata as NAT64", everything, "64:ff9b::6464:64c8", false},
		{"local-use NAT64", everything, "64:ff9b:1::a9fe:a9fe", false},
		{"Teredo", everything, "2001:0:4136:e378:8000:63bf:3fff:fdd2", false},
		{"IPv4 unspecified", everything, "0.0.0.0", false},
		{"this network", everything, "0.1.2.3", false},
		{"IPv6 unspecified", everything, "::", false},
		{"IPv4 multicast", everything, "224.0.0.1", false},
		{"IPv6 multicast", everything, "ff02::1", false},
		{"broadcast", everything, "255.255.255.255", false},
		{"a listed link-local range is still refused", listed, "169.254.169.254", false},

		{"loopback by default", strict, "127.0.0.1", false},
		{"loopback anywhere in 127/8", strict, "127.1.2.3", false},
		{"IPv6 loopback", strict, "::1", false},
		{"loopback as IPv4-mapped IPv6", strict, "::ffff:127.0.0.1", false},
		{"loopback as NAT64", strict, "64:ff9b::7f00:1", false},
		{"RFC 1918 10/8 by default", strict, "10.96.0.10", false},
		{"RFC 1918 172.16/12 by default", strict, "172.20.0.1", false},
		{"RFC 1918 192.168/16 by default", strict, "192.168.1.1", false},
		{"CGNAT by default", strict, "100.64.0.1", false},
		{"ULA by default", strict, "fd12:3456::1", false},
		{"private as IPv4-mapped IPv6", strict, "::ffff:10.0.0.1", false},
		{"private as 6to4", strict, "2002:0a00:0001::1", false},

		{"loopback when the platform allows it", local, "127.0.0.1", true},
		{"IPv6 loopback when the platform allows it", local, "::1", true},
		{"private is not loopback", local, "10.0.0.1", false},
		{"a ClusterIP when the platform allows private ranges", cluster, "10.96.0.10", true},
		{"CGNAT pods when the platform allows private ranges", cluster, "100.64.3.4", true},
		{"ULA when the platform allows private ranges", cluster, "fd12:3456::1", true},
		{"a private NAT64 address when the platform allows private ranges", cluster, "64:ff9b::a00:1", true},
		{"loopback is not private", cluster, "127.0.0.1", false},
		{"a listed range", listed, "10.96.0.10", true},
		{"outside the listed range", listed, "10.0.0.1", false},
		{"a listed range as IPv4-mapped IPv6", listed, "::ffff:10.96.0.10", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.policy.Allowed(netip.MustParseAddr(c.ip))
			if (err == nil) != c.ok {
				t.Fatalf("Allowed(%s) = %v, want allowed=%v", c.ip, err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrDenied) {
				t.Errorf("Allowed(%s) = %v, does not wrap ErrDenied", c.ip, err)
			}
		})
	}
	if err := strict.Allowed(netip.Addr{}); err == nil {
		t.Error("the zero address was allowed")
	}
}

func TestDeniedErrorSaysWhetherThePlatformCanAllowIt(t *testing.T) {
	var d *DeniedError
	if !errors.As(Policy{}.Allowed(netip.MustParseAddr("10.0.0.1")), &d) || !d.Platform {
		t.Errorf("a private address: %+v, want one the platform may allow", d)
	}
	if !errors.As(Policy{AllowPrivate: true}.Allowed(netip.MustParseAddr("169.254.169.254")), &d) || d.Platform {
		t.Errorf("the metadata service: %+v, want one nobody may allow", d)
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes("--egress-allow-cidrs", []string{"10.96.0.0/12", "192.168.1.7", "fd00::1/64", ""})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.96.0.0/12", "192.168.1.7/32", "fd00::/64"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "cluster", "fe80::1%eth0"} {
		if _, err := ParsePrefixes("--egress-allow-cidrs", []string{bad}); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}
