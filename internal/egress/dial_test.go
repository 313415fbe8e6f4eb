package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http/httpproxy"
)

// lookups is a resolver that answers each name from its table and counts
// the questions.
type lookups struct {
	table map[string][][]netip.Addr
	asked atomic.Int32
}

func (l *lookups) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	n := int(l.asked.Add(1)) - 1
	answers := l.table[host]
	if len(answers) == 0 {
		return nil, errors.New("no such host")
	}
	return answers[min(n, len(answers)-1)], nil
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestDialerChecksEveryAddressAndDialsTheOneChecked(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	cases := []struct {
		name    string
		policy  Policy
		address string
		answers [][]netip.Addr
		ok      bool
	}{
		{"a name of a loopback address", Policy{}, "svc.test", [][]netip.Addr{addrs("127.0.0.1")}, false},
		{"a name with a public and a metadata address", Policy{AllowLoopback: true}, "svc.test", [][]netip.Addr{addrs("127.0.0.1", "169.254.169.254")}, false},
		{"a name of the IPv6 metadata service", Policy{AllowPrivate: true}, "svc.test", [][]netip.Addr{addrs("fd00:ec2::254")}, false},
		{"a link-local literal with a zone", Policy{AllowLoopback: true}, "[fe80::1%lo]", nil, false},
		{"a loopback literal", Policy{}, "127.0.0.1", nil, false},
		{"a loopback literal when allowed", Policy{AllowLoopback: true}, "127.0.0.1", nil, true},
		// svc.test is in no real DNS: the connection can only be made to
		// the address checked.
		{"a name of an allowed address", Policy{AllowLoopback: true}, "svc.test", [][]netip.Addr{addrs("127.0.0.1")}, true},
		// The name answers an allowed address first and loopback after:
		// the dialer never asks again.
		{"DNS rebinding", Policy{AllowLoopback: true}, "svc.test", [][]netip.Addr{addrs("127.0.0.1"), addrs("169.254.169.254")}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := &lookups{table: map[string][][]netip.Addr{"svc.test": c.answers}}
			d := &Dialer{Policy: c.policy, Lookup: l.lookup}
			conn, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort(trimBrackets(c.address), port))
			if err == nil {
				_ = conn.Close()
			}
			if (err == nil) != c.ok {
				t.Fatalf("dial %s: %v, want ok=%v", c.address, err, c.ok)
			}
			if !c.ok && !errors.Is(err, ErrDenied) {
				t.Errorf("dial %s: %v, want a refusal by the policy", c.address, err)
			}
			if n := l.asked.Load(); n > 1 {
				t.Errorf("the name was resolved %d times, want once", n)
			}
		})
	}
}

func trimBrackets(s string) string {
	if len(s) > 1 && s[0] == '[' {
		return s[1 : len(s)-1]
	}
	return s
}

// The environment's proxy would be asked for the metadata service's URL
// and its answer would reach the tenant: tenant requests go direct unless
// the platform opts in, and then their host is checked before the proxy
// is asked.
func TestTransportUsesTheProxyOnlyWhenAllowedAndChecksTheTargetFirst(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		proxied.Add(1)
		_, _ = w.Write([]byte(`{"AccessKeyId":"leaked"}`))
	}))
	t.Cleanup(proxy.Close)
	env := &httpproxy.Config{HTTPProxy: proxy.URL, HTTPSProxy: proxy.URL}
	cases := []struct {
		name, url     string
		policy        Policy
		ok, toProxied bool
	}{
		{"the metadata service through the proxy, not opted in", "http://169.254.169.254/latest/meta-data/", Policy{AllowPrivate: true, AllowLoopback: true}, false, false},
		{"the metadata service through the proxy, opted in", "http://169.254.169.254/latest/meta-data/", Policy{UseProxy: true, AllowPrivate: true}, false, false},
		{"a private address through the proxy, opted in", "http://10.1.2.3/", Policy{UseProxy: true}, false, false},
		// The proxy is on loopback, which tenants may not reach: the
		// platform chose it.
		{"a public address through the proxy, opted in", "http://203.0.113.7/", Policy{UseProxy: true}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := proxied.Load()
			tr := c.policy.transport(env)
			t.Cleanup(tr.CloseIdleConnections)
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, c.url, nil)
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			if (err == nil) != c.ok {
				t.Fatalf("GET %s: %v, want ok=%v", c.url, err, c.ok)
			}
			if !c.ok && !errors.Is(err, ErrDenied) {
				var ue *url.Error
				if !errors.As(err, &ue) || !errors.Is(ue.Err, ErrDenied) {
					t.Errorf("GET %s: %v, want a refusal by the policy", c.url, err)
				}
			}
			if got := proxied.Load() > before; got != c.toProxied {
				t.Errorf("the proxy was asked: %v, want %v", got, c.toProxied)
			}
		})
	}
}

func TestProxyAddress(t *testing.T) {
	for raw, want := range map[string]string{
		"":                       "",
		"http://proxy:3128":      "proxy:3128",
		"proxy.corp:8080":        "proxy.corp:8080",
		"http://proxy.corp":      "proxy.corp:80",
		"https://proxy.corp":     "proxy.corp:443",
		"socks5://[fd00::1]":     "[fd00::1]:1080",
		"http://user:pw@p.corp/": "p.corp:80",
	} {
		if got := proxyAddress(raw); got != want {
			t.Errorf("proxyAddress(%q) = %q, want %q", raw, got, want)
		}
	}
}
