package controller

import (
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// TestCurrentSyncNameIsTheRecordedSyncObject: the naming migration passes
// the templates the name of the sync object a custom resource's status
// records first among its generated resources, and nothing when there is
// none or the first object is not a sync object.
func TestCurrentSyncNameIsTheRecordedSyncObject(t *testing.T) {
	for _, tt := range []struct {
		name string
		g    *scribev1.GeneratedResources
		want string
	}{
		{"no status yet", nil, ""},
		{"no objects", &scribev1.GeneratedResources{}, ""},
		{"a Flux Kustomization", &scribev1.GeneratedResources{Objects: []scribev1.ObjectIdentity{{Kind: "Kustomization", Name: "workload-shop-web"}, {Kind: "Deployment", Name: "web-v1"}}}, "workload-shop-web"},
		{"an Argo CD Application", &scribev1.GeneratedResources{Objects: []scribev1.ObjectIdentity{{Kind: "Application", Name: "workload-shop-web"}}}, "workload-shop-web"},
		{"something else first", &scribev1.GeneratedResources{Objects: []scribev1.ObjectIdentity{{Kind: "Deployment", Name: "workload-shop-web"}}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := currentSyncName(tt.g); got != tt.want {
				t.Fatalf("currentSyncName = %q, want %q", got, tt.want)
			}
		})
	}
}
