#!/usr/bin/env bash
# `make test`: every test, in phases, each phase's time printed and a table
# of them at the end. Nothing is left out; the order only lets work overlap:
#
#   unit     the packages whose tests never start a kube-apiserver, while
#            etcd and kube-apiserver build beside them;
#   envtest  the packages whose tests do (they read KUBEBUILDER_ASSETS),
#            unit tests of those packages included;
#   fuzz     the fuzz targets, FUZZ_*_EXECS inputs each;
#   e2e      the end-to-end loops, once every loop binary is built.
#
# The loop's binaries (hack/build-*.sh, cached by version outside the
# repository) build in the background from the start, in the order the
# phases need them: etcd and kube-apiserver first, then helm, then the rest
# at a lower CPU priority (nice 10) so they take what the tests leave idle.
# A warm cache makes every build return at once. Each build's start and
# time are printed as "build: ..." lines; its output is in
# $CACHE/build-logs/<name>.log.
#
#   hack/test.sh            # what `make test` runs
#   hack/test.sh unit       # the quick loop (`make test-unit`): the unit
#                           # phase over every package, -short, no
#                           # kube-apiserver, no fuzzing, no loop
#
# Environment: GO_TEST_FLAGS, E2E_APPLIERS, E2E_PARALLEL, FUZZ_*_EXECS,
# FUZZ_MINIMIZE, CUE (the pinned cue binary), SCRIBE_CRDS_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
LOGS="$CACHE/build-logs"
mkdir -p "$LOGS"
: "${CUE:?CUE must name the pinned cue binary (the Makefile sets it)}"
GO_TEST_FLAGS="${GO_TEST_FLAGS:--count=1}"
read -r -a test_flags <<<"$GO_TEST_FLAGS"
export CUE SCRIBE_CRDS_DIR="${SCRIBE_CRDS_DIR:-}"

# fd 3: the run's own output, for the background builds' progress lines.
exec 3>&1
start_all=$(date +%s)
summary=()
fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
# phase NAME CMD...: runs CMD, prints its time, keeps it for the table.
phase() {
  local name="$1" s rc=0
  shift
  s=$(date +%s)
  echo "=== phase $name: start (at $(fmt $((s - start_all))))"
  "$@" || rc=$?
  local d=$(($(date +%s) - s))
  summary+=("$(printf '%-34s %8s%s' "$name" "$(fmt "$d")" "$([[ $rc == 0 ]] || echo "  FAILED (exit $rc)")")")
  echo "=== phase $name: $([[ $rc == 0 ]] && echo done || echo "FAILED (exit $rc)") in $(fmt "$d")"
  if [[ $rc != 0 ]]; then
    print_summary
    exit "$rc"
  fi
}
print_summary() {
  echo "=== phases (wall time; the background builds overlap them)"
  printf '  %s\n' "${summary[@]}"
  echo "  $(printf '%-34s %8s' total "$(fmt $(($(date +%s) - start_all)))")"
}

# build NAME CMD...: one cached build, timed, its output in a log; what it
# starts building is printed as it starts ("build: <script>: building ...").
build() {
  local name="$1" s rc=0
  shift
  s=$(date +%s)
  "$@" >"$LOGS/$name.out" 2> >(tee "$LOGS/$name.log" | grep --line-buffered -E '^[a-z-]+: (building|preparing)' | sed -u 's/^/build: /' >&3) || rc=$?
  local d=$(($(date +%s) - s))
  if [[ $rc != 0 ]]; then
    echo "build: $name FAILED (exit $rc) after $(fmt "$d"); the end of $LOGS/$name.log:"
    tail -20 "$LOGS/$name.log" | sed 's/^/build:   /'
    return "$rc"
  fi
  # A cached binary answers at once and says nothing.
  if grep -q 'building' "$LOGS/$name.log"; then
    echo "build: $name done in $(fmt "$d")"
  fi
}

# The envtest phase waits for this marker, the e2e phase for the whole job.
assets_ready="$(mktemp -u "${TMPDIR:-/tmp}/scribe-test-assets.XXXXXX")"
background_builds() {
  build control-plane hack/build-control-plane.sh
  build helm hack/build-helm.sh
  touch "$assets_ready"
  build kube-node nice -n 10 hack/build-control-plane.sh kube-controller-manager kube-scheduler kubelet kube-proxy
  build flux-kwok nice -n 10 hack/build-loop.sh
  build argocd nice -n 10 hack/build-argocd.sh
  build gitea nice -n 10 hack/build-gitea.sh
  build traefik nice -n 10 hack/build-traefik.sh
  build prometheus nice -n 10 hack/build-prometheus.sh
  build argo-workflows nice -n 10 hack/build-argo-workflows.sh
  build otelcol nice -n 10 hack/build-otelcol.sh
}

wait_for_assets() {
  while [[ ! -e "$assets_ready" ]]; do
    if ! kill -0 "$builds" 2>/dev/null; then
      wait "$builds" || true
      echo "the background builds stopped before etcd, kube-apiserver and helm were built" >&2
      return 1
    fi
    sleep 2
  done
}

# The packages whose tests start a kube-apiserver say so by reading
# KUBEBUILDER_ASSETS; every other package runs in the unit phase. A test
# that started one without saying so would fail there (envtest finds no
# binaries), never skip.
envtest_pkgs=()
unit_pkgs=()
while read -r pkg dir; do
  if grep -qs KUBEBUILDER_ASSETS "$dir"/*_test.go; then
    envtest_pkgs+=("$pkg")
  else
    unit_pkgs+=("$pkg")
  fi
done < <(go list -f '{{.ImportPath}} {{.Dir}}' ./... | grep -v /test/e2e)

if [[ "${1:-}" == unit ]]; then
  all=("${unit_pkgs[@]}" "${envtest_pkgs[@]}")
  phase "unit (-short, no kube-apiserver)" env -u KUBEBUILDER_ASSETS HELM="$(hack/build-helm.sh)" \
    go test "${test_flags[@]}" -short -timeout 20m "${all[@]}"
  print_summary
  exit 0
fi

background_builds &
builds=$!
cleanup() {
  rm -f "$assets_ready"
  if kill -0 "$builds" 2>/dev/null; then
    # Stop the builds (and the go commands under them) with the run.
    pkill -TERM -P "$builds" 2>/dev/null || true
    kill "$builds" 2>/dev/null || true
  fi
}
trap cleanup EXIT

phase "unit (${#unit_pkgs[@]} packages)" env -u KUBEBUILDER_ASSETS \
  go test "${test_flags[@]}" -timeout 30m "${unit_pkgs[@]}"
phase "wait: etcd, kube-apiserver, helm" wait_for_assets
phase "envtest (${#envtest_pkgs[@]} packages)" env KUBEBUILDER_ASSETS="$(hack/build-control-plane.sh)" HELM="$(hack/build-helm.sh)" \
  go test "${test_flags[@]}" -timeout 60m "${envtest_pkgs[@]}"

fuzz() {
  local pkg="$1" target="$2" execs="$3"
  go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$execs" -fuzzminimizetime "${FUZZ_MINIMIZE:-100x}"
}
# The CLI's two fuzz targets, the YAML stream reader and the commit-message
# template (their seed corpora, testdata/fuzz, already ran as unit tests).
phase "fuzz: FuzzRenderBytes" fuzz ./cmd/scribe FuzzRenderBytes "${FUZZ_RENDER_EXECS:-2000x}"
phase "fuzz: FuzzWorkloadFields" fuzz ./cmd/scribe FuzzWorkloadFields "${FUZZ_FIELDS_EXECS:-2000x}"
phase "fuzz: FuzzSplit" fuzz ./internal/yamlstream FuzzSplit "${FUZZ_SPLIT_EXECS:-200000x}"
phase "fuzz: FuzzCommitTemplate" fuzz ./internal/publish/gitsink FuzzCommitTemplate "${FUZZ_COMMIT_EXECS:-20000x}"

wait_for_builds() { wait "$builds"; }
phase "wait: the loop's binaries" wait_for_builds
phase "e2e" env SCRIBE_E2E=1 SCRIBE_E2E_APPLIER="${E2E_APPLIERS:-}" \
  go test "${test_flags[@]}" -parallel "${E2E_PARALLEL:-3}" -timeout 70m ./test/e2e/
print_summary
