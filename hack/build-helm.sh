#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy into a cache outside the
# repository, keyed by version, for the chart's tests and make targets.
# Helm is not a dependency of Scribe's go.mod: it is built on its own, with
# the versions of its own go.mod. A warm run returns at once.
#
#   hack/build-helm.sh            # HELM_VERSION=v3.22.0 by default
#
# Prints the path of the helm binary on stdout; what it builds goes to
# stderr.
set -euo pipefail

# One build at a time per script and machine: parallel test loops (and a
# `make demo` beside `make test`) call it at once on a cold cache; the
# second waits here and then finds the binaries cached.
mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
exec 9>"${XDG_CACHE_HOME:-$HOME/.cache}/scribe/.build-helm.lock"
flock 9

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
DIR="$CACHE/helm-${HELM_VERSION}"
HELM="$DIR/helm"

log() { echo "build-helm: $*" >&2; }

if [[ -x "$HELM" ]]; then
  echo "$HELM"
  exit 0
fi
mkdir -p "$DIR"

# Version, as the release builds stamp it (helm version prints it).
ld="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
log "building helm ${HELM_VERSION} into $DIR (cold: a few minutes on 2 cores)"
tmp="$(mktemp -d "$DIR/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if ! GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" >&2; then
  # go install refuses a module whose go.mod has replace directives: build
  # it from a throwaway module that requires the published one instead.
  work="$CACHE/work/helm-${HELM_VERSION}"
  log "go install failed; building from a throwaway module in $work"
  mkdir -p "$work"
  if [[ ! -f "$work/go.mod" ]]; then
    printf 'module scribe.local/helmbuild\n\ngo 1.26\n\nrequire helm.sh/helm/v3 %s\n' "$HELM_VERSION" > "$work/go.mod"
  fi
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm) >&2
fi
mv "$tmp/helm" "$HELM"
log "built $("$HELM" version --short 2>/dev/null || echo "$HELM")"
echo "$HELM"
