package crds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// crdYAML is a small CustomResourceDefinition of kind in the group
// example.com; extra is appended under spec.
func crdYAML(apiVersion, kind, extra string) string {
	plural := strings.ToLower(kind) + "s"
	return "apiVersion: " + apiVersion + "\n" +
		"kind: CustomResourceDefinition\n" +
		"metadata:\n  name: " + plural + ".example.com\n" +
		"spec:\n  group: example.com\n  scope: Namespaced\n" +
		"  names:\n    kind: " + kind + "\n    plural: " + plural + "\n" +
		"  versions:\n  - name: v1\n    served: true\n    storage: true\n" + extra
}

func TestCheck(t *testing.T) {
	two := Project{Name: "two", Files: []string{"a.yaml", "b.yaml"}, Kinds: []string{"Alpha", "Beta"}}
	alpha := crdYAML("apiextensions.k8s.io/v1", "Alpha", "")
	beta := crdYAML("apiextensions.k8s.io/v1", "Beta", "")
	tests := []struct {
		name string
		data []string
		// wantErr are parts of the error; none means no error.
		wantErr []string
	}{
		{name: "one CustomResourceDefinition per file, the kinds in table order", data: []string{alpha, beta}},
		{name: "comments and empty documents around the one CRD are fine", data: []string{"# upstream header\n---\n" + alpha + "---\n", beta}},
		{name: "kinds in another order", data: []string{beta, alpha}, wantErr: []string{`a.yaml defines the kind "Beta", the table lists "Alpha"`, `b.yaml defines the kind "Alpha"`}},
		{name: "two CRDs in one file", data: []string{alpha + "---\n" + beta, beta}, wantErr: []string{"a.yaml: 2 YAML documents"}},
		{name: "an empty file", data: []string{"# nothing\n", beta}, wantErr: []string{"a.yaml: 0 YAML documents"}},
		{name: "not a CRD", data: []string{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", beta}, wantErr: []string{"a.yaml: a v1 ConfigMap, want an apiextensions.k8s.io/v1 CustomResourceDefinition"}},
		{name: "a v1beta1 CRD", data: []string{crdYAML("apiextensions.k8s.io/v1beta1", "Alpha", ""), beta}, wantErr: []string{"a.yaml: a apiextensions.k8s.io/v1beta1 CustomResourceDefinition"}},
		{name: "an unknown field", data: []string{alpha, crdYAML("apiextensions.k8s.io/v1", "Beta", "  validation: {}\n")}, wantErr: []string{"b.yaml: decode a CustomResourceDefinition", "validation"}},
		{name: "a repeated key", data: []string{alpha + "metadata:\n  name: again\n", beta}, wantErr: []string{"a.yaml: YAML document 1"}},
		{name: "fewer files than the table lists", data: []string{alpha}, wantErr: []string{"two: 1 files to check, the table lists 2 files and 2 kinds"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := make([][]byte, len(tc.data))
			for i, d := range tc.data {
				data[i] = []byte(d)
			}
			err := Check(two, data)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	p := Project{Name: "one", Files: []string{"a.yaml"}, Kinds: []string{"Alpha"}}
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(crdYAML("apiextensions.k8s.io/v1", "Alpha", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(crdYAML("apiextensions.k8s.io/v1", "Alpha", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		files   []string
		wantErr string
	}{
		{name: "the listed file", files: []string{filepath.Join(dir, "a.yaml")}},
		{name: "a file of another name", files: []string{filepath.Join(dir, "b.yaml")}, wantErr: "the table lists a.yaml"},
		{name: "a missing file", files: []string{filepath.Join(dir, "absent", "a.yaml")}, wantErr: "no such file"},
		{name: "no file", wantErr: "0 files, the table lists 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFiles(p, tc.files)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
