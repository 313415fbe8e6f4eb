#!/usr/bin/env bash
# Builds the Argo CD side of the local GitOps loop from the Go module proxy
# into a cache outside the repository, keyed by version. A warm run returns
# at once.
#
#   hack/build-argocd.sh          # prints the binaries directory on stdout
#
# The directory then holds:
#   argocd        application-controller and repo-server in one binary; the
#                 command is chosen by ARGOCD_BINARY_NAME, as upstream's image
#                 does (argocd-application-controller | argocd-repo-server)
#   kustomize     the binary repo-server runs for kustomize paths
#   redis         a Redis-protocol server (miniredis) for Argo CD's cache:
#                 redis --addr 127.0.0.1:PORT
#   crds/         Argo CD's CRDs (Application, AppProject, ApplicationSet)
#   config/       Argo CD's config objects (argocd-cm, argocd-rbac-cm, ...)
#
# Argo CD cannot be built with `go install` (replace directives): build it in
# a throwaway module that requires it, with its replace block and go.sum,
# and GOFLAGS=-mod=mod. v3.2.11 is the newest line that builds here with the
# module proxy and this Go (see docs/DESIGN.md, "Argo CD in the loop").
set -euo pipefail

# One build at a time per script and machine: parallel test loops (and a
# `make demo` beside `make test`) call it at once on a cold cache; the
# second waits here and then finds the binaries cached.
mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
exec 9>"${XDG_CACHE_HOME:-$HOME/.cache}/scribe/.build-argocd.lock"
flock 9

ARGOCD_VERSION="${ARGOCD_VERSION:-v3.2.11}"
KUSTOMIZE_VERSION="${KUSTOMIZE_VERSION:-v5.8.1}"
MINIREDIS_VERSION="${MINIREDIS_VERSION:-v2.40.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
BIN="$CACHE/argocd-${ARGOCD_VERSION}-kustomize-${KUSTOMIZE_VERSION}-miniredis-${MINIREDIS_VERSION}"
mkdir -p "$BIN"

log() { echo "build-argocd: $*" >&2; }

moddir() { go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }

build_argocd() {
  if [[ -x "$BIN/argocd" ]]; then return; fi
  local src work
  src="$(moddir "github.com/argoproj/argo-cd/v3@${ARGOCD_VERSION}")"
  work="$CACHE/work/argocd-${ARGOCD_VERSION}"
  mkdir -p "$work"
  {
    printf 'module scribe.local/argocdbuild\n\ngo 1.26\n\nrequire github.com/argoproj/argo-cd/v3 %s\n\n' "$ARGOCD_VERSION"
    sed -n '/^replace (/,/^)/p' "$src/go.mod"
    grep -E '^replace [^(]' "$src/go.mod" || true
  } > "$work/go.mod"
  cp "$src/go.sum" "$work/go.sum"
  chmod u+w "$work/go.sum"
  # Only the two commands the loop runs: the full cmd binary would link the
  # API server, Dex and the CLI as well (~2 minutes more, 60 MB more).
  cat > "$work/main.go" <<'EOF'
// Command argocd runs Argo CD's application-controller or repo-server,
// chosen by ARGOCD_BINARY_NAME, as upstream's cmd/main.go does.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func init() {
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func main() {
	name := filepath.Base(os.Args[0])
	if v := os.Getenv("ARGOCD_BINARY_NAME"); v != "" {
		name = v
	}
	var command *cobra.Command
	switch name {
	case "argocd-application-controller":
		command = appcontroller.NewCommand()
	case "argocd-repo-server":
		command = reposerver.NewCommand()
	default:
		fmt.Fprintf(os.Stderr, "argocd: set ARGOCD_BINARY_NAME to argocd-application-controller or argocd-repo-server (got %q)\n", name)
		os.Exit(2)
	}
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
EOF
  log "building Argo CD ${ARGOCD_VERSION} application-controller + repo-server (cold: ~6-8 minutes on 2 cores)"
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/argocd.tmp.$$" .)
  mv "$BIN/argocd.tmp.$$" "$BIN/argocd"
  mkdir -p "$BIN/crds" "$BIN/config"
  cp "$src"/manifests/crds/{application,appproject,applicationset}-crd.yaml "$BIN/crds/"
  for f in "$src"/manifests/base/config/*.yaml; do
    [[ "$(basename "$f")" == kustomization.yaml ]] || cp "$f" "$BIN/config/"
  done
  chmod u+w "$BIN"/crds/*.yaml "$BIN"/config/*.yaml
}

build_kustomize() {
  if [[ -x "$BIN/kustomize" ]]; then return; fi
  log "building kustomize ${KUSTOMIZE_VERSION} (cold: ~1 minute on 2 cores)"
  GOBIN="$BIN" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@${KUSTOMIZE_VERSION}"
}

build_redis() {
  if [[ -x "$BIN/redis" ]]; then return; fi
  local work="$CACHE/work/miniredis-${MINIREDIS_VERSION}"
  mkdir -p "$work"
  printf 'module scribe.local/redisbuild\n\ngo 1.26\n\nrequire github.com/alicebob/miniredis/v2 %s\n' "$MINIREDIS_VERSION" > "$work/go.mod"
  cat > "$work/main.go" <<'EOF'
// Command redis serves the Redis protocol (miniredis) on one address until
// it is signalled: the cache Argo CD's controller and repo-server share.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alicebob/miniredis/v2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "listen address")
	flag.Parse()
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(*addr); err != nil {
		fmt.Fprintf(os.Stderr, "redis: listen on %s: %v\n", *addr, err)
		os.Exit(1)
	}
	fmt.Printf("redis: serving on %s\n", m.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	m.Close()
}
EOF
  log "building a Redis server (miniredis ${MINIREDIS_VERSION}, seconds)"
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/redis.tmp.$$" .)
  mv "$BIN/redis.tmp.$$" "$BIN/redis"
}

build_redis
build_kustomize
build_argocd
echo "$BIN"
