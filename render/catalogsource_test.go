package render_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// TestCatalogComponentsAreDeliveredFromThePublishedCatalog: a built-in
// entry kept in catalog/ (type catalog) is delivered from where the
// Repository's spec.catalog says the catalog is published: Flux reads that
// source itself (sourceRef, the path joined under spec.catalog.path);
// Argo CD fetches its URL at its revision. Without a published catalog,
// or for Argo CD without its URL, the render names the component's field
// and what to configure. A Helm entry needs no catalog.
func TestCatalogComponentsAreDeliveredFromThePublishedCatalog(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	published := &render.CatalogSource{Kind: "OCIRepository", Namespace: "flux-system", Name: "platform-catalog", Path: "./scribe",
		URL: "oci://registry.example.com/platform/catalog", Revision: "v0.3.0"}
	argo := render.Publish{Path: ".", Applier: render.Applier{Kind: scribev1.ApplierArgoCD, Namespace: "argocd", Name: "scribe", SourceKind: "GitRepository", RepoURL: "https://git.example.com/fleet.git", Revision: "main"}}
	for _, tt := range []struct {
		name    string
		app     string
		pub     render.Publish
		catalog *render.CatalogSource
		// want is the delivery's kind and source, as JSON; wantErr the
		// parts of the error.
		want    string
		wantErr []string
	}{
		{name: "flux reads the published source", app: "demo-services", pub: render.DefaultPublish(), catalog: published,
			want: `Kustomization ./scribe/apps/demo-services {"kind":"OCIRepository","name":"platform-catalog","namespace":"flux-system"}`},
		{name: "argo cd fetches its url", app: "demo-services", pub: argo, catalog: published,
			want: `Application scribe/apps/demo-services {"kustomize":{"replicas":[{"count":1,"name":"demo-http"},{"count":1,"name":"demo-grpc"}]},"path":"scribe/apps/demo-services","repoURL":"oci://registry.example.com/platform/catalog","targetRevision":"v0.3.0"}`},
		{name: "no published catalog", app: "demo-services", pub: render.DefaultPublish(),
			wantErr: []string{"spec.targets[0].components[0].app", `"demo-services"`, "./apps/demo-services", "spec.catalog", "--catalog-source"}},
		{name: "argo cd without the url", app: "demo-services", pub: argo, catalog: &render.CatalogSource{Kind: "GitRepository", Namespace: "flux-system", Name: "platform-catalog"},
			wantErr: []string{"spec.targets[0].components[0].app", "GitRepository flux-system/platform-catalog", "--catalog-source-url"}},
		{name: "a helm entry needs no catalog", app: "envoy-gateway", pub: render.DefaultPublish(),
			want: `HelmRelease  null`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := e.Render(context.Background(), render.Input{Object: hubExperiment(tt.app), Publish: tt.pub, Resolved: render.Resolved{Catalog: tt.catalog}})
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("rendered; want an error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range renderedObjects(t, b) {
				md, _ := o["metadata"].(map[string]any)
				if md == nil {
					continue // the directory's kustomization.yaml
				}
				spec, _ := o["spec"].(map[string]any)
				switch name, _ := md["name"].(string); {
				case strings.HasPrefix(name, "experiment."):
					continue // the sync object
				case (o["kind"] == "GitRepository" || o["kind"] == "OCIRepository") && tt.app == "demo-services":
					t.Errorf("rendered a source of its own: %s %s", o["kind"], name)
				case o["kind"] == "Kustomization" || o["kind"] == "HelmRelease":
					ref, _ := json.Marshal(spec["sourceRef"])
					p, _ := spec["path"].(string)
					got = append(got, o["kind"].(string)+" "+p+" "+string(ref))
				case o["kind"] == "Application":
					src, _ := json.Marshal(spec["source"])
					p, _ := spec["source"].(map[string]any)["path"].(string)
					got = append(got, "Application "+p+" "+string(src))
				}
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Fatalf("deliveries %q, want %q", got, tt.want)
			}
		})
	}
}
