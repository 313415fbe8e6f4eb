#!/usr/bin/env bash
# Builds the Argo Workflows workflow engine of the real-node e2e loops from
# the Go module proxy into a cache outside the repository, keyed by version.
# Argo Workflows is not a dependency of Scribe's go.mod: it runs only inside
# the local loop, bound to 127.0.0.1 (security flaws are reported against
# v4.0.5, the only version the module proxy serves). A warm run returns at
# once.
#
#   hack/build-argo-workflows.sh     # ARGO_WORKFLOWS_VERSION=v4.0.5 by default
#
# Prints the binaries directory on stdout; what it builds goes to stderr.
# The directory then holds:
#   workflow-controller   the controller, run on the host against the hub
#   argoexec              the executor (static), which the loop packs into
#                         the executor image it pushes to the node's registry
#   crds/                 that version's CRDs: the full schemas of Workflow
#                         and WorkflowTemplate (what Scribe writes), the
#                         minimal ones of the other kinds
#
# Built in a throwaway module that requires the version, with its go.sum
# copied and GOFLAGS=-mod=mod (as the other hack/build-*.sh). v4.0.5 has no
# replace lines, and every package the two commands import is served by the
# module proxy (checked with `go list -e -deps`): no stand-in modules are
# needed, unlike hack/build-traefik.sh.
#
# One patch, for the loop's "everything on 127.0.0.1" rule: the controller
# listens on every interface, its health endpoint on a hard-coded :6060 and
# its Prometheus metrics on :<metricsConfig.port>. The build uses a copy of
# the module where the two addresses are read from the environment:
#   LOOP_HEALTH_ADDR   the health listener (default :6060, upstream's)
#   LOOP_METRICS_HOST  the metrics listener's host (default "", every
#                      interface, upstream's)
# And one file the module zip lacks: upstream's
# workflow/executor/osspecific/signal_linux.go is a symlink to
# signal_darwin.go, and module zips leave symlinks out, so argoexec does
# not build for linux from the proxy ("undefined: Setpgid"). The copy gets
# the link's target as a file, as a git checkout has it.
# Nothing else in the module is changed.
set -euo pipefail

mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
exec 9>"${XDG_CACHE_HOME:-$HOME/.cache}/scribe/.build-argo-workflows.lock"
flock 9

ARGO_WORKFLOWS_VERSION="${ARGO_WORKFLOWS_VERSION:-v4.0.5}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
DIR="$CACHE/argo-workflows-${ARGO_WORKFLOWS_VERSION}"
MOD="github.com/argoproj/argo-workflows/v4"

log() { echo "build-argo-workflows: $*" >&2; }
moddir() { go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }

if [[ -x "$DIR/workflow-controller" && -x "$DIR/argoexec" && -f "$DIR/crds/.complete" ]]; then
  echo "$DIR"
  exit 0
fi
mkdir -p "$DIR"
src="$(moddir "${MOD}@${ARGO_WORKFLOWS_VERSION}")"
work="$CACHE/work/argo-workflows-${ARGO_WORKFLOWS_VERSION}"
mkdir -p "$work"
if [[ ! -f "$work/argo-workflows/.patched" ]]; then
  rm -rf "$work/argo-workflows"
  cp -r "$src" "$work/argo-workflows"
  chmod -R u+w "$work/argo-workflows"
  # Drop what the build does not need (UI sources, docs, examples, tests'
  # fixtures): the copy is only read by `go build`.
  rm -rf "$work/argo-workflows/ui" "$work/argo-workflows/docs" "$work/argo-workflows/examples" "$work/argo-workflows/test"
  patch_once() { # file, from, to
    if [[ "$(grep -cF -- "$2" "$1")" != 1 ]]; then
      log "patch: $1 does not hold exactly one \"$2\""
      exit 1
    fi
    sed -i "s|$(printf '%s' "$2" | sed 's/[][\.*^$|]/\\&/g')|$3|" "$1"
  }
  patch_once "$work/argo-workflows/cmd/workflow-controller/main.go" \
    'http.ListenAndServe(":6060", nil)' 'http.ListenAndServe(loopHealthAddr(), nil)'
  cat > "$work/argo-workflows/cmd/workflow-controller/loop_addr.go" <<'GO'
package main

import "os"

// loopHealthAddr is the health listener's address: LOOP_HEALTH_ADDR, or
// upstream's :6060. Added by Scribe's hack/build-argo-workflows.sh.
func loopHealthAddr() string {
	if a := os.Getenv("LOOP_HEALTH_ADDR"); a != "" {
		return a
	}
	return ":6060"
}
GO
  patch_once "$work/argo-workflows/util/telemetry/exporter_prometheus.go" \
    'Addr: fmt.Sprintf(":%v", m.config.port())' 'Addr: fmt.Sprintf("%s:%v", os.Getenv("LOOP_METRICS_HOST"), m.config.port())'
  osspecific="$work/argo-workflows/workflow/executor/osspecific"
  if [[ ! -e "$osspecific/signal_linux.go" ]]; then
    cp "$osspecific/signal_darwin.go" "$osspecific/signal_linux.go"
  fi
  touch "$work/argo-workflows/.patched"
fi
{
  printf 'module scribe.local/argoworkflowsbuild\n\ngo 1.26\n\nrequire %s %s\n\n' "$MOD" "$ARGO_WORKFLOWS_VERSION"
  printf 'replace %s => ./argo-workflows\n' "$MOD"
} > "$work/go.mod"
cp "$src/go.sum" "$work/go.sum"
chmod u+w "$work/go.sum"
# Upstream's Makefile stamps the version the same way.
ld="-s -w -X ${MOD}.version=${ARGO_WORKFLOWS_VERSION} -X ${MOD}.gitTag=${ARGO_WORKFLOWS_VERSION} -X ${MOD}.gitTreeState=clean"
for cmd in workflow-controller argoexec; do
  if [[ -x "$DIR/$cmd" ]]; then continue; fi
  log "building ${cmd} ${ARGO_WORKFLOWS_VERSION} into $DIR (cold: several minutes on 2 cores)"
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ld" \
    -o "$DIR/$cmd.tmp.$$" "${MOD}/cmd/${cmd}") >&2
  mv "$DIR/$cmd.tmp.$$" "$DIR/$cmd"
done
rm -rf "$DIR/crds"
mkdir -p "$DIR/crds"
for f in "$src"/manifests/base/crds/minimal/argoproj.io_*.yaml; do
  cp "$f" "$DIR/crds/"
done
cp "$src"/manifests/base/crds/full/argoproj.io_{workflows,workflowtemplates}.yaml "$DIR/crds/"
chmod -R u+w "$DIR/crds"
touch "$DIR/crds/.complete"
log "built $DIR"
echo "$DIR"
