package gitsink

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/scribe-gitops/scribe/internal/credurl"
)

// Keys of a Git credentials Secret, the same as Flux's GitRepository uses.
const (
	SecretUsername    = "username"
	SecretPassword    = "password"
	SecretBearerToken = "bearerToken"
	SecretIdentity    = "identity"
	SecretKnownHosts  = "known_hosts"
)

// AuthFromSecret builds the auth method for url from the data of a Secret:
//   - https/http: "username" and "password" (basic), or "bearerToken";
//   - ssh: "identity" (a private key; "password" is its passphrase) and
//     "known_hosts", which is required: the host key is always checked.
//
// Empty data means anonymous access. Keys that do not fit the URL's scheme
// are an error rather than silently ignored.
func AuthFromSecret(url string, data map[string][]byte) (transport.AuthMethod, error) {
	// Credentials come from data only; a URL that carries some is refused
	// before it is parsed, so no parse error can repeat them.
	if err := credurl.Check(url); err != nil {
		return nil, fmt.Errorf("git URL: %w: give credentials in the Secret (or --secret-dir, SCRIBE_GIT_*), never in the URL", err)
	}
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, fmt.Errorf("git URL %q: %w", url, err)
	}
	get := func(k string) string { return strings.TrimRight(string(data[k]), "\r\n") }
	switch ep.Protocol {
	case "http", "https":
		if len(data[SecretIdentity]) > 0 {
			return nil, fmt.Errorf("git credentials for %s: %q is an SSH key, but the URL is %s", url, SecretIdentity, ep.Protocol)
		}
		if tok := get(SecretBearerToken); tok != "" {
			if get(SecretUsername) != "" {
				return nil, fmt.Errorf("git credentials for %s: set %q or %q/%q, not both", url, SecretBearerToken, SecretUsername, SecretPassword)
			}
			return &githttp.TokenAuth{Token: tok}, nil
		}
		user, pass := get(SecretUsername), get(SecretPassword)
		if user == "" && pass == "" {
			return nil, nil
		}
		if pass == "" {
			return nil, fmt.Errorf("git credentials for %s: %q is set but %q is empty", url, SecretUsername, SecretPassword)
		}
		if user == "" {
			user = "git" // forges accept any user name with a token as password
		}
		return &githttp.BasicAuth{Username: user, Password: pass}, nil
	case "ssh":
		identity := data[SecretIdentity]
		if len(identity) == 0 {
			return nil, fmt.Errorf("git credentials for %s: an SSH URL needs %q (a private key) in the secret", url, SecretIdentity)
		}
		if len(data[SecretKnownHosts]) == 0 {
			return nil, fmt.Errorf("git credentials for %s: %q is required for SSH; Scribe never skips the host key check", url, SecretKnownHosts)
		}
		user := ep.User
		if user == "" {
			user = "git"
		}
		keys, err := gitssh.NewPublicKeys(user, identity, get(SecretPassword))
		if err != nil {
			return nil, fmt.Errorf("git credentials for %s: %q: %w", url, SecretIdentity, err)
		}
		cb, err := hostKeyCallback(data[SecretKnownHosts])
		if err != nil {
			return nil, fmt.Errorf("git credentials for %s: %q: %w", url, SecretKnownHosts, err)
		}
		keys.HostKeyCallback = cb
		return keys, nil
	default:
		if len(data) > 0 {
			return nil, fmt.Errorf("git credentials for %s: the %s scheme takes no credentials", url, ep.Protocol)
		}
		return nil, nil
	}
}

// hostKeyCallback checks host keys against known_hosts content. It parses
// every line up front, so a malformed file is an error now rather than a
// mysterious handshake failure later.
func hostKeyCallback(knownHosts []byte) (ssh.HostKeyCallback, error) {
	rest := knownHosts
	n := 0
	for len(rest) > 0 {
		var err error
		_, _, _, _, rest, err = ssh.ParseKnownHosts(rest)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("no host keys")
	}
	// knownhosts.New reads files; the content lives in a private temporary
	// file only for as long as it takes to parse it.
	dir, err := os.MkdirTemp("", "scribe-known-hosts-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(p, knownHosts, 0o600); err != nil {
		return nil, err
	}
	cb, err := knownhosts.New(p)
	if err != nil {
		return nil, err
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		if err := cb(hostname, remote, key); err != nil {
			var ke *knownhosts.KeyError
			if errors.As(err, &ke) && len(ke.Want) > 0 {
				return fmt.Errorf("host key mismatch for %s: the server presented %s %s, known_hosts has another key: %w",
					hostname, key.Type(), ssh.FingerprintSHA256(key), err)
			}
			return fmt.Errorf("host key of %s (%s %s) is unknown: knownhosts: key is unknown: %w", hostname, key.Type(), ssh.FingerprintSHA256(key), err)
		}
		return nil
	}, nil
}
