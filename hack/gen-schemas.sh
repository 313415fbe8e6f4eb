#!/usr/bin/env bash
# Regenerates schemas/: CUE definitions of every kind Scribe renders.
#   - Kubernetes core kinds from the Go API types (k8s.io/api, via `cue get go`)
#   - CRD kinds from the upstream CRDs (via `cue get crd`), found by
#     `go run ./hack/crds` like every test finds them: the repository's
#     copies (internal/crds/upstream) of the projects the Go module proxy
#     does not serve (flux-helm, argo-workflows, testkube), else the offline
#     mirror in SCRIBE_CRDS_DIR, else the pinned module in the Go module
#     cache, and checked (-check: one CRD per file, the kinds the table in
#     internal/crds lists). They are read in place. If one cannot be found
#     or fails its check, the script stops before changing anything.
# Hand-written definitions (kinds without a usable upstream CRD) live in
# schemas/ under files named *_handwritten.cue and are left alone.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CUE="${CUE:-cue}"
OUT="$ROOT/schemas"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# 0. Find every upstream CRD file first, so a missing project changes nothing.
CRDS="$TMP/crds.txt"
(cd "$ROOT" && go run ./hack/crds -check flux-source flux-kustomize flux-helm argocd argo-workflows \
  keda gateway-api cluster-api capg testkube) > "$CRDS"

# crd_file NAME prints the path of the upstream CRD file named NAME.
crd_file() {
  local path
  path="$(grep -m1 "/$1\$" "$CRDS")" || { echo "gen-schemas: no upstream CRD file $1" >&2; return 1; }
  echo "$path"
}

# 1. Go API types. `cue get go` reads packages of the current Go module and
#    writes them under cue.mod/gen; run it in a scratch CUE module that lives
#    inside our Go module so the pinned k8s.io/api version is used.
scratch="$ROOT/.schemas-scratch"
rm -rf "$scratch"; mkdir -p "$scratch"
trap 'rm -rf "$TMP" "$scratch"' EXIT
(cd "$scratch" && "$CUE" mod init scribe.dev/scratch >/dev/null && \
  "$CUE" get go \
    k8s.io/api/core/v1 \
    k8s.io/api/apps/v1 \
    k8s.io/api/autoscaling/v2 \
    k8s.io/api/policy/v1 \
    k8s.io/api/networking/v1 \
    k8s.io/apimachinery/pkg/apis/meta/v1)
rm -rf "$OUT/k8s.io"
mkdir -p "$OUT"
cp -r "$scratch/cue.mod/gen/k8s.io" "$OUT/k8s.io"

# 2. CRDs: group, file, and the versions Scribe renders.
gen_crd() {
  local group="$1" src; shift 1
  src="$(crd_file "$1")"; shift 1
  local dir="$TMP/$group"
  mkdir -p "$dir"
  (cd "$dir" && "$CUE" get crd --group "$group" "$src" >/dev/null)
  for v in "$@"; do
    mkdir -p "$OUT/$group/$v"
    cp "$dir/$v/"*.cue "$OUT/$group/$v/"
  done
}

for g in source.toolkit.fluxcd.io kustomize.toolkit.fluxcd.io helm.toolkit.fluxcd.io \
         argoproj.io keda.sh gateway.networking.k8s.io cluster.x-k8s.io \
         infrastructure.cluster.x-k8s.io testworkflows.testkube.io tests.testkube.io; do
  find "$OUT/$g" -name '*.cue' ! -name '*_handwritten.cue' -delete 2>/dev/null || true
done

gen_crd source.toolkit.fluxcd.io      source.toolkit.fluxcd.io_gitrepositories.yaml v1
gen_crd source.toolkit.fluxcd.io      source.toolkit.fluxcd.io_ocirepositories.yaml v1
gen_crd source.toolkit.fluxcd.io      source.toolkit.fluxcd.io_helmrepositories.yaml v1
gen_crd kustomize.toolkit.fluxcd.io   kustomize.toolkit.fluxcd.io_kustomizations.yaml v1
gen_crd helm.toolkit.fluxcd.io        helm.toolkit.fluxcd.io_helmreleases.yaml v2
gen_crd argoproj.io                   application-crd.yaml v1alpha1
gen_crd argoproj.io                   appproject-crd.yaml v1alpha1
gen_crd argoproj.io                   argoproj.io_workflows.yaml v1alpha1
gen_crd keda.sh                       keda.sh_scaledobjects.yaml v1alpha1
gen_crd gateway.networking.k8s.io     gateway.networking.k8s.io_httproutes.yaml v1
gen_crd cluster.x-k8s.io              cluster.x-k8s.io_clusters.yaml v1beta2
gen_crd cluster.x-k8s.io              cluster.x-k8s.io_machinedeployments.yaml v1beta2
gen_crd cluster.x-k8s.io              cluster.x-k8s.io_machinepools.yaml v1beta2
gen_crd infrastructure.cluster.x-k8s.io infrastructure.cluster.x-k8s.io_gcpclusters.yaml v1beta1
gen_crd infrastructure.cluster.x-k8s.io infrastructure.cluster.x-k8s.io_gcpmanagedclusters.yaml v1beta1
gen_crd infrastructure.cluster.x-k8s.io infrastructure.cluster.x-k8s.io_gcpmanagedcontrolplanes.yaml v1beta1
gen_crd infrastructure.cluster.x-k8s.io infrastructure.cluster.x-k8s.io_gcpmanagedmachinepools.yaml v1beta1
gen_crd testworkflows.testkube.io     testworkflows.testkube.io_testworkflows.yaml v1
gen_crd testworkflows.testkube.io     testworkflows.testkube.io_testworkflowexecutions.yaml v1
gen_crd tests.testkube.io             tests.testkube.io_testtriggers.yaml v1

"$CUE" fmt "$OUT/..." >/dev/null 2>&1 || true
echo "schemas regenerated under $OUT" >&2
