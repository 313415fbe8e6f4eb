package render_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/render"
)

// gkeName is what GKE accepts as a cluster's name.
var gkeName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`)

// gkeCluster renders the gateway tutorial (its app target is a GKE cluster)
// as namespace/name and returns its GCPManagedControlPlane's
// spec.clusterName, its Cluster's name and the kubeconfig Secret its
// deliveries name.
func gkeCluster(t *testing.T, e *render.Engine, namespace, name string) (cloud, cluster, secret string) {
	t.Helper()
	data, err := os.ReadFile("../fixtures/valid/gateway-tutorial.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.ObjectsFromYAML(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("want one object, got %d (%v)", len(objs), err)
	}
	md := objs[0]["metadata"].(map[string]any)
	md["namespace"], md["name"] = namespace, name
	tree, err := deliveredObjects(t, e, objs[0], render.DefaultPublish())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range tree {
		switch str(o, "kind") {
		case "GCPManagedControlPlane":
			cloud = str(o, "spec", "clusterName")
		case "Cluster":
			cluster = str(o, "metadata", "name")
		case "Kustomization":
			if s := str(o, "spec", "kubeConfig", "secretRef", "name"); s != "" {
				secret = s
			}
		}
	}
	if cloud == "" || cluster == "" || secret == "" {
		t.Fatalf("%s/%s: no GKE cluster rendered (clusterName %q, Cluster %q, kubeconfig Secret %q)", namespace, name, cloud, cluster, secret)
	}
	return cloud, cluster, secret
}

// TestGKEClusterNamesAreUniquePerNamespace: the cloud-side name of an
// Experiment's GKE cluster carries its namespace (and a hash), fits GKE's
// 40 characters and naming rule, while the Cluster object and the
// kubeconfig Secret Cluster API derives from it keep <exp>-<target>.
func TestGKEClusterNamesAreUniquePerNamespace(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, namespace, experiment string
		want                        string // the cloud name, or its prefix before the hash
	}{
		{"team-a", "team-a", "gateway-tutorial", "gateway-tutorial-app-team-a-"},
		{"team-b", "team-b", "gateway-tutorial", "gateway-tutorial-app-team-b-"},
		{"cut to 31 characters before the hash", "experiments", "gateway-tutorial", "gateway-tutorial-app-experiment-"},
		{"a long name", "team-a", "a-rather-long-experiment-nam", "a-rather-long-experiment-nam-ap-"},
		{"a leading digit gets a letter", "team-a", "1st", "c1st-app-team-a-"},
		{"dots become dashes", "team-a", "gw.v2", "gw-v2-app-team-a-"},
	}
	seen := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cloud, cluster, secret := gkeCluster(t, e, tc.namespace, tc.experiment)
			if !strings.HasPrefix(cloud, tc.want) || len(cloud) != len(tc.want)+8 {
				t.Errorf("clusterName = %q, want %q and 8 hex digits", cloud, tc.want)
			}
			if !gkeName.MatchString(cloud) {
				t.Errorf("clusterName %q (%d characters) is not a GKE cluster name", cloud, len(cloud))
			}
			if want := tc.experiment + "-app"; cluster != want || secret != want+"-kubeconfig" {
				t.Errorf("Cluster %q, kubeconfig Secret %q: want %q and %q", cluster, secret, want, want+"-kubeconfig")
			}
			if other, ok := seen[cloud]; ok {
				t.Errorf("%s/%s has the cloud name of %s", tc.namespace, tc.experiment, other)
			}
			seen[cloud] = tc.namespace + "/" + tc.experiment
		})
	}
}
