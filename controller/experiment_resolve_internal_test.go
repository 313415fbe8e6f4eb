package controller

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// TestResolveReadsTheHubAddressesFromOtelConfig: the hub collector's
// endpoint and the metrics backend's URL come from the otel-config
// ConfigMap in the Experiment's namespace (trimmed); without it both are
// empty, and render refuses a target with observability on (no default).
func TestResolveReadsTheHubAddressesFromOtelConfig(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	exp := &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "lab"}}
	for _, tc := range []struct {
		name string
		objs []client.Object
		want render.Resolved
	}{
		{name: "no ConfigMap", want: render.Resolved{}},
		{name: "another namespace's ConfigMap is not read", objs: []client.Object{&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: OTELConfigMapName, Namespace: "other"},
			Data:       map[string]string{OTELEndpointKey: "https://otlp.other.example.com:4317"},
		}}, want: render.Resolved{}},
		{name: "both keys", objs: []client.Object{&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: OTELConfigMapName, Namespace: "lab"},
			Data:       map[string]string{OTELEndpointKey: " https://otlp.hub.example.com:4317\n", OTELMetricsURLKey: "http://mimir.mimir.svc:8080/prometheus"},
		}}, want: render.Resolved{OTELEndpoint: "https://otlp.hub.example.com:4317", MetricsURL: "http://mimir.mimir.svc:8080/prometheus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objs...).Build()
			r := &ExperimentReconciler{Publisher: &Publisher{Reader: c}}
			got, err := r.resolve(context.Background(), exp)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("resolved %+v, want %+v", got, tc.want)
			}
		})
	}
}
