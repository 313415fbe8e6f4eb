#!/usr/bin/env bash
# Builds an OpenTelemetry Collector, the collector of the real-node e2e
# loops, from the Go module proxy into a cache outside the repository,
# keyed by version. The collector is not a dependency of Scribe's go.mod.
# A warm run returns at once.
#
#   hack/build-otelcol.sh     # OTELCOL_VERSION=v0.161.0 by default
#
# The core's stable modules (confmap and its providers) are at the release
# that goes with it, OTELCOL_STABLE_VERSION (v1.67.0 with v0.161.0).
#
# Prints the path of the otelcol binary on stdout; what it builds goes to
# stderr.
#
# Only the components the loops configure are compiled in (a collector
# distribution is its list of components, as the collector builder makes
# one): the otlp receiver, the batch processor, the otlp exporter (the
# core's), the resource processor (the catalog's target collector,
# catalog/config/otel-collector), and the attributes processor and the
# file exporter (the hub's collector of the e2e test, which copies the
# tenant header into an attribute and writes what arrives to a file).
# v0.161.0 is the release at which every one of them is served together.
set -euo pipefail

mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
exec 9>"${XDG_CACHE_HOME:-$HOME/.cache}/scribe/.build-otelcol.lock"
flock 9

OTELCOL_VERSION="${OTELCOL_VERSION:-v0.161.0}"
OTELCOL_STABLE_VERSION="${OTELCOL_STABLE_VERSION:-v1.67.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scribe"
DIR="$CACHE/otelcol-${OTELCOL_VERSION}-${OTELCOL_STABLE_VERSION}"
BIN="$DIR/otelcol"

log() { echo "build-otelcol: $*" >&2; }

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$DIR"
work="$CACHE/work/otelcol-${OTELCOL_VERSION}-${OTELCOL_STABLE_VERSION}"
mkdir -p "$work"
core=go.opentelemetry.io/collector
contrib=github.com/open-telemetry/opentelemetry-collector-contrib
cat > "$work/main.go" <<EOF
// Command otelcol is an OpenTelemetry Collector with only the components
// Scribe's e2e loops configure, built by hack/build-otelcol.sh.
package main

import (
	"log"

	"$contrib/exporter/fileexporter"
	"$contrib/processor/attributesprocessor"
	"$contrib/processor/resourceprocessor"
	"$core/component"
	"$core/confmap"
	"$core/confmap/provider/envprovider"
	"$core/confmap/provider/fileprovider"
	"$core/exporter"
	"$core/exporter/otlpexporter"
	"$core/otelcol"
	"$core/processor"
	"$core/processor/batchprocessor"
	"$core/receiver"
	"$core/receiver/otlpreceiver"
	"$core/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](batchprocessor.NewFactory(),
		resourceprocessor.NewFactory(), attributesprocessor.NewFactory()); err != nil {
		return f, err
	}
	f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](otlpexporter.NewFactory(), fileexporter.NewFactory())
	return f, err
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "OpenTelemetry Collector (Scribe e2e build)", Version: "${OTELCOL_VERSION#v}"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
		}},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		log.Fatal(err)
	}
}
EOF
if [[ ! -f "$work/.resolved" ]]; then
  printf 'module scribe.local/otelcolbuild\n\ngo 1.26\n' > "$work/go.mod"
  log "resolving collector ${OTELCOL_VERSION} (core and contrib) in $work"
  (cd "$work" && go get \
    "$core/otelcol@${OTELCOL_VERSION}" \
    "$core/service@${OTELCOL_VERSION}" \
    "$core/receiver/otlpreceiver@${OTELCOL_VERSION}" \
    "$core/processor/batchprocessor@${OTELCOL_VERSION}" \
    "$core/exporter/otlpexporter@${OTELCOL_VERSION}" \
    "$contrib/processor/resourceprocessor@${OTELCOL_VERSION}" \
    "$contrib/processor/attributesprocessor@${OTELCOL_VERSION}" \
    "$contrib/exporter/fileexporter@${OTELCOL_VERSION}" \
    "$core/confmap@${OTELCOL_STABLE_VERSION}" \
    "$core/confmap/provider/envprovider@${OTELCOL_STABLE_VERSION}" \
    "$core/confmap/provider/fileprovider@${OTELCOL_STABLE_VERSION}" \
    && go mod tidy && touch .resolved) >&2
fi
log "building otelcol ${OTELCOL_VERSION} (otlp receiver and exporter, batch, resource and attributes processors, file exporter) into $DIR (cold: about 6 CPU minutes)"
(cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN.tmp.$$" .) >&2
mv "$BIN.tmp.$$" "$BIN"
log "built $BIN"
echo "$BIN"
