package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// writeWorkloads writes n one-version Workloads (7 objects each with their
// sync object) into dir, one file each: the input of the issue's
// `/usr/bin/time -v scribe render -f DIR` comparison (hack/bench-cli.sh).
func writeWorkloads(t testing.TB, dir string, n int) {
	t.Helper()
	for i := range n {
		doc := fmt.Sprintf(`apiVersion: scribe.dev/v1alpha1
kind: Workload
metadata:
  name: web-%03d
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
    hostnames: [web-%03d.example.com]
`, i, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("web-%03d.yaml", i)), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// One `scribe render -f DIR -o OUT` of 50 one-version Workloads (350
// objects), in process: engine construction, schema compilation, parallel
// render and the atomic write included.
func BenchmarkCLIRender50Workloads(b *testing.B) {
	in := b.TempDir()
	writeWorkloads(b, in, 50)
	out := filepath.Join(b.TempDir(), "out")
	b.ReportAllocs()
	for b.Loop() {
		if code := run(context.Background(), []string{"render", "-f", in, "-o", out}, io.Discard, io.Discard); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}
