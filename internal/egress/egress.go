// Package egress is Scribe's one rule for where the controller may connect
// when a tenant chose the URL: an analysis check's provider, a rollout
// webhook, a forge's API, an OCI registry. Whoever writes a Workload or a
// Repository chooses those addresses, and the controller's answer (a
// status message quoting the server) reaches them; without a rule, that is
// a way to read the cloud's metadata service or any in-cluster endpoint
// from inside the controller's network.
//
// The rule (Policy.Allowed) is a pure decision on an IP address. Some
// addresses are never reached, whatever the platform says: unspecified and
// "this network" (0.0.0.0/8, ::), link-local (169.254.0.0/16, fe80::/10,
// where every cloud's metadata service answers), multicast and reserved
// ranges, the metadata services outside link-local (AWS's fd00:ec2::254,
// Alibaba's 100.100.100.200, Azure's WireServer 168.63.129.16), an address
// with an IPv6 zone, and the IPv6 forms that carry one of those IPv4
// addresses (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, NAT64
// 64:ff9b::/96, 6to4 2002::/16; Teredo and local-use NAT64 64:ff9b:1::/48,
// whose IPv4 address cannot be read back, are refused outright). Loopback
// (127.0.0.0/8, ::1) and private ranges (RFC 1918, CGNAT 100.64.0.0/10,
// ULA fc00::/7, the deprecated site-local fec0::/10) are reached only when
// the platform allows them (AllowLoopback, AllowPrivate) or lists them
// (AllowCIDRs). Every other address is public and reached.
//
// Dialer applies the rule where it cannot be dodged: it resolves a name
// once, checks every address the name has (one bad address refuses the
// name) and dials the address it checked, never the name again, so a name
// whose answer changes between the check and the connection (DNS
// rebinding) gains nothing. A proxy from the environment (HTTP_PROXY,
// HTTPS_PROXY, NO_PROXY) is not used unless the platform opts in
// (UseProxy); then the request's host is resolved and checked locally
// before the proxy is asked, and the proxy itself, which the platform
// chose, is dialed whatever its address.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
)

// Policy is where a tenant's URL may lead. The zero Policy reaches public
// addresses only.
type Policy struct {
	// AllowLoopback reaches 127.0.0.0/8 and ::1: the controller's own
	// pod, or the machine it runs on outside a cluster.
	AllowLoopback bool
	// AllowPrivate reaches the private ranges: 10.0.0.0/8, 172.16.0.0/12,
	// 192.168.0.0/16, 100.64.0.0/10, fc00::/7 and fec0::/10, where a
	// cluster's Services and pods usually are.
	AllowPrivate bool
	// AllowCIDRs are loopback or private ranges reached even when the
	// two switches above are off. They never open an address that is
	// refused whatever the platform says (link-local, metadata, ...).
	AllowCIDRs []netip.Prefix
	// UseProxy sends requests through the proxy the environment names
	// (HTTP_PROXY, HTTPS_PROXY, NO_PROXY), after checking the request's
	// host here. Off, tenant requests go direct.
	UseProxy bool
}

// ErrDenied is wrapped by every refusal of Allowed and of the Dialer.
var ErrDenied = errors.New("the controller does not connect there for a tenant's URL")

// DeniedError says which address was refused and why.
type DeniedError struct {
	Addr netip.Addr
	// Reason names the range, e.g. "link-local (a cloud's metadata service answers there)".
	Reason string
	// Platform says the platform may allow it (--egress-allow-*).
	Platform bool
}

func (e *DeniedError) Error() string {
	s := e.Addr.String() + " is " + e.Reason + ": the controller does not connect there for a tenant's URL"
	if e.Platform {
		s += " unless the platform allows it (scribe controller --egress-allow-private, --egress-allow-loopback, --egress-allow-cidrs)"
	}
	return s
}

func (e *DeniedError) Unwrap() error { return ErrDenied }

// class is what an address is to the policy.
type class int

const (
	public class = iota
	loopback
	private
	never
)

type rangeOf struct {
	prefix netip.Prefix
	class  class
	reason string
}

// ranges are checked in order; the first that holds the address decides.
// Single addresses come before the ranges that hold them.
func ranges() []rangeOf {
	p := netip.MustParsePrefix
	return []rangeOf{
		// Metadata services outside link-local.
		{p("100.100.100.200/32"), never, "Alibaba Cloud's metadata service"},
		{p("168.63.129.16/32"), never, "Azure's WireServer (host configuration)"},
		{p("fd00:ec2::254/128"), never, "AWS's IPv6 metadata service"},
		// IPv4.
		{p("0.0.0.0/8"), never, `"this network" (0.0.0.0 reaches the local host)`},
		{p("169.254.0.0/16"), never, "link-local (a cloud's metadata service answers there)"},
		{p("224.0.0.0/4"), never, "multicast"},
		{p("240.0.0.0/4"), never, "reserved or broadcast"},
		{p("127.0.0.0/8"), loopback, "loopback"},
		{p("10.0.0.0/8"), private, "private (RFC 1918)"},
		{p("172.16.0.0/12"), private, "private (RFC 1918)"},
		{p("192.168.0.0/16"), private, "private (RFC 1918)"},
		{p("100.64.0.0/10"), private, "shared address space (CGNAT, RFC 6598)"},
		// IPv6.
		{p("::/128"), never, "unspecified"},
		{p("::1/128"), loopback, "loopback"},
		{p("fe80::/10"), never, "link-local (a cloud's metadata service answers there)"},
		{p("ff00::/8"), never, "multicast"},
		{p("2001::/32"), never, "Teredo (the IPv4 address it tunnels to cannot be checked)"},
		{p("64:ff9b:1::/48"), never, "local-use NAT64 (the IPv4 address it translates to cannot be checked)"},
		{p("fc00::/7"), private, "unique local (ULA)"},
		{p("fec0::/10"), private, "site-local"},
	}
}

// embedded is the IPv4 address an IPv6 address stands for, and how: an
// IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96) or 6to4 address
// reaches that IPv4 address.
func embedded(ip netip.Addr) (netip.Addr, string, bool) {
	if !ip.Is6() {
		return netip.Addr{}, "", false
	}
	b := ip.As16()
	switch {
	case ip.Is4In6():
		return ip.Unmap(), "IPv4-mapped", true
	case netip.MustParsePrefix("64:ff9b::/96").Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case netip.MustParsePrefix("2002::/16").Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	case netip.MustParsePrefix("::/96").Contains(ip) && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback():
		return netip.AddrFrom4([4]byte(b[12:16])), "IPv4-compatible", true
	}
	return netip.Addr{}, "", false
}

// classify says what ip is, and why.
func classify(ip netip.Addr) (class, string) {
	for _, r := range ranges() {
		if r.prefix.Contains(ip) {
			return r.class, r.reason
		}
	}
	return public, ""
}

// Allowed says why the controller may not connect to ip for a tenant's
// URL (a *DeniedError), or nil.
func (p Policy) Allowed(ip netip.Addr) error {
	if !ip.IsValid() {
		return &DeniedError{Addr: ip, Reason: "not an IP address"}
	}
	if ip.Zone() != "" {
		// A zone scopes a link-local address to an interface; it has no
		// business in a tenant's URL.
		return &DeniedError{Addr: ip, Reason: "an address with an IPv6 zone"}
	}
	target, via := ip, ""
	if v4, how, ok := embedded(ip); ok {
		target, via = v4, how
	}
	c, reason := classify(target)
	if via != "" {
		if c == public {
			// The IPv6 form itself may still be in a refused range (a
			// 6to4 address of a public IPv4 is public).
			c, reason = classify(ip)
		} else {
			reason = fmt.Sprintf("%s (%s form of %s)", reason, via, target)
		}
	}
	switch c {
	case public:
		return nil
	case never:
		return &DeniedError{Addr: ip, Reason: reason}
	case loopback:
		if p.AllowLoopback || p.listed(ip, target) {
			return nil
		}
	case private:
		if p.AllowPrivate || p.listed(ip, target) {
			return nil
		}
	}
	return &DeniedError{Addr: ip, Reason: reason, Platform: true}
}

// listed says whether AllowCIDRs holds ip or the IPv4 address it stands for.
func (p Policy) listed(ip, target netip.Addr) bool {
	for _, c := range p.AllowCIDRs {
		if c.Contains(ip) || c.Contains(target) {
			return true
		}
	}
	return false
}

// ParsePrefixes reads a list of CIDRs or single addresses (a /32 or /128)
// for AllowCIDRs; flag names the setting in errors.
func ParsePrefixes(flag string, list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		if s == "" {
			continue
		}
		if pr, err := netip.ParsePrefix(s); err == nil {
			if pr.Addr().Zone() != "" {
				return nil, fmt.Errorf("%s: %q: want no IPv6 zone", flag, s)
			}
			out = append(out, pr.Masked())
			continue
		}
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("%s: %q is neither a CIDR nor an IP address", flag, s)
		}
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out, nil
}
