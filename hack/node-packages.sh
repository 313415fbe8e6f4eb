#!/usr/bin/env bash
# Installs the Debian packages the real node of the local loop needs, when
# they are missing: containerd and runc (the container runtime), the CNI
# plugins (the pods' bridge network), iptables and conntrack (kube-proxy's
# Services). kubelet and kube-proxy themselves are built from the Go module
# proxy (hack/build-control-plane.sh kubelet kube-proxy).
#
#   hack/node-packages.sh          # installs what is missing (needs root and apt-get)
#   hack/node-packages.sh --check  # only says what is missing; exit 1 if anything is
#
# Without root or apt-get it says what is missing and exits 0: the tests that
# need the node then skip, naming it (or fail under SCRIBE_NODE_REQUIRED=1, as
# in CI).
set -euo pipefail

log() { echo "node-packages: $*" >&2; }

# package:the file that shows it is installed
wanted=(
  "containerd:/usr/bin/containerd"
  "containerd:/usr/bin/containerd-shim-runc-v2"
  "runc:/usr/sbin/runc"
  "containernetworking-plugins:/usr/lib/cni/bridge"
  "iptables:/usr/sbin/iptables"
  "conntrack:/usr/sbin/conntrack"
  "iproute2:/usr/sbin/ip"
)

missing=()
for w in "${wanted[@]}"; do
  pkg="${w%%:*}" file="${w#*:}"
  if [[ ! -e "$file" ]] && [[ " ${missing[*]-} " != *" $pkg "* ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
  log "missing Debian packages for the real node: ${missing[*]}"
  exit 1
fi
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
  log "the real node needs the Debian packages ${missing[*]} (install them as root: apt-get install ${missing[*]}); tests that need the node will skip"
  exit 0
fi
log "installing Debian packages for the real node: ${missing[*]} (about a minute)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
# The package's service is not wanted: the loop runs its own containerd
# with its own config, root and socket.
if command -v systemctl >/dev/null && systemctl is-active --quiet containerd 2>/dev/null; then
  log "stopping and disabling the system containerd service the package started (the loop runs its own)"
  systemctl disable --now containerd >&2 || true
fi
log "installed: ${missing[*]}"
