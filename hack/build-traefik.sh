#!/usr/bin/env bash
# Builds Traefik, the Gateway API data plane of the real-node e2e loops,
# from the Go module proxy into a cache outside the repository, keyed by
# version. Traefik is not a dependency of Scribe's go.mod. A warm run
# returns at once.
#
#   hack/build-traefik.sh     # TRAEFIK_VERSION=v3.7.13 by default
#
# Prints the path of the traefik binary on stdout; what it builds goes to
# stderr.
#
# Traefik cannot be built with `go install`: its go.mod has replace lines,
# one of them to a local folder (./pkg/config/dynamic/ext, a module of its
# own that the published zip leaves out). The throwaway module keeps the
# other replace lines and go.sum, and points that one at a stand-in written
# here: two empty structs, the extension point's open-source shape (the
# config types embed them and copy them by value, nothing reads a field).
# The web UI is not built (no npm): the dashboard stays off.
#
# Two more stand-ins, for modules the Go module proxy here refuses (HTTP 403
# "not available"):
#   - the ACME DNS challenge providers: Traefik's ACME resolver imports
#     lego's provider factory, which imports ~190 DNS providers' SDKs, some
#     refused. The build uses a copy of the lego module whose factory file
#     is replaced by one that knows no provider (the loop uses no ACME).
#   - Traefik's fork of go-http-auth (basic and digest auth middlewares):
#     a copy of the published upstream github.com/abbot/go-http-auth v0.4.0
#     is used, with the two names the fork adds written here (CheckSecret,
#     the comparison CheckAuth makes; RequireAuthStale, as RequireAuth).
set -euo pipefail

mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
exec 9>"${XDG_CACHE_HOME:-$HOME/.cache}/scribe/.build-traefik.lock"
flock 9

TRAEFIK_VERSION="${TRAEFIK_VERSION:-v3.7.13}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
DIR="$CACHE/traefik-${TRAEFIK_VERSION}"
BIN="$DIR/traefik"

log() { echo "build-traefik: $*" >&2; }
moddir() { go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$DIR"
src="$(moddir "github.com/traefik/traefik/v3@${TRAEFIK_VERSION}")"
work="$CACHE/work/traefik-${TRAEFIK_VERSION}"
mkdir -p "$work/ext"
cat > "$work/ext/go.mod" <<'MOD'
module github.com/traefik/traefik/dynamic/ext

go 1.26
MOD
cat > "$work/ext/ext.go" <<'GO'
// Package ext is the stand-in for Traefik's dynamic configuration
// extension point, which its published module zip does not carry.
package ext

// HTTP is embedded in the HTTP configuration; empty in this build.
type HTTP struct{}

// Router is embedded in a router's configuration; empty in this build.
type Router struct{}
GO
lego_version="$(awk '$1 == "github.com/go-acme/lego/v5" {print $2; exit}' "$src/go.mod")"
lego_src="$(moddir "github.com/go-acme/lego/v5@${lego_version}")"
if [[ ! -f "$work/lego/.copied-${lego_version}" ]]; then
  rm -rf "$work/lego"
  cp -r "$lego_src" "$work/lego"
  chmod -R u+w "$work/lego"
  rm -f "$work/lego/providers/dns/dns_providers_test.go"
  cat > "$work/lego/providers/dns/zz_gen_dns_providers.go" <<'GO'
// Package dns stands in for lego's DNS challenge provider factory in the
// loop's Traefik build: no DNS provider is built in.
package dns

import (
	"fmt"

	"github.com/go-acme/lego/v5/challenge"
)

// NewDNSChallengeProviderByName refuses every provider.
func NewDNSChallengeProviderByName(name string) (challenge.Provider, error) {
	return nil, fmt.Errorf("DNS challenge provider %q: not built into this Traefik", name)
}
GO
  touch "$work/lego/.copied-${lego_version}"
fi
if [[ ! -f "$work/go-http-auth/.copied" ]]; then
  rm -rf "$work/go-http-auth"
  cp -r "$(moddir "github.com/abbot/go-http-auth@v0.4.0")" "$work/go-http-auth"
  chmod -R u+w "$work/go-http-auth"
  rm -rf "$work/go-http-auth/examples"
  printf 'module github.com/abbot/go-http-auth\n\ngo 1.26\n' > "$work/go-http-auth/go.mod"
  cat > "$work/go-http-auth/traefik_names.go" <<'GO'
package auth

import (
	"net/http"
	"strings"
)

// CheckSecret reports whether password matches secret, a hash as an
// htpasswd file holds it: the comparison CheckAuth makes.
func CheckSecret(password, secret string) bool {
	compare := compareFuncs[0].compare
	for _, cmp := range compareFuncs[1:] {
		if strings.HasPrefix(secret, cmp.prefix) {
			compare = cmp.compare
			break
		}
	}
	return compare([]byte(secret), []byte(password)) == nil
}

// RequireAuthStale asks for authentication again, as RequireAuth does.
func (a *DigestAuth) RequireAuthStale(w http.ResponseWriter, r *http.Request) {
	a.RequireAuth(w, r)
}
GO
  touch "$work/go-http-auth/.copied"
fi
{
  printf 'module scribe.local/traefikbuild\n\ngo 1.26\n\nrequire github.com/traefik/traefik/v3 %s\n\n' "$TRAEFIK_VERSION"
  printf 'require github.com/traefik/traefik/dynamic/ext v0.0.0-00010101000000-000000000000\n\n'
  printf 'replace github.com/traefik/traefik/dynamic/ext => ./ext\n\n'
  printf 'replace github.com/go-acme/lego/v5 => ./lego\n\n'
  printf 'replace github.com/abbot/go-http-auth => ./go-http-auth\n\n'
  sed -n '/^replace (/,/^)/p' "$src/go.mod" | grep -v 'github.com/abbot/go-http-auth'
  sed -n '/^exclude /p' "$src/go.mod"
} > "$work/go.mod"
cp "$src/go.sum" "$work/go.sum"
chmod u+w "$work/go.sum"
ld="-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=${TRAEFIK_VERSION}"
log "building traefik ${TRAEFIK_VERSION} into $DIR (cold: several minutes on 2 cores)"
(cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ld" \
  -o "$BIN.tmp.$$" github.com/traefik/traefik/v3/cmd/traefik) >&2
mv "$BIN.tmp.$$" "$BIN"
log "built $BIN"
echo "$BIN"
