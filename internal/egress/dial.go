package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// Dialer connects only where its Policy allows.
type Dialer struct {
	Policy Policy
	// Dialer makes the connections; nil is a net.Dialer with a 5 s
	// timeout. Its Control, if any, is replaced.
	Dialer *net.Dialer
	// Lookup resolves a name; nil is net.DefaultResolver.LookupNetIP.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Resolve returns host's addresses when every one of them is allowed: the
// host of a URL, a name or an IP literal (an IPv6 literal with or without
// brackets, a zone included).
func (d *Dialer) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return nil, errors.New("no host")
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		lookup := d.Lookup
		if lookup == nil {
			lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if addrs, err = lookup(ctx, host); err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: no address", host)
		}
	}
	for _, a := range addrs {
		if err := d.Policy.Allowed(a); err != nil {
			if a.String() == host {
				return nil, err
			}
			return nil, fmt.Errorf("%s resolves to %w", host, err)
		}
	}
	return addrs, nil
}

// DialContext resolves address's host once, checks every address (Resolve)
// and dials those it checked, in order, until one answers.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	addrs, err := d.Resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	nd := d.netDialer()
	var errs []error
	for _, a := range addrs {
		if (strings.HasSuffix(network, "4") && !a.Unmap().Is4()) || (strings.HasSuffix(network, "6") && !a.Is6()) {
			continue
		}
		conn, err := nd.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("dial %s: no %s address", host, network)
	}
	return nil, errors.Join(errs...)
}

// netDialer is d.Dialer, or the default, checking once more the address
// each connection is made to (whatever resolved it).
func (d *Dialer) netDialer() *net.Dialer {
	nd := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if d.Dialer != nil {
		c := *d.Dialer
		nd = &c
	}
	p := d.Policy
	nd.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("dial %s: %w", address, err)
		}
		return p.Allowed(ap.Addr())
	}
	return nd
}

// Transport is an HTTP transport whose connections follow p: every
// connection through a Dialer, and the environment's proxy only when
// p.UseProxy (the request's host checked here first; the proxy, the
// platform's choice, dialed whatever its address). Callers set their own
// timeouts on it.
func (p Policy) Transport() *http.Transport {
	return p.transport(httpproxy.FromEnvironment())
}

// transport is Transport with the proxy configuration env.
func (p Policy) transport(env *httpproxy.Config) *http.Transport {
	d := &Dialer{Policy: p}
	t := &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if !p.UseProxy {
		return t
	}
	proxyFor := env.ProxyFunc()
	proxies := map[string]bool{}
	for _, raw := range []string{env.HTTPProxy, env.HTTPSProxy} {
		if a := proxyAddress(raw); a != "" {
			proxies[a] = true
		}
	}
	direct := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		if proxies[address] {
			return direct.DialContext(ctx, network, address)
		}
		return d.DialContext(ctx, network, address)
	}
	t.Proxy = func(r *http.Request) (*url.URL, error) {
		u, err := proxyFor(r.URL)
		if err != nil || u == nil {
			return u, err
		}
		// The proxy would resolve the host itself: check it here first.
		// (It may resolve it to another address than the one checked; a
		// platform that opts in to its proxy trusts it on that.)
		if _, err := d.Resolve(r.Context(), r.URL.Hostname()); err != nil {
			return nil, err
		}
		return u, nil
	}
	return t
}

// proxyAddress is the host:port a proxy URL is dialed at, as
// http.Transport dials it, or "" for none.
func proxyAddress(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		if u, err = url.Parse("http://" + raw); err != nil || u.Host == "" {
			return ""
		}
	}
	if u.Port() != "" {
		return u.Host
	}
	port := map[string]string{"http": "80", "https": "443", "socks5": "1080", "socks5h": "1080"}[u.Scheme]
	if port == "" {
		return ""
	}
	return net.JoinHostPort(u.Hostname(), port)
}
