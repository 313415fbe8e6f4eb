#!/usr/bin/env bash
# Builds the binaries of the local GitOps loop besides the control plane:
# Flux source-controller and kustomize-controller, and kwok, from the Go
# module proxy into a cache outside the repository, keyed by version. A warm
# run returns at once. (etcd and the Kubernetes commands come from
# hack/build-control-plane.sh, out of the same module.)
#
#   hack/build-loop.sh            # prints the binaries directory on stdout
#
# Flux controllers cannot be built with `go install` (their go.mod replaces
# the api module with ./api): they are built in the loop's throwaway module
# (hack/loop-module.sh), which requires each controller and keeps their
# non-local replace lines (no `go mod tidy`: it would resolve test-only
# modules).
set -euo pipefail

SOURCE_CONTROLLER_VERSION="${SOURCE_CONTROLLER_VERSION:-v1.9.3}"
KUSTOMIZE_CONTROLLER_VERSION="${KUSTOMIZE_CONTROLLER_VERSION:-v1.9.5}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"

log() { echo "build-loop: $*" >&2; }

# Built from the loop's one throwaway module, with etcd and the Kubernetes
# commands (hack/loop-module.sh says why); the folder is keyed by the
# versions and the module's hash.
# shellcheck source=hack/loop-module.sh
source "$(dirname "$0")/loop-module.sh"
loop_module_init
BIN="$CACHE/loop-sc-${SOURCE_CONTROLLER_VERSION}-kc-${KUSTOMIZE_CONTROLLER_VERSION}-kwok-${KWOK_VERSION}-m${LOOP_MODULE_ID}"
mkdir -p "$BIN"

moddir() { go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }

# build_flux NAME...: the missing controllers in one `go build`.
build_flux() {
  local name missing=() pkgs=()
  for name in "$@"; do
    if [[ ! -x "$BIN/$name" ]]; then missing+=("$name"); pkgs+=("github.com/fluxcd/$name"); fi
  done
  if [[ ${#missing[@]} == 0 ]]; then return; fi
  local work tmp="$BIN/.tmp.$$"
  work="$(loop_module)"
  log "building ${missing[*]} (source-controller ${SOURCE_CONTROLLER_VERSION}, kustomize-controller ${KUSTOMIZE_CONTROLLER_VERSION}; cold, after kube-apiserver: about 5 minutes on 2 cores)"
  mkdir -p "$tmp"
  (cd "$work" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/" "${pkgs[@]}")
  for name in "${missing[@]}"; do mv "$tmp/$name" "$BIN/$name"; done
  rmdir "$tmp"
  # The CRDs ship in the module zips.
  mkdir -p "$BIN/crds"
  for m in "source-controller@${SOURCE_CONTROLLER_VERSION}" "kustomize-controller@${KUSTOMIZE_CONTROLLER_VERSION}"; do
    cp "$(moddir "github.com/fluxcd/$m")"/config/crd/bases/*.yaml "$BIN/crds/"
  done
  chmod u+w "$BIN"/crds/*.yaml
}

build_kwok() {
  if [[ -x "$BIN/kwok" ]]; then return; fi
  local src work
  src="$(moddir "sigs.k8s.io/kwok@${KWOK_VERSION}")"
  work="$(loop_module)"
  log "building kwok ${KWOK_VERSION} (cold: ~2 minutes on 2 cores)"
  (cd "$work" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/kwok.tmp.$$" sigs.k8s.io/kwok/cmd/kwok)
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
  build_flux kustomize-controller source-controller
fi
echo "$BIN"
