package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scribe-gitops/scribe/render"
)

// TestValidateAgreesWithTheAPIServerOnEveryKind creates the custom
// resources of testdata/validate with a dry run in a real kube-apiserver
// serving Scribe's CRDs: what scribe validate admits, it admits; what
// scribe validate refuses, it refuses, at the same field.
func TestValidateAgreesWithTheAPIServerOnEveryKind(t *testing.T) {
	_, cfg := startAPIServer(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{"shop", "demo"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	objects := func(t *testing.T, file string) []map[string]any {
		t.Helper()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := render.ObjectsFromYAML(data)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	valid, _ := filepath.Glob(filepath.Join(validateTestdata, "all-kinds", "*.yaml"))
	valid = append(valid, allKindsWorkload)
	invalid, _ := filepath.Glob(filepath.Join(validateTestdata, "invalid", "*.yaml"))
	if len(valid) == 0 || len(invalid) == 0 {
		t.Fatal("no fixtures")
	}
	for _, file := range append(valid, invalid...) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			code, _, stderr := scribe(t, "validate", "-f", file)
			for _, obj := range objects(t, file) {
				u := &unstructured.Unstructured{Object: obj}
				apiErr := c.Create(ctx, u, client.DryRunAll)
				switch {
				case code == exitOK && apiErr != nil:
					t.Errorf("scribe validate admits %s %s; the apiserver refuses it: %v", u.GetKind(), u.GetName(), apiErr)
				case code != exitOK && apiErr == nil:
					t.Errorf("scribe validate refuses %s %s (%s); the apiserver admits it", u.GetKind(), u.GetName(), stderr)
				case code != exitOK:
					// The field scribe names is the field the apiserver names.
					_, detail, _ := strings.Cut(stderr, "is invalid:\n  ")
					field, _, _ := strings.Cut(detail, ":")
					if field == "" || !strings.Contains(apiErr.Error(), field) {
						t.Errorf("scribe validate names %q; the apiserver says: %v", field, apiErr)
					}
				}
			}
		})
	}
}
