package controller_test

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/admissiontest"
)

// bindFinalizerPolicy installs config/admission's finalizer policy as
// shipped and binds it to the namespace ns only (other tests share the API
// server), then waits until the API server applies it.
func (f *fixture) bindFinalizerPolicy(t *testing.T, ns string) {
	t.Helper()
	data, err := os.ReadFile("../config/admission/finalizer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	policy, binding := &admissionregistrationv1.MutatingAdmissionPolicy{}, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	if err := dec.Decode(policy); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(binding); err != nil {
		t.Fatal(err)
	}
	if err := f.e.c.Create(f.ctx(), policy); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding.Name += "-" + ns
	binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}
	if err := f.e.c.Create(f.ctx(), binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.e.c.Delete(f.ctx(), binding); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	// The API server loads policies and bindings from its informers: a
	// dry-run creation tells when this one is in force.
	waitFor(t, "the finalizer policy in force in "+ns, func() (bool, string) {
		finalizers, err := admissiontest.ProbeCreation(f.ctx(), f.e.c, ns)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(finalizers, []string{controller.Finalizer}), fmt.Sprintf("finalizers %v", finalizers)
	})
}

func TestFinalizerPolicyHoldsNewCustomResourcesWithoutAControllerWrite(t *testing.T) {
	f := newFixture(t)
	outside := f.ns + "-unbound"
	if err := f.e.c.Create(f.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: outside}}); err != nil {
		t.Fatal(err)
	}
	f.bindFinalizerPolicy(t, f.ns)

	// What the API server stores, per creation (dry runs: admission runs,
	// nothing is kept).
	for _, tc := range []struct {
		what string
		obj  client.Object
		want []string
	}{
		{"a Workload", workload(f.ns, "v1"), []string{controller.Finalizer}},
		{"a Workload that carries another finalizer keeps it", func() client.Object {
			w := workload(f.ns, "v1")
			w.Finalizers = []string{"example.com/hold"}
			return w
		}(), []string{"example.com/hold", controller.Finalizer}},
		{"a Workload that already carries Scribe's finalizer has it once", func() client.Object {
			w := workload(f.ns, "v1")
			w.Finalizers = []string{controller.Finalizer}
			return w
		}(), []string{controller.Finalizer}},
		{"an Experiment", &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "exp"},
			Spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{{Name: "app", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}}}}}, []string{controller.Finalizer}},
		{"a Workload in a namespace the binding leaves out gets none", workload(outside, "v1"), nil},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if err := f.e.c.Create(f.ctx(), tc.obj, client.DryRunAll); err != nil {
				t.Fatal(err)
			}
			if got := tc.obj.GetFinalizers(); !slices.Equal(got, tc.want) {
				t.Fatalf("finalizers %v, want %v", got, tc.want)
			}
		})
	}

	// Through the loop: the Workload is committed and the controller
	// never wrote its metadata (only its status), and deleting it still
	// waits for the applier's prune.
	f.startWithRepository(t)
	f.deployStable(t, workload(f.ns, "v1"))
	w := f.workload(t)
	if !slices.Equal(w.Finalizers, []string{controller.Finalizer}) {
		t.Fatalf("finalizers %v", w.Finalizers)
	}
	for _, m := range w.ManagedFields {
		if m.Manager == "scribe-controller" && m.Subresource == "" {
			t.Fatalf("the controller wrote the Workload's metadata (%s at %s): %s", m.Operation, m.Time, m.FieldsV1.GetRawString())
		}
	}
	if err := f.e.c.Delete(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
	f.waitWorkload(t, "the delete commit", func(w *scribev1.Workload) bool { return w.Status.Phase == scribev1.WorkloadDeleting })
	f.deleteKustomization(t, kustomizationName("Workload", f.ns, "web"))
	waitFor(t, "the Workload to be gone", func() (bool, string) {
		err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, &scribev1.Workload{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
