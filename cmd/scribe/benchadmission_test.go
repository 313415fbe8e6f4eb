package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/admissiontest"
)

// installAdmission creates config/admission's policies and bindings (the
// resources its kustomization lists), as config/default installs them,
// and waits until the finalizer policy is in force in namespace ns.
func installAdmission(ctx context.Context, t testing.TB, admin client.Client, ns string) {
	t.Helper()
	dir := filepath.Join("..", "..", "config", "admission")
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("config/admission/kustomization.yaml: %v", err)
	}
	for _, res := range k.Resources {
		data, err := os.ReadFile(filepath.Join(dir, res))
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			o := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &o.Object); err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			if len(o.Object) == 0 {
				continue
			}
			if err := admin.Create(ctx, o); err != nil {
				t.Fatalf("%s: create %s %s: %v", res, o.GetKind(), o.GetName(), err)
			}
		}
	}
	// The API server loads policies from its informers: a dry-run
	// creation tells when the finalizer policy is in force.
	deadline := time.Now().Add(time.Minute)
	for {
		finalizers, err := admissiontest.ProbeCreation(ctx, admin, ns)
		if err == nil && slices.Equal(finalizers, []string{controller.Finalizer}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the finalizer policy not in force after a minute: finalizers %v, %v", finalizers, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// admissionNote says whether the benchmark installed the policies.
func admissionNote(installed bool) string {
	if installed {
		return "with config/admission's policies (the finalizer set at creation)"
	}
	return fmt.Sprintf("without config/admission's policies (%s=none: the controller writes the finalizer)", envBenchAdmission)
}

// envBenchAdmission=none leaves config/admission's policies out, as a
// cluster before Kubernetes 1.36 or the chart's finalizerPolicy.enabled=false.
const envBenchAdmission = "SCRIBE_BENCH_ADMISSION"
