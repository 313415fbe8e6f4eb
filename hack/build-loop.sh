#!/usr/bin/env bash
# Builds the binaries of the local GitOps loop besides the control plane:
# Flux source-controller and kustomize-controller, and kwok, from the Go
# module proxy into a cache outside the repository, keyed by version. A warm
# run returns at once. (etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler come from hack/build-control-plane.sh.)
#
#   hack/build-loop.sh            # prints the binaries directory on stdout
#
# Flux controllers cannot be built with `go install` (their go.mod replaces
# the api module with ./api): build them in a throwaway module that requires
# the controller, with its non-local replace lines and its go.sum, and
# GOFLAGS=-mod=mod (no `go mod tidy`: it would resolve test-only modules).
set -euo pipefail


SOURCE_CONTROLLER_VERSION="${SOURCE_CONTROLLER_VERSION:-v1.9.3}"
KUSTOMIZE_CONTROLLER_VERSION="${KUSTOMIZE_CONTROLLER_VERSION:-v1.9.5}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
BIN="$CACHE/loop-sc-${SOURCE_CONTROLLER_VERSION}-kc-${KUSTOMIZE_CONTROLLER_VERSION}-kwok-${KWOK_VERSION}"
mkdir -p "$BIN"

log() { echo "build-loop: $*" >&2; }

moddir() { go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }

build_flux() {
  local name="$1" version="$2"
  if [[ -x "$BIN/$name" ]]; then return; fi
  local src work
  src="$(moddir "github.com/fluxcd/${name}@${version}")"
  work="$CACHE/work/${name}-${version}"
  mkdir -p "$work"
  {
    printf 'module scribe.local/%sbuild\n\ngo 1.26\n\nrequire github.com/fluxcd/%s %s\n\n' "$name" "$name" "$version"
    # non-local replace lines of the controller (the ./api one is dropped)
    grep -E '^replace .* => [^.]' "$src/go.mod" || true
  } > "$work/go.mod"
  cp "$src/go.sum" "$work/go.sum"
  chmod u+w "$work/go.sum"
  log "building ${name} ${version} (cold: up to ~10 minutes on 2 cores)"
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/$name.tmp.$$" "github.com/fluxcd/${name}")
  mv "$BIN/$name.tmp.$$" "$BIN/$name"
  # The CRDs ship in the module zip.
  mkdir -p "$BIN/crds"
  cp "$src"/config/crd/bases/*.yaml "$BIN/crds/"
  chmod u+w "$BIN"/crds/*.yaml
}

build_kwok() {
  if [[ -x "$BIN/kwok" ]]; then return; fi
  local src work
  src="$(moddir "sigs.k8s.io/kwok@${KWOK_VERSION}")"
  work="$CACHE/work/kwok-${KWOK_VERSION}"
  mkdir -p "$work"
  {
    printf 'module scribe.local/kwokbuild\n\ngo 1.26\n\nrequire sigs.k8s.io/kwok %s\n\n' "$KWOK_VERSION"
    sed -n '/^replace (/,/^)/p' "$src/go.mod"
    grep -E '^replace [^(]' "$src/go.mod" || true
  } > "$work/go.mod"
  cp "$src/go.sum" "$work/go.sum"
  chmod u+w "$work/go.sum"
  log "building kwok ${KWOK_VERSION} (cold: ~2 minutes on 2 cores)"
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/kwok.tmp.$$" sigs.k8s.io/kwok/cmd/kwok)
  mv "$BIN/kwok.tmp.$$" "$BIN/kwok"
  mkdir -p "$BIN/kwok-stages"
  for s in node/fast node/heartbeat-with-lease pod/fast; do
    for f in "$src/kustomize/stage/$s"/*.yaml; do
      [[ "$(basename "$f")" == kustomization.yaml ]] || cp "$f" "$BIN/kwok-stages/"
    done
  done
  chmod u+w "$BIN"/kwok-stages/*.yaml
}

# A warm cache answers at once, without waiting for another build.
if [[ -x "$BIN/kwok" ]] && { [[ "${1:-}" == kwok ]] || { [[ -x "$BIN/kustomize-controller" ]] && [[ -x "$BIN/source-controller" ]]; }; }; then
  echo "$BIN"
  exit 0
fi
# One build at a time per script and machine: parallel test loops (and a
# `make demo` beside `make test`) call it at once on a cold cache; the
# second waits here and then finds the binaries cached.
mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
exec 9>"${XDG_CACHE_HOME:-$HOME/.cache}/scribe/.build-loop.lock"
flock 9

# `build-loop.sh kwok` builds only kwok (a loop without an applier).
build_kwok
if [[ "${1:-}" != kwok ]]; then
  build_flux kustomize-controller "$KUSTOMIZE_CONTROLLER_VERSION"
  build_flux source-controller "$SOURCE_CONTROLLER_VERSION"
fi
echo "$BIN"
