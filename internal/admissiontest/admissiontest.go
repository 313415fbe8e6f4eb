// Package admissiontest tells tests when config/admission's finalizer
// policy is in force on an API server: the server loads policies and
// their bindings from its informers, and learns a new kind's schema for
// mutating policies every 5 s, so a test that installed them waits.
package admissiontest

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// ProbeCreation creates a minimal valid Workload in namespace ns as a dry
// run (admission runs, nothing is stored) and returns the finalizers the
// API server would store it with (config/admission's policy adds
// Scribe's finalizer). An error is the creation's refusal, such as the
// 503 a mutating policy answers until it knows the kind.
func ProbeCreation(ctx context.Context, c client.Client, ns string) (finalizers []string, err error) {
	probe := &scribev1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admission-probe"},
		Spec: scribev1.WorkloadSpec{
			Service:  scribev1.ServiceSpec{Ports: []scribev1.ServicePort{{Name: "http", Port: 80, TargetPort: 8080}}},
			Versions: []scribev1.Version{{Name: "v1", Image: "ghcr.io/example/web:v1"}},
		},
	}
	if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
		return nil, err
	}
	return probe.Finalizers, nil
}
