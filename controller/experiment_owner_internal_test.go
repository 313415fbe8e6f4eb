package controller

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestExperimentOwnerMapsReadBackObjectsToTheirExperiment: a watched
// object maps to its Experiment: a sync object by its
// scribe.dev/{kind,namespace,name} labels, a rendered object by
// scribe.dev/experiment in its own namespace, and one rendered into
// another namespace (a TestWorkflowExecution in Testkube's) in the
// namespace scribe.dev/namespace names.
func TestExperimentOwnerMapsReadBackObjectsToTheirExperiment(t *testing.T) {
	for _, tt := range []struct {
		name   string
		ns     string
		labels map[string]string
		want   []types.NamespacedName
	}{
		{name: "a sync object by its kind, namespace and name labels", ns: "flux-system",
			labels: map[string]string{"scribe.dev/kind": "Experiment", "scribe.dev/namespace": "lab", "scribe.dev/name": "eval"},
			want:   []types.NamespacedName{{Namespace: "lab", Name: "eval"}}},
		{name: "a rendered object in its Experiment's namespace", ns: "lab",
			labels: map[string]string{"scribe.dev/experiment": "eval"},
			want:   []types.NamespacedName{{Namespace: "lab", Name: "eval"}}},
		{name: "a Testkube execution in Testkube's namespace", ns: "testkube",
			labels: map[string]string{"scribe.dev/experiment": "eval", "scribe.dev/namespace": "lab"},
			want:   []types.NamespacedName{{Namespace: "lab", Name: "eval"}}},
		{name: "a Workload's sync object is not an Experiment's", ns: "flux-system",
			labels: map[string]string{"scribe.dev/kind": "Workload", "scribe.dev/namespace": "lab", "scribe.dev/name": "web"}},
		{name: "an unlabelled object", ns: "lab"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: tt.ns, Name: "x", Labels: tt.labels}}
			var got []types.NamespacedName
			for _, r := range experimentOwner(context.Background(), o) {
				got = append(got, r.NamespacedName)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("maps to %v, want %v", got, tt.want)
			}
		})
	}
}
