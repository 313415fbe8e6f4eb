package e2e

import (
	"context"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func TestLoopOCIRepositoryAppliesScribesArtifact(t *testing.T) {
	t.Parallel()
	skipWithoutLoop(t)
	s := Start(t)
	ctx := context.Background()
	ns := "oci"
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	url := "oci://" + s.Registry + "/scribe/experiments"
	// Flux: an OCIRepository on the registry and a root Kustomization on
	// the artifact's sync index.
	ocr := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "scribe-oci", Namespace: "flux-system"},
		Spec: sourcev1.OCIRepositorySpec{
			URL: url, Insecure: true, Interval: metav1.Duration{Duration: time.Minute},
			Reference: &sourcev1.OCIRepositoryRef{Tag: "latest"},
		},
	}
	if err := s.Client.Create(ctx, ocr); err != nil {
		t.Fatal(err)
	}
	root := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "scribe-oci-root", Namespace: "flux-system"},
		Spec: kustomizev1.KustomizationSpec{
			Interval: metav1.Duration{Duration: time.Minute}, Path: "./", Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "OCIRepository", Name: "scribe-oci"},
		},
	}
	if err := s.Client.Create(ctx, root); err != nil {
		t.Fatal(err)
	}
	repo := &scribev1.Repository{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
		Spec: scribev1.RepositorySpec{
			OCI:     &scribev1.OCIRepositorySpec{URL: url},
			Applier: scribev1.ApplierSpec{Kind: "Flux", Namespace: "flux-system", Name: "scribe-oci"},
		},
	}
	if err := s.Client.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	startScribe(t, s)
	w := canaryWorkload(ns)
	w.Spec.Rollout = nil
	if err := s.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "the Workload applied from Scribe's OCI artifact and healthy", func() (bool, string) {
		got := &scribev1.Workload{}
		_ = s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, got)
		return got.Status.Phase == scribev1.WorkloadHealthy, describe(got) + "\n--- source-controller: " + s.Logs("source-controller", 2)
	})
	got := &scribev1.Workload{}
	_ = s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, got)
	ks := &kustomizev1.Kustomization{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "flux-system", Name: "workload." + ns + ".web"}, ks); err != nil {
		t.Fatal(err)
	}
	if ks.Spec.SourceRef.Kind != "OCIRepository" || ks.Status.LastAppliedRevision != "latest@"+got.Status.Revision {
		t.Fatalf("per-CR Kustomization source %s applied %q; Scribe pushed %q", ks.Spec.SourceRef.Kind, ks.Status.LastAppliedRevision, got.Status.Revision)
	}
	if r := routeWeights(ctx, s, ns, "web"); r != "web-v1=100" {
		t.Fatalf("applied HTTPRoute routes %q", r)
	}
}
