package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/render"
)

// FuzzRenderBytes feeds raw bytes as an input file through scribe render:
// it never panics, and it exits 0 (rendered) or 2 (bad input), nothing
// else. Seeds: every valid fixture, plus testdata/fuzz/FuzzRenderBytes.
func FuzzRenderBytes(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(fixtures, "valid", "*.yaml"))
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	engine := sharedEngine(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "input.yaml")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := renderBounded(t, engine, file)
		if code != exitOK && code != exitError {
			t.Fatalf("exit %d, want 0 or 2\nstderr:\n%s", code, stderr)
		}
		if code == exitError && stderr == "" {
			t.Fatal("exit 2 with nothing on stderr")
		}
	})
}

// FuzzWorkloadFields assembles a Workload from fuzzed fields (name,
// namespace, version names, image, env name, config key and value, port
// name) and renders it. It never panics; when the render exits 0, the
// stream re-parses as YAML, every document is an object, and every object's
// metadata.name (and namespace, when set) is what the apiserver accepts: a
// DNS-1123 subdomain (a DNS-1123 label for a namespace).
func FuzzWorkloadFields(f *testing.F) {
	f.Add("web", "shop", "v1", "v2", "ghcr.io/example/web:1", "LOG_LEVEL", "MODE", "fast", "http")
	f.Add("order-worker", "team-a", "2024-06-01", "canary", "registry.example.com/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "A_B", "config.json", "{}", "metrics")
	engine := sharedEngine(f)
	f.Fuzz(func(t *testing.T, name, namespace, v1, v2, image, envName, configKey, configValue, portName string) {
		versions := []any{map[string]any{
			"name": v1, "image": image,
			"env":    []any{map[string]any{"name": envName, "value": "x"}},
			"config": map[string]any{configKey: configValue},
		}}
		if v2 != "" {
			versions = append(versions, map[string]any{"name": v2, "image": image})
		}
		w := map[string]any{
			"apiVersion": "scribe.dev/v1alpha1",
			"kind":       "Workload",
			"metadata":   map[string]any{"name": name, "namespace": namespace},
			"spec": map[string]any{
				"versions": versions,
				"service":  map[string]any{"ports": []any{map[string]any{"name": portName, "port": 80}}},
			},
		}
		data, err := sigsyaml.Marshal(w)
		if err != nil {
			t.Skip("not representable as YAML:", err)
		}
		file := filepath.Join(t.TempDir(), "workload.yaml")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := renderBounded(t, engine, file)
		switch code {
		case exitError:
			return
		case exitOK:
		default:
			t.Fatalf("exit %d, want 0 or 2\nstderr:\n%s", code, stderr)
		}
		dec := yaml.NewDecoder(strings.NewReader(stdout))
		n := 0
		for {
			var obj struct {
				Kind     string `yaml:"kind"`
				Metadata struct {
					Name      string `yaml:"name"`
					Namespace string `yaml:"namespace"`
				} `yaml:"metadata"`
			}
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("the output does not re-parse as YAML: %v\n%s", err, stdout)
			}
			n++
			if obj.Kind == "" {
				t.Fatalf("document %d has no kind:\n%s", n, stdout)
			}
			if errs := validation.IsDNS1123Subdomain(obj.Metadata.Name); len(errs) > 0 {
				t.Fatalf("%s %q: metadata.name is not a DNS-1123 subdomain: %s\ninput:\n%s", obj.Kind, obj.Metadata.Name, strings.Join(errs, "; "), data)
			}
			if ns := obj.Metadata.Namespace; ns != "" {
				if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
					t.Fatalf("%s %q: metadata.namespace %q is not a DNS-1123 label: %s\ninput:\n%s", obj.Kind, obj.Metadata.Name, ns, strings.Join(errs, "; "), data)
				}
			}
		}
		if n == 0 {
			t.Fatalf("exit 0 with no document\nstderr:\n%s", stderr)
		}
	})
}

// renderTimeout bounds one fuzzed render: longer is a hang, and a failure
// the fuzzer keeps, not a stuck run.
const renderTimeout = 20 * time.Second

// sharedEngine is the built-in engine every run of a fuzz target renders
// with, built once per fuzzing process: a new engine per run made each
// run cost its template evaluation and fuzzing crawled at about one run a
// second.
func sharedEngine(f *testing.F) *render.Engine {
	f.Helper()
	e, err := render.New()
	if err != nil {
		f.Fatal(err)
	}
	return e
}

// renderBounded runs `scribe render -f file` and fails the test if it does
// not finish within renderTimeout.
func renderBounded(t *testing.T, engine *render.Engine, file string) (int, string, string) {
	t.Helper()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run(context.WithValue(context.Background(), engineKey{}, engine), []string{"render", "-f", file}, &stdout, &stderr)
		done <- result{code, stdout.String(), stderr.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.stdout, r.stderr
	case <-time.After(renderTimeout):
		t.Fatalf("render did not finish within %s", renderTimeout)
		return 0, "", ""
	}
}
