package render_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/internal/crds"
	"github.com/scribe-gitops/scribe/internal/crds/crdstest"
	"github.com/scribe-gitops/scribe/render"
)

// upstreamCRDs returns the CRD files of every upstream project Scribe
// renders for that can be found, and the kinds of those that cannot (only
// when the repository's copies cannot be located, see internal/crds, and
// not under SCRIBE_CRDS_REQUIRED=1): objects of those kinds are checked only
// against their CUE schema.
func upstreamCRDs(t *testing.T) (files []string, unchecked map[string]string) {
	t.Helper()
	files, missing := crdstest.Available(t, crds.Names()...)
	unchecked = map[string]string{}
	for _, p := range crds.Projects() {
		if slices.Contains(missing, p.Name) {
			for _, k := range p.Kinds {
				unchecked[k] = p.Name
			}
		}
	}
	return files, unchecked
}

func TestRenderedObjectsPassServerSideDryRunApply(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	files, unchecked := upstreamCRDs(t)
	env := &envtest.Environment{
		CRDDirectoryPaths:     append(files, filepath.Join("..", "config", "crd", "bases")),
		ErrorIfCRDPathMissing: true,
		// Hundreds of CRDs on a loaded CI machine take longer than the
		// default 10 s to be served.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 3 * time.Minute},
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

		bundles := []*render.Bundle{renderFile(t, e, file)}
		// And with the custom resource's own Flux GitRepository.
		pub := render.DefaultPublish()
		pub.Path = "clusters/dev"
		pub.Applier.Revision = "main"
		pub.Applier.FluxSource = &render.FluxGitSource{URL: "https://git.example/acme/experiments.git", SecretRef: "flux-git", Timeout: "1m0s"}
		obj, err := render.ObjectsFromYAML(data)
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.Render(ctx, render.Input{Object: obj[0], Publish: pub, Resolved: testResolved})
		if err != nil {
			t.Fatalf("%s with a per-CR source: %v", file, err)
		}
		bundles = append(bundles, b)
		for _, b := range bundles {
			for _, f := range b.Files {
				if !strings.HasSuffix(f.Path, ".yaml") || strings.HasSuffix(f.Path, "/kustomization.yaml") {
					continue
				}
				for i, doc := range strings.Split(string(f.Data), "\n---\n") {
					u := &unstructured.Unstructured{}
					if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
						t.Fatalf("%s: %v", f.Path, err)
					}
					if u.GetNamespace() != "" {
						// Cluster-scoped objects (of hydrated components) have none.
						namespaces[u.GetNamespace()] = true
					}
					items = append(items, item{fmt.Sprintf("%s:%s[%d]", file, f.Path, i), u})
				}
			}
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
			if project, ok := unchecked[gvk.Kind]; ok && meta.IsNoMatchError(err) {
				skipped[gvk.Kind+" ("+project+")"] = true
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
	if len(skipped) > 0 {
		t.Logf("kinds whose upstream CRDs were not found, checked only against their CUE schema (run inside the repository, where %s holds them): %v", crds.RepoFolder, skipped)
	}
	t.Logf("%d objects accepted by the apiserver", checked)
}
