package credurl

import (
	"net"
	"strings"
)

// defaultPorts are the ports a URL of each scheme reaches when it names
// none.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ssh": "22", "git": "9418", "oci": "443"}

// RemoteKey is what identifies the repository a Git or OCI URL reaches:
// its scheme, host and port, and repository path, normalised (scheme and
// host in lower case, a default port written or not, user info ignored,
// no trailing slash or ".git"; the scp form git@host:path read as
// ssh://git@host/path). The path keeps its case: servers differ on it.
// ok is false for a URL that cannot be bound (see Within) or that names
// no path.
func RemoteKey(raw string) (key string, ok bool) {
	u, err := boundURL(raw)
	if err != nil {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = defaultPorts[scheme]
	}
	p := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	p = strings.TrimRight(p, "/")
	if p == "" || host == "" {
		return "", false
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/" + p, true
}

// SameRemote reports whether a and b reach the same repository on the
// same server (RemoteKey): another host, port or scheme with the same
// path is another repository, which a tenant could
// name to borrow a source that fetches it with someone else's
// credentials.
func SameRemote(a, b string) bool {
	ka, ok := RemoteKey(a)
	if !ok {
		return false
	}
	kb, ok := RemoteKey(b)
	return ok && ka == kb
}
