#!/usr/bin/env bash
# Builds etcd and kube-apiserver (and optionally kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy) from the Go module proxy into a cache
# outside the repository, keyed by version. A warm run returns at once.
#
#   hack/build-control-plane.sh [extra kubernetes commands...]
#
# Prints the binaries directory on stdout (suitable for KUBEBUILDER_ASSETS).
set -euo pipefail


KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.8}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"

log() { echo "build-control-plane: $*" >&2; }

# etcd and the Kubernetes commands are built from the loop's one throwaway
# module, with the Flux controllers and kwok (hack/loop-module.sh says why):
# the folder is keyed by the versions and the module's hash.
# shellcheck source=hack/loop-module.sh
source "$(dirname "$0")/loop-module.sh"
loop_module_init
BIN="$CACHE/k8s-${KUBE_VERSION}-etcd-${ETCD_VERSION}-m${LOOP_MODULE_ID}"
mkdir -p "$BIN"

# build_kube CMD...: the missing ones in one `go build`, which compiles
# their packages and links them two at a time.
build_kube() {
  local cmd missing=() pkgs=()
  for cmd in "$@"; do
    if [[ ! -x "$BIN/$cmd" ]]; then missing+=("$cmd"); pkgs+=("k8s.io/kubernetes/cmd/$cmd"); fi
  done
  if [[ ${#missing[@]} == 0 ]]; then return; fi
  local work
  work="$(loop_module)"
  local ld="-s -w" minor
  minor="$(echo "$KUBE_VERSION" | cut -d. -f2)"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor}"
  done
  log "building ${missing[*]} ${KUBE_VERSION} (cold: kube-apiserver, the first, about 7 minutes on 2 cores; each other one a minute or two)"
  local tmp="$BIN/.tmp.$$"
  mkdir -p "$tmp"
  (cd "$work" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$tmp/" "${pkgs[@]}")
  for cmd in "${missing[@]}"; do mv "$tmp/$cmd" "$BIN/$cmd"; done
  rmdir "$tmp"
}

build_etcd() {
  if [[ -x "$BIN/etcd" ]]; then return; fi
  local work
  work="$(loop_module)"
  log "building etcd ${ETCD_VERSION}"
  (cd "$work" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp.$$" go.etcd.io/etcd/server/v3)
  mv "$BIN/etcd.tmp.$$" "$BIN/etcd"
}

cached=1
for b in etcd kube-apiserver "$@"; do [[ -x "$BIN/$b" ]] || cached=0; done
if [[ $cached == 1 ]]; then
  echo "$BIN"
  exit 0
fi
# One build at a time per script and machine: parallel test loops (and a
# `make demo` beside `make test`) call it at once on a cold cache; the
# second waits here and then finds the binaries cached.
mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
exec 9>"${XDG_CACHE_HOME:-$HOME/.cache}/scribe/.build-control-plane.lock"
flock 9

build_etcd
build_kube kube-apiserver
if [[ $# -gt 0 ]]; then build_kube "$@"; fi
echo "$BIN"
