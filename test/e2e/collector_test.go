package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestCollectorAcceptsTheRenderedConfig: the collector configuration Scribe
// renders from the catalog's otel-collector entry (the gateway tutorial's
// golden, which `-update` rewrites from the catalog) is one the real
// OpenTelemetry Collector accepts (`otelcol validate`: every component
// known, every field of its configuration), with no real node needed.
func TestCollectorAcceptsTheRenderedConfig(t *testing.T) {
	skipWithoutLoop(t)
	bin, err := buildDir(t.Logf, "build-otelcol.sh")
	if err != nil {
		t.Fatalf("the OpenTelemetry Collector (hack/build-otelcol.sh): %v", err)
	}
	golden, err := filepath.Glob(filepath.Join(repoRoot(), "fixtures", "golden", "gateway-tutorial", "experiments", "experiment",
		"gateway-tutorial", "components", "app", "observability", "configmap-otel-collector-*.yaml"))
	if err != nil || len(golden) != 1 {
		t.Fatalf("the rendered collector ConfigMap: %v %v", golden, err)
	}
	b, err := os.ReadFile(golden[0])
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(cm.Data["config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "validate", "--config="+cfg).CombinedOutput(); err != nil {
		t.Fatalf("otelcol validate %s: %v\n%s", golden[0], err, out)
	}
}
