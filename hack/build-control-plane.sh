#!/usr/bin/env bash
# Builds etcd and kube-apiserver (and optionally kube-controller-manager,
# kube-scheduler) from the Go module proxy into a cache outside the repository,
# keyed by version. A warm run returns at once.
#
#   hack/build-control-plane.sh [extra kubernetes commands...]
#
# Prints the binaries directory on stdout (suitable for KUBEBUILDER_ASSETS).
set -euo pipefail


KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.8}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
BIN="$CACHE/k8s-${KUBE_VERSION}-etcd-${ETCD_VERSION}"
mkdir -p "$BIN"

log() { echo "build-control-plane: $*" >&2; }

staging_version="v0.${KUBE_VERSION#v1.}"

build_kube() {
  local cmd="$1"
  if [[ -x "$BIN/$cmd" ]]; then return; fi
  local work="$CACHE/work/kubernetes-${KUBE_VERSION}"
  mkdir -p "$work"
  if [[ ! -f "$work/go.mod" ]]; then
    log "preparing throwaway module for k8s.io/kubernetes ${KUBE_VERSION}"
    local gomod
    gomod="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    {
      echo "module scribe.local/kubebuild"
      echo
      echo "go 1.26"
      echo
      echo "require k8s.io/kubernetes ${KUBE_VERSION}"
      echo
      echo "replace ("
      # every staging module k8s.io/kubernetes replaces with a local folder
      grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } > "$work/go.mod"
  fi
  local ld="-s -w" minor
  minor="$(echo "$KUBE_VERSION" | cut -d. -f2)"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor}"
  done
  log "building $cmd ${KUBE_VERSION} (cold: several minutes on 2 cores)"
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$BIN/$cmd.tmp.$$" "k8s.io/kubernetes/cmd/$cmd")
  mv "$BIN/$cmd.tmp.$$" "$BIN/$cmd"
}

build_etcd() {
  if [[ -x "$BIN/etcd" ]]; then return; fi
  # etcd's server module has replace directives, so `go install` refuses it:
  # build it from a throwaway module that requires the published modules.
  local work="$CACHE/work/etcd-${ETCD_VERSION}"
  mkdir -p "$work"
  if [[ ! -f "$work/go.mod" ]]; then
    printf 'module scribe.local/etcdbuild\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$work/go.mod"
  fi
  log "building etcd ${ETCD_VERSION}"
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp.$$" go.etcd.io/etcd/server/v3)
  mv "$BIN/etcd.tmp.$$" "$BIN/etcd"
}

# A warm cache answers at once, without waiting for another build.
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
for extra in "$@"; do build_kube "$extra"; done
echo "$BIN"
