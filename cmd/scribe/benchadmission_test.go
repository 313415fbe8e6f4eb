package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/admissiontest"
)

// installAdmission creates config/admission's policies and bindings
// (`kustomize build config/admission`, with the kustomize API in go.mod),
// as config/default installs them, and waits until the finalizer policy
// is in force in namespace ns.
func installAdmission(ctx context.Context, t testing.TB, admin client.Client, ns string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "config", "admission"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build config/admission: %v", err)
	}
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatalf("config/admission: %v", err)
		}
		o := &unstructured.Unstructured{Object: m}
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("config/admission: create %s %s: %v", o.GetKind(), o.GetName(), err)
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
