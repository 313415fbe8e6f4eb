package render_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// TestDecodeAcceptsMetadataAsTheClusterStoresIt: a CR read from the
// cluster (uid, resourceVersion, managedFields, finalizers, owner
// references, timestamps) passes the metadata validation the CLI applies
// to files, and one with an invalid name does not, from either path.
func TestDecodeAcceptsMetadataAsTheClusterStoresIt(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	w := &scribev1.Workload{
		TypeMeta: metav1.TypeMeta{APIVersion: scribev1.GroupVersion.String(), Kind: scribev1.WorkloadKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: "checkout", Namespace: "shop", UID: "0b9c1f3e-7a8e-4c59-9a51-3c1a4b7e2d10", ResourceVersion: "12345", Generation: 3,
			CreationTimestamp: now,
			Labels:            map[string]string{"team": "shop", "app.kubernetes.io/part-of": "store"},
			Annotations:       map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{\"a\": 1}\n"},
			Finalizers:        []string{"scribe.dev/finalizer"},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "1b9c1f3e-7a8e-4c59-9a51-3c1a4b7e2d10"}},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "scribe.dev/v1alpha1", Time: &now,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`),
			}},
		},
		Spec: scribev1.WorkloadSpec{
			Versions: []scribev1.Version{{Name: "v1", Image: "nginx:1.27"}},
			Service:  scribev1.ServiceSpec{Ports: []scribev1.ServicePort{{Name: "http", Port: 80}}},
		},
	}
	obj, err := render.ObjectFromClient(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Decode(ctx, obj); err != nil {
		t.Fatalf("decode a Workload as the cluster stores it: %v", err)
	}
	if _, err := e.RenderWorkload(ctx, render.WorkloadInput{Workload: w, Publish: render.DefaultPublish()}); err != nil {
		t.Fatalf("render the typed Workload: %v", err)
	}

	bad := w.DeepCopy()
	bad.Name = "checkout\n---\nkind: ClusterRoleBinding"
	for name, run := range map[string]func() error{
		"Decode": func() error {
			obj, err := render.ObjectFromClient(bad)
			if err != nil {
				return err
			}
			_, err = e.Decode(ctx, obj)
			return err
		},
		"RenderWorkload": func() error {
			_, err := e.RenderWorkload(ctx, render.WorkloadInput{Workload: bad, Publish: render.DefaultPublish()})
			return err
		},
	} {
		err := run()
		if err == nil || !strings.Contains(err.Error(), `metadata.name: Invalid value: "checkout\n---\nkind: ClusterRoleBinding"`) {
			t.Errorf("%s of a Workload with an injected name: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n---\n") {
			t.Errorf("%s: the error repeats the injected document unquoted: %v", name, err)
		}
	}
}
