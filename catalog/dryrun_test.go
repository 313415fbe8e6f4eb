package catalog_test

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/scribe-gitops/scribe/internal/crds/crdstest"
)

// TestShippedManifestsPassServerSideDryRun: what Flux would apply for
// every built-in entry kept in catalog/ (kustomize build, the params
// substituted, the entry's namespace set) is accepted by a real
// kube-apiserver holding the upstream Argo Workflows and Testkube CRDs:
// the WorkflowTemplates and TestWorkflowTemplates validate against their
// real schemas, and the apps and configs against Kubernetes'.
func TestShippedManifestsPassServerSideDryRun(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	files := crdstest.Files(t, "argo-workflows", "testkube")
	env := &envtest.Environment{CRDDirectoryPaths: files, ErrorIfCRDPathMissing: true,
		// The Argo Workflows CRDs are large: on a loaded machine they take
		// longer than the default 10 s to be served.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 3 * time.Minute}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// An unknown or duplicate field is an error, not a warning.
	c = client.WithFieldValidation(c, metav1.FieldValidationStrict)
	ctx := context.Background()

	kinds := map[string]int{}
	for _, e := range builtinEntries(t) {
		if e.source["type"] != "catalog" {
			continue
		}
		t.Run(e.name, func(t *testing.T) {
			// Without a namespace of its own, an entry installs into its
			// Experiment's (Flux's targetNamespace).
			ns := e.namespace
			if ns == "" {
				ns = "experiment-" + e.name
			}
			createNamespace(ctx, t, c, ns)
			y, err := build(t, e.source["path"].(string)).AsYaml()
			if err != nil {
				t.Fatal(err)
			}
			out, err := substitute(string(y), e.params)
			if err != nil {
				t.Fatal(err)
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
			for {
				u := &unstructured.Unstructured{}
				if err := dec.Decode(&u.Object); err != nil {
					if errors.Is(err, io.EOF) {
						break
					}
					t.Fatal(err)
				}
				if len(u.Object) == 0 {
					continue
				}
				if u.GetKind() == "Namespace" {
					if u.GetName() != ns {
						t.Errorf("Namespace %s in an entry installing into %s", u.GetName(), ns)
					}
					continue
				}
				u.SetNamespace(ns)
				if err := c.Create(ctx, u, client.DryRunAll); err != nil {
					t.Errorf("%s %s/%s: %v", u.GetKind(), ns, u.GetName(), err)
					continue
				}
				kinds[u.GetKind()]++
			}
		})
	}
	// The templates the Experiments run were among what was checked.
	if kinds["WorkflowTemplate"] != 2 || kinds["TestWorkflowTemplate"] != 5 {
		t.Fatalf("checked %v; want 2 WorkflowTemplates and 5 TestWorkflowTemplates", kinds)
	}
}

func createNamespace(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
