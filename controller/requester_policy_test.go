package controller_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// bindRequesterPolicy installs config/admission's requester policy as
// shipped, binds it to the namespace ns only (other tests share the API
// server), and waits until the API server applies it to the Workload web.
func (f *fixture) bindRequesterPolicy(t *testing.T, ns string) {
	t.Helper()
	data, err := os.ReadFile("../config/admission/requester.yaml")
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
	waitFor(t, "the requester policy in force in "+ns, func() (bool, string) {
		ok, err := controller.RequesterPolicyInForce(f.ctx(), f.e.c, ns, "web")
		return ok, fmt.Sprint(err)
	})
}

// as is a client authenticated as user (with every permission).
func (f *fixture) as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(f.e.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	c, err := client.New(cfg, client.Options{Scheme: f.e.c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// annotate merge-patches the Workload web in ns as c and returns its
// annotations as stored.
func (f *fixture) annotate(t *testing.T, c client.Client, ns string, ann map[string]string) map[string]string {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		t.Fatal(err)
	}
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	if err := c.Patch(f.ctx(), w, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	return w.Annotations
}

// Who asked, as the API server knows it: where the requester policy is in
// force, whoever sets a request annotation is recorded by their
// authenticated name whatever they wrote, a forged verified name is
// overwritten, and a write that touches no request leaves the name; where
// it is not, the probe says so and the controller shows a claim.
func TestRequesterPolicyRecordsTheAuthenticatedWriter(t *testing.T) {
	f := newFixture(t)
	outside := f.ns + "-unbound"
	if err := f.e.c.Create(f.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: outside}}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{f.ns, outside} {
		if err := f.e.c.Create(f.ctx(), workload(ns, "v1")); err != nil {
			t.Fatal(err)
		}
	}
	f.bindRequesterPolicy(t, f.ns)

	for _, step := range []struct {
		what, user string
		ann        map[string]string
		want       string
	}{
		{"alice aborts, claiming to be the CEO and forging the verified name", "alice", map[string]string{
			scribev1.AbortAnnotation: "t1", scribev1.RequestedByAnnotation: "the-ceo", scribev1.RequestedByVerifiedAnnotation: "the-ceo"}, "alice"},
		{"mallory rewrites only the verified name", "mallory", map[string]string{scribev1.RequestedByVerifiedAnnotation: "the-ceo"}, "mallory"},
		{"writing the name already there changes nothing", "erin", map[string]string{scribev1.RequestedByVerifiedAnnotation: "mallory"}, "mallory"},
		{"mallory removes it", "mallory", map[string]string{scribev1.RequestedByVerifiedAnnotation: ""}, "mallory"},
		{"bob changes the reason of the pending request", "bob", map[string]string{scribev1.RequestReasonAnnotation: "p99"}, "bob"},
		{"carol writes an unrelated annotation: the name stays", "carol", map[string]string{"example.com/note": "x"}, "bob"},
	} {
		got := f.annotate(t, f.as(t, step.user), f.ns, step.ann)
		if got[scribev1.RequestedByVerifiedAnnotation] != step.want {
			t.Errorf("%s: verified %q, want %q", step.what, got[scribev1.RequestedByVerifiedAnnotation], step.want)
		}
	}
	stored := f.annotate(t, f.as(t, "dave"), f.ns, map[string]string{scribev1.PromoteFullAnnotation: "f1"})
	inForce, err := controller.RequesterPolicyInForce(f.ctx(), f.e.c, f.ns, "web")
	if err != nil || !inForce {
		t.Fatalf("probe in the bound namespace: %v %v", inForce, err)
	}
	if by := controller.RequestsOf(stored, inForce); by.VerifiedBy != "dave" {
		t.Errorf("requests read %+v", by)
	}

	// Outside the binding the forged name is stored as written, and the
	// probe tells the controller not to believe it.
	forged := f.annotate(t, f.as(t, "mallory"), outside, map[string]string{
		scribev1.AbortAnnotation: "t1", scribev1.RequestedByVerifiedAnnotation: "alice"})
	if forged[scribev1.RequestedByVerifiedAnnotation] != "alice" {
		t.Fatalf("outside the binding: verified %q", forged[scribev1.RequestedByVerifiedAnnotation])
	}
	inForce, err = controller.RequesterPolicyInForce(f.ctx(), f.e.c, outside, "web")
	if err != nil || inForce {
		t.Fatalf("probe outside the binding: %v %v", inForce, err)
	}
	if by := controller.RequestsOf(forged, inForce); by.VerifiedBy != "" {
		t.Errorf("the forged name is believed: %+v", by)
	}
	// The probe stored nothing.
	w := &scribev1.Workload{}
	if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: outside, Name: "web"}, w); err != nil || w.Annotations[scribev1.RequestedByVerifiedAnnotation] != "alice" {
		t.Errorf("after the probe: %v %v", w.Annotations, err)
	}
}
