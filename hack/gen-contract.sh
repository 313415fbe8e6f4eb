#!/usr/bin/env bash
# Regenerates the CUE definitions of the render contract from its Go types
# (`cue get go`): render/contract (the templates' input and readBack) and
# the api/v1alpha1 types it embeds, into schemas/github.com/scribe-gitops/,
# plus the one k8s.io package those need that schemas/ lacks
# (apiextensions/v1, for JSON params). Run by `make generate`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CUE="${CUE:-cue}"
OUT="${OUT:-$ROOT/schemas}"

# `cue get go` reads packages of the current Go module; the scratch CUE
# module lives inside it so the pinned versions in go.mod are used.
scratch="$(mktemp -d "$ROOT/.contract-scratch.XXXXXX")"

trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && "$CUE" mod init scribe.dev/scratch >/dev/null && \
  "$CUE" get go github.com/scribe-gitops/scribe/render/contract)

gen="$scratch/cue.mod/gen"
rm -rf "$OUT/github.com/scribe-gitops"
mkdir -p "$OUT/github.com"
cp -r "$gen/github.com/scribe-gitops" "$OUT/github.com/scribe-gitops"
ext=k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1
rm -rf "$OUT/$ext"; mkdir -p "$(dirname "$OUT/$ext")"
cp -r "$gen/$ext" "$OUT/$ext"
# Every other package it pulled in (k8s.io/api, apimachinery) is generated
# by hack/gen-schemas.sh from the same versions; check they agree.
for d in $(cd "$gen" && find k8s.io -name '*.cue' -exec dirname {} \; | sort -u); do
  [ "$d" = "$ext" ] && continue
  if [ -d "$OUT/$d" ]; then
    diff -rq "$gen/$d" "$OUT/$d" >/dev/null || echo "gen-contract: warning: $d differs from schemas/$d (run make schemas)" >&2
  fi
done
echo "gen-contract: wrote schemas/github.com/scribe-gitops and schemas/$ext" >&2
