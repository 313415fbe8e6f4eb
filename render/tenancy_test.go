package render_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/scribe-gitops/scribe/render"
)

// hubExperiment is an Experiment in namespace lab with one hub target
// installing the apps.
func hubExperiment(apps ...string) map[string]any {
	comps := []any{}
	for _, a := range apps {
		comps = append(comps, map[string]any{"app": a})
	}
	return map[string]any{
		"apiVersion": "scribe.dev/v1alpha1", "kind": "Experiment",
		"metadata": map[string]any{"name": "tenancy", "namespace": "lab"},
		"spec": map[string]any{"targets": []any{map[string]any{
			"name": "hub", "cluster": map[string]any{"type": "hub"}, "components": comps,
		}}},
	}
}

// renderedObjects decodes every object of a bundle, the sync file's too,
// but the hydrated catalog components' (in subdirectories of the bundle's
// directory, applied by their deliveries: see hydratedObjects).
func renderedObjects(t *testing.T, b *render.Bundle) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, f := range b.Files {
		rel, inDir := strings.CutPrefix(f.Path, b.Dir+"/")
		if !strings.HasSuffix(f.Path, ".yaml") || inDir && strings.Contains(rel, "/") {
			continue
		}
		objs, err := render.ObjectsFromYAML(f.Data)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		out = append(out, objs...)
	}
	return out
}

// hydratedObjects decodes the objects of the hydrated catalog component
// in dir (relative to the bundle's directory: components/<target>/<name>).
func hydratedObjects(t *testing.T, b *render.Bundle, dir string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, f := range b.Files {
		if !strings.HasPrefix(f.Path, b.Dir+"/"+dir+"/") || strings.HasSuffix(f.Path, "/kustomization.yaml") {
			continue
		}
		objs, err := render.ObjectsFromYAML(f.Data)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		out = append(out, objs...)
	}
	return out
}

// fluxApplier reports whether o is a Flux Kustomization or HelmRelease.
func fluxApplier(o map[string]any) bool {
	av, _ := o["apiVersion"].(string)
	return strings.HasPrefix(av, "kustomize.toolkit.fluxcd.io/") || strings.HasPrefix(av, "helm.toolkit.fluxcd.io/")
}

// TestUserCatalogOverride: a user catalog entry that replaces a built-in
// entry, or one of an earlier user catalog, must say override: true;
// without it loading fails naming the entry, its file and what it shadows.
func TestUserCatalogOverride(t *testing.T) {
	const nginx = `kind: "app", namespace: "ingress-nginx", source: {type: "helm", repository: "https://charts.example.com", chart: "ingress-nginx", version: "9.9.9"}, #Params: {}`
	for _, tt := range []struct {
		name     string
		catalogs []string // sources of entries.cue, in WithCatalog order
		want     []string // substrings of the error; none means it loads
	}{
		{name: "a new entry needs no override",
			catalogs: []string{`package catalog
entries: "team-cache": {kind: "app", source: {type: "oci", url: "oci://registry.example.com/cache", tag: "1"}, #Params: {}}`}},
		{name: "replacing a built-in entry without override fails",
			catalogs: []string{"package catalog\nentries: \"nginx-ingress\": {" + nginx + "}"},
			want:     []string{`entry "nginx-ingress"`, "./c0/entries.cue", "built-in catalog", "override: true"}},
		{name: "replacing a built-in entry with override: true loads",
			catalogs: []string{"package catalog\nentries: \"nginx-ingress\": {override: true, " + nginx + "}"}},
		{name: "override: false is no override",
			catalogs: []string{"package catalog\nentries: \"nginx-ingress\": {override: false, " + nginx + "}"},
			want:     []string{`entry "nginx-ingress"`, "override: true"}},
		{name: "replacing an earlier user catalog's entry without override fails",
			catalogs: []string{
				"package catalog\nentries: \"team-cache\": {kind: \"app\", source: {type: \"oci\", url: \"oci://registry.example.com/cache\", tag: \"1\"}, #Params: {}}",
				"package catalog\nentries: \"team-cache\": {kind: \"app\", source: {type: \"oci\", url: \"oci://registry.example.com/other\", tag: \"2\"}, #Params: {}}",
			},
			want: []string{`entry "team-cache"`, "./c1/entries.cue", "catalog ./c0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var opts []render.Option
			for i, src := range tt.catalogs {
				opts = append(opts, render.WithCatalog("./c"+string(rune('0'+i)), fstest.MapFS{"entries.cue": {Data: []byte(src)}}))
			}
			_, err := render.New(opts...)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestComponentNamespaces: a component installs into its Experiment's
// namespace unless its catalog entry names one; a built-in entry keeps its
// own, a user catalog's entry (or an override of a built-in one) may name
// only a namespace the Repository allows (Publish.AllowedNamespaces). A
// refusal names the component's field, the namespace and the field to
// change.
func TestComponentNamespaces(t *testing.T) {
	const userCatalog = `package catalog
entries: {
	"team-cache": {kind: "app", source: {type: "oci", url: "oci://registry.example.com/cache", tag: "1"}, #Params: {}}
	"in-lab": {kind: "app", namespace: "lab", source: {type: "oci", url: "oci://registry.example.com/lab", tag: "1"}, #Params: {}}
	"cluster-admin": {kind: "app", namespace: "kube-system", source: {type: "oci", url: "oci://registry.example.com/evil", tag: "1"}, #Params: {}}
	"nginx-ingress": {override: true, kind: "app", namespace: "ingress-nginx", source: {type: "helm", repository: "https://charts.example.com", chart: "ingress-nginx", version: "9.9.9"}, #Params: {}}
}`
	e, err := render.New(render.WithCatalog("./team", fstest.MapFS{"entries.cue": {Data: []byte(userCatalog)}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		app     string
		allowed []string
		// wantNS is the namespace the delivery targets; "" means refused.
		wantNS string
	}{
		{name: "a built-in entry keeps its own namespace", app: "envoy-gateway", wantNS: "envoy-gateway-system"},
		{name: "an entry without namespace installs into the Experiment's", app: "team-cache", wantNS: "lab"},
		{name: "an entry naming the Experiment's namespace is allowed", app: "in-lab", wantNS: "lab"},
		{name: "kube-system is refused", app: "cluster-admin"},
		{name: "kube-system listed by the Repository is allowed", app: "cluster-admin", allowed: []string{"kube-system"}, wantNS: "kube-system"},
		{name: "an override of a built-in entry is a user entry", app: "nginx-ingress"},
		{name: "an allowed override keeps its namespace", app: "nginx-ingress", allowed: []string{"ingress-nginx"}, wantNS: "ingress-nginx"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pub := render.DefaultPublish()
			pub.AllowedNamespaces = tt.allowed
			b, err := e.Render(context.Background(), render.Input{Object: hubExperiment(tt.app), Publish: pub, Resolved: testResolved})
			if tt.wantNS == "" {
				var ie *render.InputError
				if !errors.As(err, &ie) {
					t.Fatalf("got %v, want an InputError", err)
				}
				for _, w := range []string{"spec.targets[0].components[0].app", tt.app, "spec.allowedNamespaces", "catalog ./team"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, o := range renderedObjects(t, b) {
				kind := o["kind"]
				if !fluxApplier(o) || strings.HasPrefix(o["metadata"].(map[string]any)["name"].(string), "experiment.") {
					continue // not the delivery (the sync Kustomization)
				}
				found = true
				if got, _ := o["spec"].(map[string]any)["targetNamespace"].(string); got != tt.wantNS {
					t.Errorf("%s targetNamespace %q, want %q", kind, got, tt.wantNS)
				}
			}
			if !found {
				t.Fatal("no delivery rendered")
			}
		})
	}
}

// TestServiceAccountName: with Publish.Applier.ServiceAccountName (the
// Repository's spec.applier.serviceAccountName) every Flux Kustomization and
// HelmRelease applied on the hub carries it: the sync Kustomization, hub
// deliveries, the vcluster HelmRelease. Deliveries into a target cluster
// apply with its kubeconfig and do not (Flux would impersonate the account
// there). Without it, or with Argo CD, none does.
func TestServiceAccountName(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	exp := hubExperiment("nginx-ingress", "demo-services")
	targets := exp["spec"].(map[string]any)["targets"].([]any)
	exp["spec"].(map[string]any)["targets"] = append(targets, map[string]any{
		"name": "sandbox", "cluster": map[string]any{"type": "vcluster"}, "components": []any{map[string]any{"app": "demo-services"}},
	})
	data, err := os.ReadFile("../fixtures/valid/workload-canary-50.yaml")
	if err != nil {
		t.Fatal(err)
	}
	workloads, err := render.ObjectsFromYAML(data)
	if err != nil || len(workloads) != 1 {
		t.Fatalf("workload fixture: %d objects, %v", len(workloads), err)
	}
	workload := workloads[0]
	for _, tt := range []struct {
		name    string
		sa      string
		applier string
	}{
		{name: "Flux with a service account", sa: "tenant", applier: "Flux"},
		{name: "Flux without one", applier: "Flux"},
		{name: "Argo CD ignores it", sa: "tenant", applier: "ArgoCD"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pub := render.DefaultPublish()
			pub.Applier.ServiceAccountName = tt.sa
			if tt.applier == "ArgoCD" {
				pub.Applier.Kind, pub.Applier.Namespace, pub.Applier.RepoURL = "ArgoCD", "argocd", "https://git.example.com/gitops"
				pub.Applier.ServiceAccountName = "" // the resolver drops it for Argo CD
			}
			var hub, remote int
			for _, obj := range []map[string]any{exp, workload} {
				b, err := e.Render(context.Background(), render.Input{Object: obj, Publish: pub, Resolved: testResolved})
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range renderedObjects(t, b) {
					if !fluxApplier(o) {
						continue
					}
					spec := o["spec"].(map[string]any)
					name := o["metadata"].(map[string]any)["name"]
					got, _ := spec["serviceAccountName"].(string)
					if _, onTarget := spec["kubeConfig"]; onTarget {
						remote++
						if got != "" {
							t.Errorf("%s %s applies into a target cluster as %q", o["kind"], name, got)
						}
						continue
					}
					hub++
					if got != pub.Applier.ServiceAccountName {
						t.Errorf("%s %s serviceAccountName %q, want %q", o["kind"], name, got, pub.Applier.ServiceAccountName)
					}
				}
			}
			if tt.applier == "Flux" && (hub < 5 || remote < 1) {
				t.Errorf("checked %d hub and %d target-cluster Flux objects; want the sync Kustomizations, hub deliveries, the vcluster HelmRelease and a target delivery", hub, remote)
			}
		})
	}
}
