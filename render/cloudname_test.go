package render_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/render"
)

// The names providers accept.
var (
	// gkeName: a GKE cluster's or node pool's name (at most 40).
	gkeName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`)
	// gceName: a Compute Engine resource's name (RFC 1035, at most 63).
	gceName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// dns1035: a Service's name, which a vcluster's release names.
	dns1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// longestGCPZone is the longest zone name GCP has: Cluster API's GCP
// provider names a GCPCluster's instance groups <cluster>-apiserver-<zone>.
const longestGCPZone = "northamerica-northeast1-a"

// clusterRender is what an Experiment's targets of one cluster type render:
// its objects by kind/namespace/name and what the controller reads back.
type clusterRender struct {
	objs map[string]map[string]any
	rb   map[string]struct{ secret, key, argo string } // by target
}

// renderClusterType renders the gateway tutorial as namespace/name with its
// app target of cluster type typ and, for each name in extra, another
// target like it (no components), published by pub.
func renderClusterType(t *testing.T, e *render.Engine, pub render.Publish, namespace, name, typ string, extra ...string) clusterRender {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixturesDir, "valid", "gateway-tutorial.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.ObjectsFromYAML(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("want one object, got %d (%v)", len(objs), err)
	}
	exp := objs[0]
	md := exp["metadata"].(map[string]any)
	md["namespace"], md["name"] = namespace, name
	spec := exp["spec"].(map[string]any)
	targets := spec["targets"].([]any)
	app := targets[0].(map[string]any)
	cluster := map[string]any{"type": typ}
	if typ == "gke" || typ == "talos" {
		cluster["project"], cluster["zone"] = "scribe-experiments", "us-central1-a"
	}
	app["cluster"] = cluster
	if typ == "hub" { // its workloads export to the hub's collector
		delete(app, "observability")
	}
	for _, n := range extra {
		targets = append(targets, map[string]any{"name": n, "cluster": cluster})
	}
	spec["targets"] = targets

	b, err := e.Render(context.Background(), render.Input{Object: exp, Publish: pub, Resolved: testResolved})
	if err != nil {
		t.Fatalf("%s/%s (%s): %v", namespace, name, typ, err)
	}
	out := clusterRender{objs: bundleObjects(t, b), rb: map[string]struct{ secret, key, argo string }{}}
	for _, tr := range b.ReadBack.Targets {
		out.rb[tr.Name] = struct{ secret, key, argo string }{tr.KubeconfigSecret, tr.KubeconfigKey, tr.ArgoCDCluster}
	}
	return out
}

// ofKind is the rendered objects of kind, as "namespace/name" -> object.
func (c clusterRender) ofKind(kind string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for k, o := range c.objs {
		if str(o, "kind") == kind {
			out[strings.TrimPrefix(k, kind+"/")] = o
		}
	}
	return out
}

// one is the rendered object of kind for target, by its scribe.dev/target label.
func (c clusterRender) one(t *testing.T, kind, target string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, o := range c.ofKind(kind) {
		if str(o, "metadata", "labels", "scribe.dev/target") != target {
			continue
		}
		if found != nil {
			t.Fatalf("two %s objects of target %s", kind, target)
		}
		found = o
	}
	if found == nil {
		t.Fatalf("no %s of target %s", kind, target)
	}
	return found
}

// vcluster is the HelmRelease or Application that installs target's vcluster.
func (c clusterRender) vcluster(t *testing.T, target string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, o := range c.objs {
		chart := str(o, "spec", "chart", "spec", "chart") + str(o, "spec", "source", "chart")
		if chart == "vcluster" && str(o, "metadata", "labels", "scribe.dev/target") == target {
			if found != nil {
				t.Fatalf("two vclusters of target %s", target)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no vcluster of target %s", target)
	}
	return found
}

// cloudNames checks, for one target of the cluster type, every name that
// leaves the Experiment's namespace against the provider's rules, and
// returns them: the Kubernetes objects keep <exp>-<target>, unique in the
// namespace only.
type cloudNames func(t *testing.T, c clusterRender, exp, target string) []string

// Per cluster type, the names that reach a cloud or a provider.
var cloudNamesOf = map[string]cloudNames{
	// gke: the GKE cluster's name (its node pool's is "pool", unique in
	// the cluster); Cluster API's objects, and so its kubeconfig Secret,
	// keep <exp>-<target>. Cluster API's GCP provider creates no GCE
	// object of its own for a managed cluster.
	"gke": func(t *testing.T, c clusterRender, exp, target string) []string {
		cp := c.one(t, "GCPManagedControlPlane", target)
		name := str(cp, "spec", "clusterName")
		if !gkeName.MatchString(name) {
			t.Errorf("GKE cluster name %q (%d characters) is not a GKE cluster name", name, len(name))
		}
		pool := str(c.one(t, "GCPManagedMachinePool", target), "spec", "nodePoolName")
		if !gkeName.MatchString(pool) {
			t.Errorf("node pool name %q is not a GKE node pool name", pool)
		}
		if cl := str(c.one(t, "Cluster", target), "metadata", "name"); cl != exp+"-"+target || c.rb[target].secret != cl+"-kubeconfig" {
			t.Errorf("Cluster %q, kubeconfig Secret read back %q: want %q and its -kubeconfig", cl, c.rb[target].secret, exp+"-"+target)
		}
		return []string{"gke-cluster " + name}
	},
	// talos: Cluster API's GCP provider names the GCE objects of a
	// GCPCluster after the Cluster object, so the Cluster and the Talos
	// objects are named per namespace, and the kubeconfig Secret the
	// controller waits for is the one Cluster API writes for that Cluster.
	"talos": func(t *testing.T, c clusterRender, _, target string) []string {
		cl := str(c.one(t, "Cluster", target), "metadata", "name")
		gce := []string{
			"allow-" + cl + "-healthchecks", "allow-" + cl + "-cluster", // firewall rules
			cl + "-apiserver",                   // address, health check, backend service, forwarding rule, proxy
			cl + "-apiserver-" + longestGCPZone, // instance group
			cl + "-control-plane", cl + "-node", // network tags
			cl + "-cp-abcde", cl + "-workers-abcde-fghij", // instances (a Machine's name)
		}
		for _, n := range gce {
			if !gceName.MatchString(n) {
				t.Errorf("GCE name %q (%d characters), from Cluster %q, is not a GCE name", n, len(n), cl)
			}
		}
		for kind, want := range map[string]string{
			"GCPCluster": cl, "TalosControlPlane": cl + "-cp", "TalosConfigTemplate": cl + "-workers", "MachineDeployment": cl + "-workers",
		} {
			if got := str(c.one(t, kind, target), "metadata", "name"); got != want {
				t.Errorf("%s %q, want %q", kind, got, want)
			}
		}
		md := c.one(t, "MachineDeployment", target)
		if got := str(md, "spec", "clusterName"); got != cl {
			t.Errorf("MachineDeployment spec.clusterName %q, want %q", got, cl)
		}
		if got := c.rb[target].secret; got != cl+"-kubeconfig" {
			t.Errorf("kubeconfig Secret read back %q, want Cluster API's %q", got, cl+"-kubeconfig")
		}
		for _, k := range c.ofKind("Kustomization") {
			if str(k, "metadata", "labels", "scribe.dev/target") == target {
				if got := str(k, "spec", "kubeConfig", "secretRef", "name"); got != cl+"-kubeconfig" {
					t.Errorf("Kustomization %s reaches the cluster through %q, want %q", str(k, "metadata", "name"), got, cl+"-kubeconfig")
				}
			}
		}
		return []string{"gce " + cl}
	},
	// vcluster: the release runs in a hub namespace of its own (cluster
	// wide) named like it; the exported kubeconfig names its Service.
	"vcluster": func(t *testing.T, c clusterRender, exp, target string) []string {
		var release, ns, server, secret string
		if hr := c.vcluster(t, target); str(hr, "kind") == "HelmRelease" {
			release, ns = str(hr, "spec", "releaseName"), str(hr, "spec", "targetNamespace")
			server = str(hr, "spec", "values", "exportKubeConfig", "server")
			secret = str(hr, "spec", "values", "exportKubeConfig", "secret", "name")
		} else {
			app := hr
			release, ns = str(app, "spec", "source", "helm", "releaseName"), str(app, "spec", "destination", "namespace")
			server = str(app, "spec", "source", "helm", "valuesObject", "exportKubeConfig", "server")
			secret = str(app, "spec", "source", "helm", "valuesObject", "exportKubeConfig", "secret", "name")
		}
		if release != ns {
			t.Errorf("release %q in namespace %q: want one name", release, ns)
		}
		if !dns1035.MatchString(release) || len(release) > 53 {
			t.Errorf("release %q (%d characters): a vcluster's Service name and a Helm release name", release, len(release))
		}
		if want := "https://" + release + "." + ns + ".svc.cluster.local"; server != want {
			t.Errorf("exported kubeconfig server %q, want %q", server, want)
		}
		if want := exp + "-" + target + "-kubeconfig"; secret != want || c.rb[target].secret != want {
			t.Errorf("exported kubeconfig Secret %q, read back %q: want %q", secret, c.rb[target].secret, want)
		}
		return []string{"hub-namespace " + ns}
	},
	// hub: no cluster is created; the target's Argo CD destination is the
	// hub's own. Its deliveries' names are the Experiment's
	// (<exp>-<target>-<component>, in its namespace).
	"hub": func(t *testing.T, c clusterRender, _, target string) []string {
		for _, o := range c.objs {
			chart := str(o, "spec", "chart", "spec", "chart") + str(o, "spec", "source", "chart")
			if str(o, "metadata", "labels", "scribe.dev/target") == target && (str(o, "kind") == "Cluster" || chart == "vcluster") {
				t.Errorf("a hub target renders %s %s", str(o, "kind"), str(o, "metadata", "name"))
			}
		}
		if rb := c.rb[target]; rb.secret != "" || (rb.argo != "" && rb.argo != "in-cluster") {
			t.Errorf("a hub target reads back kubeconfig Secret %q, Argo CD cluster %q", rb.secret, rb.argo)
		}
		return nil
	},
}

// TestTargetCloudNamesAreUniquePerNamespace: for every cluster type, the
// names of a target's cluster that reach a cloud or a provider (outside
// the Experiment's namespace) differ between two Experiments of one name
// in two namespaces and between two targets, fit the provider's length
// and character rules even for the longest names the Experiment allows,
// and the kubeconfig Secret the controller waits for is the one the
// provider writes. Under both appliers.
func TestTargetCloudNamesAreUniquePerNamespace(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	longNS := strings.Repeat("n", 63)
	// The longest Experiment and target names whose objects' names
	// (<exp>-<target>-<component>-<hash> for the loadgen's Workflow,
	// <exp>-<target> for a vcluster's HelmRelease) are still label values.
	longExp := strings.Repeat("e", 63-len("-loadgen-k6-http-loadgen-")-11)
	longTarget := strings.Repeat("t", 62-len(longExp))
	rows := []struct {
		name, namespace, experiment string
		extra                       []string // more targets of the type
		prefix                      string   // the cloud name's visible part (gke, talos, vcluster), before the hash
	}{
		{"team-a", "team-a", "gateway-tutorial", []string{"edge"}, "gateway-tutorial-app-team-a"},
		{"team-b, the same Experiment name", "team-b", "gateway-tutorial", []string{"edge"}, "gateway-tutorial-app-team-b"},
		// lab-app-b-team: target app in b-team, target app-b in team.
		{"names that join alike (1)", "b-team", "lab", nil, "lab-app-b-team"},
		{"names that join alike (2)", "team", "lab", []string{"app-b"}, "lab-app-team"},
		{"the longest names", longNS, longExp, []string{longTarget}, longExp + "-app-" + longNS},
		{"a leading digit gets a letter", "team-a", "1st", nil, "c1st-app-team-a"},
		{"dots become dashes", "team-a", "gw.v2", nil, "gw-v2-app-team-a"},
	}
	maxLen := map[string]int{"gke": 40, "talos": 27, "vcluster": 40}
	for _, typ := range []string{"gke", "talos", "vcluster", "hub"} {
		for applier, pub := range map[string]render.Publish{"Flux": render.DefaultPublish(), "ArgoCD": argoPublish()} {
			t.Run(typ+"/"+applier, func(t *testing.T) {
				seen := map[string]string{}
				for _, row := range rows {
					c := renderClusterType(t, e, pub, row.namespace, row.experiment, typ, row.extra...)
					for _, target := range append([]string{"app"}, row.extra...) {
						who := fmt.Sprintf("%s: %s/%s target %s", row.name, row.namespace, row.experiment, target)
						names := cloudNamesOf[typ](t, c, row.experiment, target)
						for _, n := range names {
							if other, ok := seen[n]; ok {
								t.Errorf("%s has the name %q of %s", who, n, other)
							}
							seen[n] = who
						}
						if target != "app" || len(names) == 0 {
							continue
						}
						_, n, _ := strings.Cut(names[0], " ")
						m := maxLen[typ]
						want := row.prefix[:min(len(row.prefix), m-9)]
						want = strings.TrimRight(want, "-") + "-"
						if !strings.HasPrefix(n, want) || len(n) != len(want)+8 || len(n) > m {
							t.Errorf("%s: name %q, want %q and 8 hex digits (at most %d characters)", who, n, want, m)
						}
					}
				}
			})
		}
	}
}
