# Sourced by hack/build-control-plane.sh and hack/build-loop.sh: the one
# throwaway module that etcd, the Kubernetes commands (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy), the two
# Flux controllers and kwok are built from.
#
# Built from separate modules, each picked its own patch of client-go,
# grpc, x/net and the rest, so the packages they share (k8s.io/api,
# apimachinery, client-go, controller-runtime, grpc, protobuf: 830 of the
# Kubernetes commands' 2,357 packages are also Flux's or kwok's, and 1,447
# of source-controller's are also kustomize-controller's) were compiled
# once per binary. In one module graph each shared package has one version,
# so Go's build cache compiles it once for all of them: 3,965 packages
# instead of about 6,900.
#
# The versions: Go's minimal version selection takes the newest that any of
# them requires (grpc v1.81.1 from Flux for kube-apiserver's v1.79.3, for
# instance: minor updates within each module's compatibility promise), and
# Kubernetes' staging modules are pinned to the control plane's own
# (v0.36.3), as k8s.io/kubernetes requires (kustomize-controller v1.9.5
# asks for v0.36.4: it gets v0.36.3). Each binary is still the project's
# own main package at its pinned version; only shared dependencies move.
#
# The module's folder is named by a hash of its go.mod, so the binaries'
# cache folders (keyed by it too) change whenever any version does.
# Callers set KUBE_VERSION, ETCD_VERSION, SOURCE_CONTROLLER_VERSION,
# KUSTOMIZE_CONTROLLER_VERSION, KWOK_VERSION and CACHE, and define log.

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.8}"
SOURCE_CONTROLLER_VERSION="${SOURCE_CONTROLLER_VERSION:-v1.9.3}"
KUSTOMIZE_CONTROLLER_VERSION="${KUSTOMIZE_CONTROLLER_VERSION:-v1.9.5}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"

# loop_module_gomod prints the module's go.mod. It reads only the go.mod
# files of the required modules (no module zip is downloaded for it).
loop_module_gomod() {
  local kube_gomod staging
  kube_gomod="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  staging="v0.${KUBE_VERSION#v1.}"
  echo "module scribe.local/loopbuild"
  echo
  echo "go 1.26"
  echo
  echo "require ("
  echo "	k8s.io/kubernetes ${KUBE_VERSION}"
  echo "	go.etcd.io/etcd/server/v3 ${ETCD_VERSION}"
  echo "	github.com/fluxcd/source-controller ${SOURCE_CONTROLLER_VERSION}"
  echo "	github.com/fluxcd/kustomize-controller ${KUSTOMIZE_CONTROLLER_VERSION}"
  echo "	sigs.k8s.io/kwok ${KWOK_VERSION}"
  echo ")"
  echo
  echo "// Kubernetes' staging modules at the control plane's version (k8s.io/kubernetes"
  echo "// replaces them with ./staging folders, which its module zip leaves out)."
  echo "replace ("
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$kube_gomod" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
  echo
  # The Flux controllers' non-local replace lines (their ./api one is
  # dropped: the api module is required at its published version).
  local m gomod
  for m in "github.com/fluxcd/source-controller@${SOURCE_CONTROLLER_VERSION}" "github.com/fluxcd/kustomize-controller@${KUSTOMIZE_CONTROLLER_VERSION}"; do
    gomod="$(go mod download -json "$m" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    grep -E '^replace .* => [^.]' "$gomod" || true
  done | sort -u
}

# loop_module prints the module's folder, writing it first when needed.
# The folder's go.mod and go.sum are settled once, under a lock, by loading
# every package the builds need; the builds then only read them
# (-mod=readonly), so several may run at once.
loop_module() {
  local gomod dir
  gomod="${LOOP_MODULE_GOMOD:-$(loop_module_gomod)}"
  dir="$CACHE/work/loop-module-$(printf '%s' "$gomod" | sha256sum | cut -c1-10)"
  if [[ -f "$dir/.settled" ]]; then
    echo "$dir"
    return
  fi
  mkdir -p "$dir"
  (
    exec 8>"$dir/.lock"
    flock 8
    if [[ -f "$dir/.settled" ]]; then exit 0; fi
    log "preparing the loop's build module $dir (Kubernetes ${KUBE_VERSION}, etcd ${ETCD_VERSION}, source-controller ${SOURCE_CONTROLLER_VERSION}, kustomize-controller ${KUSTOMIZE_CONTROLLER_VERSION}, kwok ${KWOK_VERSION})"
    printf '%s\n' "$gomod" >"$dir/go.mod"
    : >"$dir/go.sum"
    # Resolve every package of every binary once, adding what go.sum needs
    # (checked against the checksum database, as any module download is).
    (cd "$dir" && GOFLAGS=-mod=mod CGO_ENABLED=0 go list -deps \
      go.etcd.io/etcd/server/v3 \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy \
      github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller \
      sigs.k8s.io/kwok/cmd/kwok >/dev/null)
    touch "$dir/.settled"
  )
  echo "$dir"
}

# loop_module_init sets LOOP_MODULE_GOMOD, the module's go.mod, and
# LOOP_MODULE_ID, the hash that names the module and keys the binaries'
# cache folders, without preparing the module; loop_module, called after
# it, does not read the required modules' go.mod files again.
loop_module_init() {
  LOOP_MODULE_GOMOD="$(loop_module_gomod)"
  LOOP_MODULE_ID="$(printf %s "$LOOP_MODULE_GOMOD" | sha256sum | cut -c1-10)"
}
