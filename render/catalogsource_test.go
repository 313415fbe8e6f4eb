package render_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// TestCatalogComponentsAreHydrated: a component kept in the published
// catalog (type catalog) is built by Scribe itself, from the published
// catalog's files, into plain objects in the Experiment's directory
// (components/<target>/<component>/, namespaced as the entry says, params
// substituted), and delivered from Scribe's own source: a Flux
// Kustomization of the Repository's source, an Argo CD Application of the
// Repository's URL, without any per-applier param mapping. Without a
// published catalog, with a ${param} nothing sets, or with an entry path
// that leaves the catalog, the render names the component's field. A Helm
// entry needs no catalog.
func TestCatalogComponentsAreHydrated(t *testing.T) {
	const userCatalog = `package catalog
entries: {
	outside: {kind: "app", source: {type: "catalog", path: "./../outside"}, #Params: {}}
	plain: {kind: "app", source: {type: "catalog", path: "./apps/plain"}, #Params: {size?: string}}
}`
	e, err := render.New(render.WithCatalog("./team", fstest.MapFS{"entries.cue": {Data: []byte(userCatalog)}}))
	if err != nil {
		t.Fatal(err)
	}
	published := &render.CatalogSource{Kind: "OCIRepository", Namespace: "flux-system", Name: "platform-catalog", Path: "./scribe"}
	artifact := func(files map[string]string) *render.CatalogSource {
		src := *published
		fsys := fstest.MapFS{}
		for p, d := range files {
			fsys[p] = &fstest.MapFile{Data: []byte(d)}
		}
		src.Files = fsys
		return &src
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\ndata: {size: \"${size}\"}\n"
	argo := render.Publish{Path: ".", Applier: render.Applier{Kind: scribev1.ApplierArgoCD, Namespace: "argocd", Name: "scribe", SourceKind: "GitRepository", RepoURL: "https://git.example.com/fleet.git", Revision: "main"}}
	const dir = "lab/experiment/tenancy/components/hub/"
	// The Experiment lab/tenancy's suffix on every hydrated object.
	sfx := render.OwnedSuffix("lab", "tenancy")
	for _, tt := range []struct {
		name    string
		app     string
		params  map[string]any
		pub     render.Publish
		catalog *render.CatalogSource
		// want is the delivery's kind and source, as JSON; files the
		// hydrated files and a part of each; wantErr the parts of the error.
		want    string
		files   map[string]string
		wantErr []string
	}{
		{name: "flux applies the hydrated objects from scribe's source", app: "demo-services", pub: render.DefaultPublish(), catalog: published,
			want: `Kustomization ./` + dir + `demo-services {"kind":"GitRepository","name":"scribe","namespace":"flux-system"}`,
			files: map[string]string{
				dir + "demo-services/deployment-demo-http" + sfx + ".yaml": "  namespace: demo\n",
				dir + "demo-services/deployment-demo-grpc" + sfx + ".yaml": "  replicas: 1\n",
				dir + "demo-services/namespace-demo.yaml":                  "name: demo",
				dir + "demo-services/kustomization.yaml":                   "- deployment-demo-grpc" + sfx + ".yaml\n",
			}},
		{name: "argo cd applies the same objects from scribe's repository", app: "demo-services", params: map[string]any{"replicas": "3"}, pub: argo, catalog: published,
			want:  `Application ` + dir + `demo-services {"path":"` + dir + `demo-services","repoURL":"https://git.example.com/fleet.git","targetRevision":"main"}`,
			files: map[string]string{dir + "demo-services/deployment-demo-http" + sfx + ".yaml": "  replicas: 3\n"}},
		{name: "the published artifact's files are what is built", app: "plain", params: map[string]any{"size": "L"}, pub: render.DefaultPublish(),
			catalog: artifact(map[string]string{"apps/plain/kustomization.yaml": "resources: [cm.yaml]\n", "apps/plain/cm.yaml": cm}),
			want:    `Kustomization ./` + dir + `plain {"kind":"GitRepository","name":"scribe","namespace":"flux-system"}`,
			files:   map[string]string{dir + "plain/configmap-plain" + sfx + ".yaml": "size: L\nkind: ConfigMap\nmetadata:\n  labels:\n    scribe.dev/owned-by: " + sfx[1:] + "\n  name: plain" + sfx + "\n  namespace: lab\n"}},
		{name: "a param nothing sets is refused, naming it", app: "plain", pub: render.DefaultPublish(),
			catalog: artifact(map[string]string{"apps/plain/kustomization.yaml": "resources: [cm.yaml]\n", "apps/plain/cm.yaml": cm}),
			wantErr: []string{"spec.targets[0].components[0].params.size", "${size}", "ConfigMap/plain"}},
		{name: "an entry path above the catalog is refused", app: "outside", pub: render.DefaultPublish(), catalog: published,
			wantErr: []string{"spec.targets[0].components[0].app", `"outside"`, "leaves the catalog"}},
		{name: "no published catalog", app: "demo-services", pub: render.DefaultPublish(),
			wantErr: []string{"spec.targets[0].components[0].app", `"demo-services"`, "./apps/demo-services", "spec.catalog", "--catalog-source"}},
		{name: "a helm entry needs no catalog", app: "envoy-gateway", pub: render.DefaultPublish(),
			want: `HelmRelease  null`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := hubExperiment(tt.app)
			if tt.params != nil {
				comp := obj["spec"].(map[string]any)["targets"].([]any)[0].(map[string]any)["components"].([]any)[0].(map[string]any)
				comp["params"] = tt.params
			}
			b, err := e.Render(context.Background(), render.Input{Object: obj, Publish: tt.pub, Resolved: render.Resolved{Catalog: tt.catalog}})
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
			files := map[string]string{}
			for _, f := range b.Files {
				files[f.Path] = string(f.Data)
			}
			for p, part := range tt.files {
				if !strings.Contains(files[p], part) {
					t.Errorf("%s lacks %q:\n%s", p, part, files[p])
				}
			}
			var got []string
			for _, f := range b.Files {
				if strings.Contains(f.Path, "/components/") {
					if strings.Contains(string(f.Data), "${") {
						t.Errorf("%s keeps a ${...}", f.Path)
					}
					continue // the hydrated objects
				}
				objs, err := render.ObjectsFromYAML(f.Data)
				if err != nil || !strings.HasSuffix(f.Path, ".yaml") {
					continue
				}
				for _, o := range objs {
					md, _ := o["metadata"].(map[string]any)
					if md == nil {
						continue // the directory's kustomization.yaml
					}
					spec, _ := o["spec"].(map[string]any)
					switch name, _ := md["name"].(string); {
					case strings.HasPrefix(name, "experiment."):
						continue // the sync object
					case (o["kind"] == "GitRepository" || o["kind"] == "OCIRepository") && tt.app != "envoy-gateway":
						t.Errorf("rendered a source of its own: %s %s", o["kind"], name)
					case o["kind"] == "Kustomization" || o["kind"] == "HelmRelease":
						if _, ok := spec["postBuild"]; ok && tt.app != "envoy-gateway" {
							t.Errorf("%s substitutes params itself: %v", name, spec["postBuild"])
						}
						ref, _ := json.Marshal(spec["sourceRef"])
						p, _ := spec["path"].(string)
						got = append(got, o["kind"].(string)+" "+p+" "+string(ref))
					case o["kind"] == "Application":
						src, _ := json.Marshal(spec["source"])
						p, _ := spec["source"].(map[string]any)["path"].(string)
						got = append(got, "Application "+p+" "+string(src))
					}
				}
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Fatalf("deliveries %q, want %q", got, tt.want)
			}
		})
	}
}
