package controller

import (
	"maps"
	"slices"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// A custom resource's artifact holds its directory at the paths its sync
// Kustomization applies (the repository path joined), and nothing else
// of its bundle: not its sync file, which the root applies from Git.
func TestAnArtifactHoldsTheCustomResourcesDirectoryAtItsRepositoryPaths(t *testing.T) {
	bundle := func(syncFile string) *render.Bundle {
		return &render.Bundle{
			Source:   scribev1.ObjectIdentity{Kind: "Workload", Namespace: "shop", Name: "web"},
			Dir:      "shop/workload/web",
			SyncFile: syncFile,
			Files: []render.File{
				{Path: "shop/workload/web/kustomization.yaml"},
				{Path: "shop/workload/web/deployment-web.yaml"},
				{Path: "shop/workload/web.sync.yaml"},
				{Path: "shop/workload/webshop/kustomization.yaml"},
			},
		}
	}
	for _, tc := range []struct {
		name     string
		syncFile string
		want     []string
		wantErr  bool
	}{
		{"repository root", "shop/workload/web.sync.yaml",
			[]string{"shop/workload/web/deployment-web.yaml", "shop/workload/web/kustomization.yaml"}, false},
		{"under a path", "clusters/dev/shop/workload/web.sync.yaml",
			[]string{"clusters/dev/shop/workload/web/deployment-web.yaml", "clusters/dev/shop/workload/web/kustomization.yaml"}, false},
		{"a sync file elsewhere is refused", "clusters/dev/other.sync.yaml", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := artifactFiles(bundle(tc.syncFile))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, tc.want) {
				t.Fatalf("artifact files %v, want %v", got, tc.want)
			}
		})
	}
}
