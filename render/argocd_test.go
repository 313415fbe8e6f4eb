package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/render"
)

// argoPublish is a Repository applied by Argo CD (namespace argocd).
func argoPublish() render.Publish {
	p := render.DefaultPublish()
	p.Path = "clusters/dev"
	p.Applier.Kind = "ArgoCD"
	p.Applier.Namespace = "argocd"
	p.Applier.Name = "scribe"
	p.Applier.RepoURL, p.Applier.Revision = "https://git.example/acme.git", "main"
	return p
}

// syncDocs renders obj and returns the documents of its sync file.
func syncDocs(t *testing.T, e *render.Engine, obj map[string]any, pub render.Publish) (*render.Bundle, []map[string]any) {
	t.Helper()
	b, err := e.Render(context.Background(), render.Input{Object: obj, Publish: pub, Resolved: testResolved})
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	for _, f := range b.Files {
		if !strings.HasSuffix(f.Path, ".sync.yaml") {
			continue
		}
		for _, d := range strings.Split(string(f.Data), "\n---\n") {
			m := map[string]any{}
			if err := yaml.Unmarshal([]byte(d), &m); err != nil {
				t.Fatal(err)
			}
			docs = append(docs, m)
		}
	}
	return b, docs
}

func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, _ := cur.(map[string]any)
		cur = mm[p]
	}
	s, _ := cur.(string)
	return s
}

// With Argo CD a custom resource's sync file holds its own AppProject, in
// Argo CD's namespace, then its Application, in the custom resource's own
// namespace ("apps in any namespace"), which uses that project. The
// project admits only Applications of that namespace, the Repository's URL
// as source, and the namespace on the hub as destination: a team cannot
// deploy into another team's namespace through Scribe.
func TestArgoCDSyncFileIsTheCustomResourcesOwnAppProjectThenItsApplication(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(fixturesDir, "valid", "workload-canary-50.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.ObjectsFromYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	ns := str(objs[0], "metadata", "namespace")
	name := str(objs[0], "metadata", "name")
	pub := argoPublish()
	b, docs := syncDocs(t, e, objs[0], pub)
	if len(docs) != 2 {
		t.Fatalf("sync file has %d documents, want the AppProject and the Application", len(docs))
	}
	proj, app := docs[0], docs[1]
	oname := "workload." + ns + "." + name
	if proj["kind"] != "AppProject" || str(proj, "metadata", "namespace") != "argocd" || str(proj, "metadata", "name") != oname {
		t.Fatalf("first document %v/%v/%v, want AppProject argocd/%s", proj["kind"], str(proj, "metadata", "namespace"), str(proj, "metadata", "name"), oname)
	}
	if app["kind"] != "Application" || str(app, "metadata", "namespace") != ns || str(app, "metadata", "name") != oname {
		t.Fatalf("second document %v %v/%v, want Application %s/%s", app["kind"], str(app, "metadata", "namespace"), str(app, "metadata", "name"), ns, oname)
	}
	if b.Sync.Kind != "Application" || b.Sync.Namespace != ns || b.SyncSource == nil || b.SyncSource.Kind != "AppProject" || b.SyncSource.Namespace != "argocd" {
		t.Fatalf("Sync %+v SyncSource %+v, want the Application and its AppProject", b.Sync, b.SyncSource)
	}
	if got := str(app, "spec", "project"); got != oname {
		t.Errorf("Application project %q, want its own %q", got, oname)
	}
	if got := str(app, "spec", "source", "repoURL"); got != pub.Applier.RepoURL {
		t.Errorf("Application repoURL %q", got)
	}
	if got := str(app, "spec", "source", "path"); got != "clusters/dev/"+ns+"/workload/"+name {
		t.Errorf("Application path %q", got)
	}
	if got, _ := app["metadata"].(map[string]any)["finalizers"].([]any); !reflect.DeepEqual(got, []any{"resources-finalizer.argocd.argoproj.io"}) {
		t.Errorf("Application finalizers %v: deleting it must delete what it applied", got)
	}
	spec := proj["spec"].(map[string]any)
	for field, want := range map[string]any{
		"sourceRepos":      []any{pub.Applier.RepoURL},
		"sourceNamespaces": []any{ns},
		"destinations":     []any{map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns}},
	} {
		if !reflect.DeepEqual(spec[field], want) {
			t.Errorf("AppProject %s = %v, want %v", field, spec[field], want)
		}
	}
	if w, ok := spec["clusterResourceWhitelist"]; ok {
		t.Errorf("AppProject allows cluster-scoped kinds: %v", w)
	}
	if got := str(proj, "metadata", "annotations", "argocd.argoproj.io/sync-wave"); got != "-1" {
		t.Errorf("AppProject sync-wave %q, want -1: created before its Application, pruned after it", got)
	}
	// Argo CD keeps a project with its finalizer until no Application
	// names it: removed from Git together, the Application's own
	// finalizer still finds its project.
	if got, _ := proj["metadata"].(map[string]any)["finalizers"].([]any); !reflect.DeepEqual(got, []any{"resources-finalizer.argocd.argoproj.io"}) {
		t.Errorf("AppProject finalizers %v: it must outlive the Application that names it", got)
	}
}

// An Experiment's component Applications live in its namespace and use
// the Experiment's own AppProject, which allows exactly their sources and
// destinations besides the Repository's: the catalog's repositories, the
// hub namespaces the catalog installs into, and each target cluster by the
// name its Argo CD registration gives it.
func TestArgoCDExperimentComponentsUseTheExperimentsAppProject(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	exp := hubExperiment("nginx-ingress", "demo-services")
	targets := exp["spec"].(map[string]any)["targets"].([]any)
	exp["spec"].(map[string]any)["targets"] = append(targets, map[string]any{
		"name": "sandbox", "cluster": map[string]any{"type": "vcluster"}, "components": []any{map[string]any{"app": "demo-services"}},
	})
	b, docs := syncDocs(t, e, exp, argoPublish())
	if len(docs) != 2 || docs[0]["kind"] != "AppProject" {
		t.Fatalf("sync file: %d documents, first %v; want the AppProject and the Application", len(docs), docs[0]["kind"])
	}
	project := str(docs[0], "metadata", "name")
	spec := docs[0]["spec"].(map[string]any)
	repos := map[string]bool{}
	for _, r := range spec["sourceRepos"].([]any) {
		repos[r.(string)] = true
	}
	dests := map[string]bool{}
	for _, d := range spec["destinations"].([]any) {
		m := d.(map[string]any)
		dests[str(m, "server")+str(m, "name")+"/"+str(m, "namespace")] = true
	}
	apps := 0
	for _, o := range renderedObjects(t, b) {
		if o["kind"] != "Application" || str(o, "metadata", "name") == b.Sync.Name {
			continue
		}
		apps++
		if ns := str(o, "metadata", "namespace"); ns != "lab" {
			t.Errorf("component Application %s in namespace %q, want the Experiment's", str(o, "metadata", "name"), ns)
		}
		if p := str(o, "spec", "project"); p != project {
			t.Errorf("component Application %s uses project %q, want the Experiment's %q", str(o, "metadata", "name"), p, project)
		}
		if u := str(o, "spec", "source", "repoURL"); !repos[u] {
			t.Errorf("the AppProject does not allow source %q of %s: %v", u, str(o, "metadata", "name"), spec["sourceRepos"])
		}
		d := str(o, "spec", "destination", "server") + str(o, "spec", "destination", "name") + "/" + str(o, "spec", "destination", "namespace")
		if !dests[d] {
			t.Errorf("the AppProject does not allow destination %q of %s: %v", d, str(o, "metadata", "name"), spec["destinations"])
		}
	}
	if apps < 3 {
		t.Fatalf("checked %d component Applications, want the two hub components and the sandbox one", apps)
	}
	for _, o := range renderedObjects(t, b) {
		if av, _ := o["apiVersion"].(string); strings.HasPrefix(av, "helm.toolkit.fluxcd.io/") || strings.HasPrefix(av, "source.toolkit.fluxcd.io/") {
			t.Errorf("Argo CD renders a Flux %s %s", o["kind"], str(o, "metadata", "name"))
		}
	}
}

// Argo CD has no postBuild substitution, and needs none for a catalog
// component: Scribe substitutes its params when it builds it, so the
// Application applies the objects Flux would (demo-services' replicas in
// its Deployments), with no kustomize section and no per-applier mapping;
// the observability config's params, which no mapping could pass, are in
// its collector's configuration.
func TestArgoCDComponentParamsAreSubstitutedByScribe(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		component map[string]any
		observe   bool
		replicas  any    // of the hydrated Deployments
		collector string // a part of the hydrated collector ConfigMap
	}{
		{name: "default replicas", component: map[string]any{"app": "demo-services"}, replicas: float64(1)},
		{name: "replicas 3", component: map[string]any{"app": "demo-services", "params": map[string]any{"replicas": "3"}}, replicas: float64(3)},
		{name: "the observability config's params", component: map[string]any{"app": "demo-services"}, observe: true, replicas: float64(1),
			collector: "X-Scope-OrgID: \"lab\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := hubExperiment()
			target := exp["spec"].(map[string]any)["targets"].([]any)[0].(map[string]any)
			target["components"] = []any{tc.component}
			if tc.observe {
				// A collector runs only on a cluster the Experiment
				// creates (the hub's own collector serves the hub).
				target["cluster"] = map[string]any{"type": "vcluster"}
				target["observability"] = map[string]any{"enabled": true}
				exp["spec"].(map[string]any)["observability"] = hubAddresses()
			}
			b, err := e.Render(context.Background(), render.Input{Object: exp, Publish: argoPublish(), Resolved: testResolved})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, o := range renderedObjects(t, b) {
				if o["kind"] != "Application" || !strings.HasSuffix(str(o, "metadata", "name"), "demo-services") {
					continue
				}
				found = true
				src := o["spec"].(map[string]any)["source"].(map[string]any)
				if k, ok := src["kustomize"]; ok {
					t.Errorf("the Application passes params itself: kustomize %v", k)
				}
			}
			if !found {
				t.Fatal("no Application for demo-services")
			}
			deployments := 0
			for _, o := range hydratedObjects(t, b, "components/hub/demo-services") {
				if o["kind"] == "Deployment" {
					deployments++
					if got := o["spec"].(map[string]any)["replicas"]; fmt.Sprint(got) != fmt.Sprint(tc.replicas) {
						t.Errorf("Deployment %s replicas %v, want %v", str(o, "metadata", "name"), got, tc.replicas)
					}
				}
			}
			if deployments != 2 {
				t.Errorf("%d hydrated Deployments, want demo-http and demo-grpc", deployments)
			}
			if tc.collector != "" {
				var config string
				for _, o := range hydratedObjects(t, b, "components/hub/observability") {
					if o["kind"] == "ConfigMap" {
						config = str(o, "data", "config.yaml")
					}
				}
				if !strings.Contains(config, tc.collector) || strings.Contains(config, "${") {
					t.Errorf("collector config lacks %q or keeps a ${...}:\n%s", tc.collector, config)
				}
			}
		})
	}
}

// Argo CD has no dependsOn: an Experiment's targets[].depends orders its
// deliveries through sync waves on the component and observability
// Applications, which the Experiment's own Application applies wave by
// wave. A target's wave is its depth in the depends graph (1 + the deepest
// target it depends on), whatever the source kind (catalog kustomize,
// Helm), the cluster (hub, vcluster) or the component kind (app, config,
// workflow). A target that depends on none is wave 0, rendered as no
// annotation: Argo CD reads a missing sync-wave as 0, and an Experiment
// without depends so renders exactly as before waves existed. The cluster
// Applications (stage 1) and the validation workflow's template delivery
// carry no wave.
func TestArgoCDDeliversTargetsInDependsOrderBySyncWave(t *testing.T) {
	// The observability wiring of a dependent target needs an
	// otel-collector Argo CD can pass params to: a Helm one.
	const userCatalog = `package catalog
entries: "otel-collector": {override: true, kind: "config", namespace: "observability", source: {type: "helm", repository: "https://charts.example.com", chart: "otel-collector", version: "1.0.0"}, #Params: {tenant: string, transport: string, endpoint: string, insecure: string}}`
	e, err := render.New(render.WithCatalog("./team", fstest.MapFS{"entries.cue": {Data: []byte(userCatalog)}}))
	if err != nil {
		t.Fatal(err)
	}
	// target is one spec.targets entry: every target gets a catalog
	// kustomize app and a Helm app; "vcluster:" names a vcluster target.
	target := func(name string, depends ...string) map[string]any {
		typ := "hub"
		if n, ok := strings.CutPrefix(name, "vcluster:"); ok {
			name, typ = n, "vcluster"
		}
		tg := map[string]any{"name": name, "cluster": map[string]any{"type": typ},
			"components": []any{map[string]any{"app": "demo-services"}, map[string]any{"app": "nginx-ingress"}}}
		if len(depends) > 0 {
			var ds []any
			for _, d := range depends {
				ds = append(ds, d)
			}
			tg["depends"] = ds
		}
		return tg
	}
	for _, tc := range []struct {
		name    string
		targets []map[string]any
		want    map[string]string // each target's sync-wave; "" for none
	}{
		{name: "no depends: no waves",
			targets: []map[string]any{target("a"), target("b")},
			want:    map[string]string{"a": "", "b": ""}},
		{name: "a chain, listed backwards",
			targets: []map[string]any{target("c", "b"), target("b", "a"), target("a")},
			want:    map[string]string{"a": "", "b": "1", "c": "2"}},
		{name: "a diamond",
			targets: []map[string]any{target("top", "left", "right"), target("left", "base"), target("vcluster:right", "base"), target("base")},
			want:    map[string]string{"base": "", "left": "1", "right": "1", "top": "2"}},
		{name: "the deepest dependency decides",
			targets: []map[string]any{target("top", "base", "mid"), target("mid", "base"), target("base"), target("alone")},
			want:    map[string]string{"base": "", "alone": "", "mid": "1", "top": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var targets []any
			for _, tg := range tc.targets {
				targets = append(targets, tg)
			}
			// The first target (the deepest but in "no depends") also
			// runs a load generator (a workflow component, delivered at
			// stage 3); the last, made a vcluster (a collector runs only
			// on a cluster the Experiment creates), ships its telemetry;
			// the Experiment has a validation workflow.
			first, last := targets[0].(map[string]any), targets[len(targets)-1].(map[string]any)
			first["components"] = append(first["components"].([]any), map[string]any{"workflow": "k6-http-loadgen", "params": map[string]any{"targetUrl": "http://demo/"}})
			last["cluster"] = map[string]any{"type": "vcluster"}
			last["observability"] = map[string]any{"enabled": true, "tenant": "lab"}
			exp := map[string]any{
				"apiVersion": "scribe.dev/v1alpha1", "kind": "Experiment",
				"metadata": map[string]any{"name": "waves", "namespace": "lab"},
				"spec":     map[string]any{"targets": targets, "workflow": map[string]any{"template": "gateway-validation"}, "observability": hubAddresses()},
			}
			pub := argoPublish()
			pub.AllowedNamespaces = []string{"observability"}
			// The team catalog's otel-collector comes from its own chart
			// repository, which the platform grants.
			pub.SourceRepos = []string{"https://charts.example.com"}
			b, err := e.Render(context.Background(), render.Input{Object: exp, Publish: pub, Resolved: testResolved})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{} // component Applications checked, per target
			deliveries := 0
			for _, o := range renderedObjects(t, b) {
				if o["kind"] != "Application" || str(o, "metadata", "name") == b.Sync.Name {
					continue
				}
				name := str(o, "metadata", "name")
				wave, annotated := "", false
				if a, ok := o["metadata"].(map[string]any)["annotations"].(map[string]any); ok {
					wave, annotated = fmt.Sprint(a["argocd.argoproj.io/sync-wave"]), a["argocd.argoproj.io/sync-wave"] != nil
				}
				comp, tg := str(o, "metadata", "labels", "scribe.dev/component"), str(o, "metadata", "labels", "scribe.dev/target")
				if comp == "" || tg == "" || comp == "gateway-validation" {
					// A vcluster's Application, or the validation
					// template's delivery.
					deliveries++
					if annotated {
						t.Errorf("Application %s: sync-wave %q, want none (it is not a target's component)", name, wave)
					}
					continue
				}
				want, ok := tc.want[tg]
				if !ok {
					t.Fatalf("Application %s of unknown target %q", name, tg)
				}
				if want == "" && annotated {
					t.Errorf("Application %s (target %s): sync-wave %q, want none (wave 0)", name, tg, wave)
				}
				if want != "" && wave != want {
					t.Errorf("Application %s (target %s): sync-wave %q, want %q", name, tg, wave, want)
				}
				got[tg]++
			}
			for tg := range tc.want {
				if got[tg] < 2 {
					t.Errorf("target %s: %d component Applications checked, want its kustomize and Helm apps", tg, got[tg])
				}
			}
			if n := got[str(first, "name")]; n != 3 {
				t.Errorf("target %s: %d Applications checked, want its two apps and the load generator's", str(first, "name"), n)
			}
			if n := got[str(last, "name")]; n != 3 {
				t.Errorf("target %s: %d Applications checked, want its two apps and the observability wiring's", str(last, "name"), n)
			}
			if deliveries == 0 {
				t.Error("no validation template delivery checked")
			}
		})
	}
}

// hubAddresses is an Experiment's spec.observability: the hub collector's
// address as targets reach it and the metrics backend Grafana reads.
func hubAddresses() map[string]any {
	return map[string]any{"endpoint": "https://otlp.hub.example.com:4317", "metricsURL": "http://mimir-query-frontend.mimir.svc:8080/prometheus"}
}

// TestVClusterExportsAReachableKubeconfigUnderBothAppliers: the vcluster
// chart gets the same values from Flux's HelmRelease and from Argo CD's
// Application: the exported kubeconfig names the vcluster Service's
// cluster DNS name, which the API server's certificate carries, so the
// kubeconfig Secret reaches the virtual cluster from the hub whichever
// applier installed it (without `server`, the chart exports localhost).
func TestVClusterExportsAReachableKubeconfigUnderBothAppliers(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for applier, pub := range map[string]render.Publish{"Flux": render.DefaultPublish(), "ArgoCD": argoPublish()} {
		exp := hubExperiment("demo-services")
		target := exp["spec"].(map[string]any)["targets"].([]any)[0].(map[string]any)
		target["cluster"] = map[string]any{"type": "vcluster"}
		b, err := e.Render(context.Background(), render.Input{Object: exp, Publish: pub, Resolved: testResolved, Stage: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range renderedObjects(t, b) {
			var v any
			switch {
			case o["kind"] == "HelmRelease":
				v = o["spec"].(map[string]any)["values"]
			case o["kind"] == "Application" && str(o, "spec", "source", "chart") == "vcluster":
				v = o["spec"].(map[string]any)["source"].(map[string]any)["helm"].(map[string]any)["valuesObject"]
			default:
				continue
			}
			j, _ := json.Marshal(v)
			values[applier] = string(j)
		}
	}
	// The release and its hub namespace are tenancy-hub-lab-<hash>
	// (#CloudName), the Service's DNS name.
	want := `{"controlPlane":{"proxy":{"extraSANs":["tenancy-hub-lab-939d75e7.tenancy-hub-lab-939d75e7.svc.cluster.local"]}},"exportKubeConfig":{"secret":{"name":"tenancy-hub-kubeconfig","namespace":"lab"},"server":"https://tenancy-hub-lab-939d75e7.tenancy-hub-lab-939d75e7.svc.cluster.local"}}`
	for _, applier := range []string{"Flux", "ArgoCD"} {
		if values[applier] != want {
			t.Errorf("%s: the vcluster chart's values %s, want %s", applier, values[applier], want)
		}
	}
}

// Two Argo CD Applications applying one Namespace take its tracking
// annotation from each other and sync forever: a hydrated component's own
// Namespace is not committed under Argo CD; its Application creates it
// (CreateNamespace=true, the component's namespace as destination). Flux,
// which has no such annotation, applies it from the component.
func TestArgoCDLeavesAHydratedComponentsNamespaceToItsApplication(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name          string
		pub           render.Publish
		wantNamespace bool
	}{
		{"Argo CD", argoPublish(), false},
		{"Flux", render.DefaultPublish(), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := e.Render(context.Background(), render.Input{Object: hubExperiment("demo-services"), Publish: tt.pub, Resolved: testResolved})
			if err != nil {
				t.Fatal(err)
			}
			var objects int
			var namespaces []string
			for _, f := range b.Files {
				if !strings.Contains(f.Path, "/components/hub/demo-services/") || path.Base(f.Path) == "kustomization.yaml" {
					continue
				}
				objects++
				m := map[string]any{}
				if err := yaml.Unmarshal(f.Data, &m); err != nil {
					t.Fatal(err)
				}
				if m["kind"] == "Namespace" {
					namespaces = append(namespaces, f.Path)
				}
			}
			if objects == 0 || (len(namespaces) > 0) != tt.wantNamespace {
				t.Fatalf("%d component objects, Namespaces %v; want a Namespace: %v", objects, namespaces, tt.wantNamespace)
			}
			if tt.wantNamespace {
				return
			}
			for _, o := range renderedObjects(t, b) {
				if o["kind"] != "Application" || !strings.HasSuffix(str(o, "metadata", "name"), "demo-services") {
					continue
				}
				opts := fmt.Sprint(o["spec"].(map[string]any)["syncPolicy"].(map[string]any)["syncOptions"])
				if ns := str(o, "spec", "destination", "namespace"); ns != "demo" || !strings.Contains(opts, "CreateNamespace=true") {
					t.Fatalf("Application %s: destination namespace %q, sync options %s; want demo, created", str(o, "metadata", "name"), ns, opts)
				}
				return
			}
			t.Fatal("no Application of demo-services")
		})
	}
}
