package render_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/render"
)

// Kinds Scribe renders whose upstream CRDs are not in ../shared/crds (their
// CUE schemas are hand-written); the apiserver cannot check them.
var noUpstreamCRD = map[string]bool{
	"TalosControlPlane":   true,
	"TalosConfigTemplate": true,
	"GCPMachineTemplate":  true,
}

func sharedCRDs(t *testing.T) []string {
	// The upstream CRDs live beside the repository (../shared/crds), or where
	// SCRIBE_SHARED_CRDS says.
	root := os.Getenv("SCRIBE_SHARED_CRDS")
	for _, candidate := range []string{filepath.Join("..", "..", "shared", "crds"), "/work/shared/crds"} {
		if root != "" {
			break
		}
		if _, err := os.Stat(candidate); err == nil {
			root = candidate
		}
	}
	dirs, err := filepath.Glob(filepath.Join(root, "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no upstream CRDs under %s (set SCRIBE_SHARED_CRDS)", root)
	}
	var out []string
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

func TestRenderedObjectsPassServerSideDryRunApply(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     append(sharedCRDs(t), filepath.Join("..", "config", "crd", "bases")),
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]bool{"flux-system": true}
	type item struct {
		file string
		obj  *unstructured.Unstructured
	}
	var items []item
	for _, file := range validFixtures(t) {
		// The custom resource itself must be accepted by the apiserver.
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		cr := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &cr.Object); err != nil {
			t.Fatal(err)
		}
		delete(cr.Object, "status")
		namespaces[cr.GetNamespace()] = true
		items = append(items, item{file, cr})

		b := renderFile(t, e, file)
		for _, f := range b.Files {
			if !strings.HasSuffix(f.Path, ".yaml") || strings.HasSuffix(f.Path, "/kustomization.yaml") {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(f.Data, &u.Object); err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
			namespaces[u.GetNamespace()] = true
			items = append(items, item{file + ":" + f.Path, u})
		}
	}
	nsNames := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		nsNames = append(nsNames, ns)
	}
	sort.Strings(nsNames)
	for _, ns := range nsNames {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}

	skipped := map[string]bool{}
	checked := 0
	for _, it := range items {
		gvk := it.obj.GroupVersionKind()
		if _, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version); err != nil {
			if meta.IsNoMatchError(err) && noUpstreamCRD[gvk.Kind] {
				skipped[gvk.Kind] = true
				continue
			}
			t.Errorf("%s: no API for %s: %v", it.file, gvk, err)
			continue
		}
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(it.obj), client.DryRunAll, client.FieldOwner("scribe"), client.ForceOwnership)
		if err != nil {
			t.Errorf("%s: server-side dry-run apply of %s %s/%s: %v", it.file, gvk.Kind, it.obj.GetNamespace(), it.obj.GetName(), err)
			continue
		}
		checked++
	}
	if checked < 50 {
		t.Errorf("only %d objects checked", checked)
	}
	t.Logf("%d objects accepted by the apiserver; kinds without an upstream CRD, checked only against their CUE schema: %v", checked, skipped)
}
