package charts_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "scribe"
	releaseName = "scribe"
	releaseNS   = "scribe-system"
)

// helmBinary returns the helm CLI the tests run: $HELM when set (make test
// sets it), else what hack/build-helm.sh builds into the cache (it returns
// at once when the binary is there). Helm is not in go.mod.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HELM"); p != "" {
		return p
	}
	cmd := exec.Command(filepath.Join("..", "hack", "build-helm.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/build-helm.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// helm runs the helm CLI with args and its own, empty configuration,
// cache and data directories, and returns its stdout; a non-zero exit is
// an error that carries stderr.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := helmBinary(t)
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// valuesFile writes values as a YAML file for -f, or returns "" for none.
func valuesFile(t *testing.T, values map[string]any) string {
	t.Helper()
	if values == nil {
		return ""
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	// Not under t.TempDir(), whose name comes from the test's and may hold
	// a comma, which -f takes as a separator.
	f, err := os.CreateTemp("", "scribe-values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// templateArgs are the arguments of `helm template` of chart dir with
// values, into releaseNS.
func templateArgs(t *testing.T, dir string, values map[string]any, extra ...string) []string {
	t.Helper()
	return releaseArgs(t, "template", dir, values, extra...)
}

// releaseArgs are the arguments of `helm VERB` (template, install,
// upgrade) of release releaseName of chart dir with values, in releaseNS.
func releaseArgs(t *testing.T, verb, dir string, values map[string]any, extra ...string) []string {
	t.Helper()
	args := []string{verb, releaseName, dir, "--namespace", releaseNS}
	if f := valuesFile(t, values); f != "" {
		args = append(args, "-f", f)
	}
	return append(args, extra...)
}

// render runs `helm template` with values and returns the objects.
func render(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	out, err := helm(t, templateArgs(t, chartDir, values)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll([]byte(out))
	if err != nil {
		t.Fatalf("helm template output: %v", err)
	}
	return objs
}

// decodeAll decodes a multi-document YAML stream, skipping empty documents.
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", i, err, doc)
		}
		if s := string(bytes.TrimSpace(j)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", i, err, doc)
		}
		out = append(out, u)
	}
}

// decode converts u strictly into into (a misspelt field fails).
func decode(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func byKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// named returns the object of kind and name, or nil.
func named(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}
