#!/usr/bin/env bash
# Builds Gitea, the real forge the end-to-end tests open pull requests on,
# from the Go module proxy into a cache outside the repository, keyed by
# version. A warm run returns at once.
#
#   hack/build-gitea.sh     # prints the directory holding `gitea` on stdout
#
# Gitea cannot be built with `go install` (its go.mod has replace lines):
# build it in a throwaway module that requires code.gitea.io/gitea, with its
# replace lines and its go.sum, GOFLAGS=-mod=mod, and the SQLite build tags.
# Without the `bindata` tag Gitea reads its templates and options from
# STATIC_ROOT_PATH: the script prints the module folder into
# $BIN/static-root, which the tests use.
set -euo pipefail

# One build at a time per script and machine: parallel test loops (and a
# `make demo` beside `make test`) call it at once on a cold cache; the
# second waits here and then finds the binaries cached.
mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
exec 9>"${XDG_CACHE_HOME:-$HOME/.cache}/scribe/.build-gitea.lock"
flock 9

GITEA_VERSION="${GITEA_VERSION:-v1.26.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
BIN="$CACHE/gitea-${GITEA_VERSION}"
mkdir -p "$BIN"

log() { echo "build-gitea: $*" >&2; }

moddir() { go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }

if [[ ! -x "$BIN/gitea" ]]; then
  src="$(moddir "code.gitea.io/gitea@${GITEA_VERSION}")"
  work="$CACHE/work/gitea-${GITEA_VERSION}"
  mkdir -p "$work"
  {
    printf 'module scribe.local/giteabuild\n\ngo 1.26\n\nrequire code.gitea.io/gitea %s\n\n' "$GITEA_VERSION"
    sed -n '/^replace (/,/^)/p' "$src/go.mod"
    grep -E '^replace [^(]' "$src/go.mod" | sed 's#//.*##' || true
  } > "$work/go.mod"
  cp "$src/go.sum" "$work/go.sum"
  chmod u+w "$work/go.sum"
  tags="sqlite sqlite_unlock_notify"
  log "building gitea ${GITEA_VERSION} with tags '${tags}' (cold: ~5 minutes on 2 cores)"
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=1 go build -trimpath -tags "$tags" \
    -ldflags "-s -w -X main.Version=${GITEA_VERSION#v} -X 'main.Tags=${tags}'" \
    -o "$BIN/gitea.tmp.$$" code.gitea.io/gitea)
  mv "$BIN/gitea.tmp.$$" "$BIN/gitea"
  printf '%s\n' "$src" > "$BIN/static-root"
fi
echo "$BIN"
