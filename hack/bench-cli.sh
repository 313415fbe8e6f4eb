#!/usr/bin/env bash
# Whole-process time and peak memory of `scribe render -f DIR` over 50
# one-version Workloads (the issue's Timoni comparison), with /usr/bin/time -v.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
go build -o "$TMP/scribe" "$ROOT/cmd/scribe"
mkdir -p "$TMP/in"
for i in $(seq -w 0 49); do
  cat > "$TMP/in/web-$i.yaml" <<YAML
apiVersion: scribe.dev/v1alpha1
kind: Workload
metadata:
  name: web-0$i
  namespace: bench
spec:
  versions:
    - name: v1
      image: ghcr.io/example/web:1
      resources:
        requests: {cpu: 100m, memory: 128Mi}
  service:
    ports:
      - {name: http, port: 80, targetPort: 8080}
  traffic:
    parentRefs:
      - {name: public, namespace: gateway-system}
    hostnames: [web-0$i.example.com]
YAML
done
/usr/bin/time -v "$TMP/scribe" render -f "$TMP/in" -o "$TMP/out" 2>&1 >/dev/null |
  grep -E 'Elapsed|Maximum resident|User time|System time' | sed 's/^\s*/RESULT scribe render 50 Workloads: /'
