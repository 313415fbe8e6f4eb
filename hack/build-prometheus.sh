#!/usr/bin/env bash
# Builds Prometheus, the metrics store of the real-node e2e loops, from the
# Go module proxy into a cache outside the repository, keyed by version.
# Prometheus is not a dependency of Scribe's go.mod (only its client
# libraries are). Debian's prometheus (2.42) has no Kubernetes discovery
# here. A warm run returns at once.
#
#   hack/build-prometheus.sh     # PROMETHEUS_VERSION=v0.316.0 by default
#
# Prints the path of the prometheus binary on stdout; what it builds goes
# to stderr.
#
# Built without the web UI assets (the builtinassets tag is off by default,
# so no npm is needed; the API answers, the UI pages do not) and with only
# the Kubernetes service discovery (remove_all_sd enable_kubernetes_sd).
set -euo pipefail

mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
exec 9>"${XDG_CACHE_HOME:-$HOME/.cache}/scribe/.build-prometheus.lock"
flock 9

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
DIR="$CACHE/prometheus-${PROMETHEUS_VERSION}"
BIN="$DIR/prometheus"

log() { echo "build-prometheus: $*" >&2; }

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$DIR"
work="$CACHE/work/prometheus-${PROMETHEUS_VERSION}"
mkdir -p "$work"
if [[ ! -f "$work/go.mod" ]]; then
  printf 'module scribe.local/prometheusbuild\n\ngo 1.26\n\nrequire github.com/prometheus/prometheus %s\n' "$PROMETHEUS_VERSION" > "$work/go.mod"
fi
tags="remove_all_sd enable_kubernetes_sd"
ld="-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION}"
log "building prometheus ${PROMETHEUS_VERSION} with tags '${tags}' into $DIR (cold: several minutes on 2 cores)"
(cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "$ld" \
  -o "$BIN.tmp.$$" github.com/prometheus/prometheus/cmd/prometheus) >&2
mv "$BIN.tmp.$$" "$BIN"
log "built $BIN"
echo "$BIN"
