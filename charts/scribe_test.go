package charts_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const keepPolicy = "helm.sh/resource-policy"

// allOnValues turn on everything optional, for lint and the apiserver.
func allOnValues() map[string]any {
	return map[string]any{
		"replicaCount": 2,
		"logLevel":     "debug",
		"logFormat":    "console",
		"concurrent":   50,
		"metrics": map[string]any{"serviceMonitor": map[string]any{
			"enabled": true, "interval": "30s", "scrapeTimeout": "10s", "labels": map[string]any{"release": "prometheus"},
		}, "grafanaDashboard": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "Scribe"}}},
		"podDisruptionBudget": map[string]any{"enabled": true},
		"topologySpreadConstraints": []any{map[string]any{
			"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
		}},
		"watchNamespaces":   []any{"flux-system", "apps"},
		"applierNamespaces": []any{"flux-system", "tenants-flux"},
		"labelSelector":     "sharding.scribe.dev/key=shard1",
	}
}

// TestChartLints: `helm lint --strict` (schema, templates, Chart.yaml) has
// nothing to say, with the defaults and with every option on.
func TestChartLints(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
	}{
		{"defaults", nil},
		{"every option on", allOnValues()},
		{"insecure metrics, no leader election, no aggregated roles, CRDs not kept", map[string]any{
			"metrics":     map[string]any{"secure": false},
			"leaderElect": false,
			"rbac":        map[string]any{"aggregateClusterRoles": false},
			"crds":        map[string]any{"keep": false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir, "--namespace", releaseNS}
			if f := valuesFile(t, tc.values); f != "" {
				args = append(args, "-f", f)
			}
			if out, err := helm(t, args...); err != nil {
				t.Errorf("%v\n%s", err, out)
			}
		})
	}
}

// TestChartRenders: what `helm template` renders for each value that
// turns something on or off.
func TestChartRenders(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		check  func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{"defaults render the five CRDs with the keep policy and the chart's labels", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			crds := byKind(objs, "CustomResourceDefinition")
			if len(crds) != 5 {
				t.Fatalf("%d CRDs, want 5", len(crds))
			}
			for _, c := range crds {
				if c.GetAnnotations()[keepPolicy] != "keep" {
					t.Errorf("CRD %s: annotations %v lack %s: keep", c.GetName(), c.GetAnnotations(), keepPolicy)
				}
				if c.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
					t.Errorf("CRD %s: labels %v", c.GetName(), c.GetLabels())
				}
			}
		}},
		{"crds.keep=false renders the CRDs without the keep policy", map[string]any{"crds": map[string]any{"keep": false}}, func(t *testing.T, objs []*unstructured.Unstructured) {
			crds := byKind(objs, "CustomResourceDefinition")
			if len(crds) != 5 {
				t.Fatalf("%d CRDs, want 5", len(crds))
			}
			for _, c := range crds {
				if _, ok := c.GetAnnotations()[keepPolicy]; ok {
					t.Errorf("CRD %s keeps %s", c.GetName(), keepPolicy)
				}
			}
		}},
		{"podSecurity.restricted=false is the explicit opt-out: a privileged root container with a hostPath data volume renders as given", map[string]any{
			"podSecurity":     map[string]any{"restricted": false},
			"securityContext": map[string]any{"privileged": true, "runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": true},
			"dataVolume":      map[string]any{"emptyDir": nil, "hostPath": map[string]any{"path": "/var/lib/scribe"}},
		}, func(t *testing.T, objs []*unstructured.Unstructured) {
			deps := byKind(objs, "Deployment")
			if len(deps) != 1 {
				t.Fatalf("%d Deployments", len(deps))
			}
			containers, _, _ := unstructured.NestedSlice(deps[0].Object, "spec", "template", "spec", "containers")
			sc, _ := containers[0].(map[string]any)["securityContext"].(map[string]any)
			if sc["privileged"] != true {
				t.Errorf("securityContext %v, want privileged as given", sc)
			}
			volumes, _, _ := unstructured.NestedSlice(deps[0].Object, "spec", "template", "spec", "volumes")
			if data, _ := volumes[0].(map[string]any); data["hostPath"] == nil {
				t.Errorf("data volume %v, want the hostPath given", data)
			}
		}},
		{"defaults render the Pipeline-owned Workloads' admission policy, exempting the release's ServiceAccount", map[string]any{"serviceAccount": map[string]any{"name": "scribe-sa"}}, func(t *testing.T, objs []*unstructured.Unstructured) {
			policy := named(objs, "ValidatingAdmissionPolicy", releaseName+"-pipeline-workloads")
			binding := named(objs, "ValidatingAdmissionPolicyBinding", releaseName+"-pipeline-workloads")
			if policy == nil || binding == nil {
				t.Fatalf("policy %v, binding %v", policy != nil, binding != nil)
			}
			if name, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); name != policy.GetName() {
				t.Errorf("the binding binds %q, not %s", name, policy.GetName())
			}
			conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
			y, _ := yaml.Marshal(conds)
			if !strings.Contains(string(y), "system:serviceaccount:"+releaseNS+":scribe-sa") || strings.Contains(string(y), "scribe-system:scribe-controller") {
				t.Errorf("match conditions do not exempt the release's account (only):\n%s", y)
			}
		}},
		{"admissionPolicy.enabled=false renders no admission policy", map[string]any{"admissionPolicy": map[string]any{"enabled": false}}, func(t *testing.T, objs []*unstructured.Unstructured) {
			if n := len(byKind(objs, "ValidatingAdmissionPolicy")) + len(byKind(objs, "ValidatingAdmissionPolicyBinding")); n != 0 {
				t.Errorf("%d admission policy objects rendered", n)
			}
		}},
		{"crds.install=false renders no CRD", map[string]any{"crds": map[string]any{"install": false}}, func(t *testing.T, objs []*unstructured.Unstructured) {
			if n := len(byKind(objs, "CustomResourceDefinition")); n != 0 {
				t.Errorf("%d CRDs rendered", n)
			}
		}},
		{"defaults render the edit and view roles aggregated into the built-in roles", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			for name, labels := range map[string][]string{
				releaseName + "-edit": {"rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"},
				releaseName + "-view": {"rbac.authorization.k8s.io/aggregate-to-view"},
			} {
				o := named(objs, "ClusterRole", name)
				if o == nil {
					t.Errorf("no ClusterRole %s", name)
					continue
				}
				for _, l := range labels {
					if o.GetLabels()[l] != "true" {
						t.Errorf("ClusterRole %s lacks label %s=true: %v", name, l, o.GetLabels())
					}
				}
			}
		}},
		{"rbac.aggregateClusterRoles=false renders neither edit nor view", map[string]any{"rbac": map[string]any{"aggregateClusterRoles": false}}, func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, n := range []string{"-edit", "-view"} {
				if named(objs, "ClusterRole", releaseName+n) != nil {
					t.Errorf("ClusterRole %s%s rendered", releaseName, n)
				}
			}
		}},
		{"rbac.create=false renders no ClusterRole and no binding", map[string]any{"rbac": map[string]any{"create": false}}, func(t *testing.T, objs []*unstructured.Unstructured) {
			if n := len(byKind(objs, "ClusterRole")) + len(byKind(objs, "ClusterRoleBinding")); n != 0 {
				t.Errorf("%d ClusterRoles and bindings rendered", n)
			}
		}},
		{"defaults render no ServiceMonitor and no PodDisruptionBudget", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, k := range []string{"ServiceMonitor", "PodDisruptionBudget"} {
				if n := len(byKind(objs, k)); n != 0 {
					t.Errorf("%d %s rendered", n, k)
				}
			}
		}},
		{"metrics.serviceMonitor.enabled renders a ServiceMonitor scraping https with the ServiceAccount token",
			map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "interval": "30s", "labels": map[string]any{"release": "prometheus"}}}},
			func(t *testing.T, objs []*unstructured.Unstructured) {
				ep := serviceMonitorEndpoint(t, objs)
				want := map[string]any{
					"port": "https", "path": "/metrics", "scheme": "https", "interval": "30s",
					"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
					"tlsConfig":       map[string]any{"insecureSkipVerify": true},
				}
				if !reflect.DeepEqual(ep, want) {
					t.Errorf("endpoint %v, want %v", ep, want)
				}
				sm := byKind(objs, "ServiceMonitor")[0]
				if sm.GetLabels()["release"] != "prometheus" || sm.GetNamespace() != releaseNS {
					t.Errorf("ServiceMonitor %s/%s labels %v", sm.GetNamespace(), sm.GetName(), sm.GetLabels())
				}
				var svc corev1.Service
				decode(t, byKind(objs, "Service")[0], &svc)
				sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
				if !selects(sel, svc.Labels) {
					t.Errorf("ServiceMonitor selector %v does not select the metrics Service %v", sel, svc.Labels)
				}
				names, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
				if !slices.Equal(names, []string{releaseNS}) {
					t.Errorf("namespaceSelector %v", names)
				}
			}},
		{"serviceMonitor.insecureSkipVerify=false with a tlsConfig verifies the certificate",
			map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "insecureSkipVerify": false, "tlsConfig": map[string]any{"serverName": "scribe-metrics.scribe-system.svc", "insecureSkipVerify": true}}}},
			func(t *testing.T, objs []*unstructured.Unstructured) {
				tls := serviceMonitorEndpoint(t, objs)["tlsConfig"]
				if want := map[string]any{"insecureSkipVerify": false, "serverName": "scribe-metrics.scribe-system.svc"}; !reflect.DeepEqual(tls, want) {
					t.Errorf("tlsConfig %v, want %v", tls, want)
				}
			}},
		{"defaults render no Grafana dashboard", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			if cm := dashboardConfigMaps(objs); len(cm) != 0 {
				t.Errorf("%d dashboard ConfigMaps rendered", len(cm))
			}
		}},
		{"metrics.grafanaDashboard.enabled renders the chart's dashboard in a ConfigMap Grafana's sidecar loads",
			map[string]any{"metrics": map[string]any{"grafanaDashboard": map[string]any{"enabled": true, "namespace": "monitoring"}}},
			func(t *testing.T, objs []*unstructured.Unstructured) {
				cms := dashboardConfigMaps(objs)
				if len(cms) != 1 {
					t.Fatalf("%d dashboard ConfigMaps, want 1", len(cms))
				}
				cm := cms[0]
				if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetNamespace() != "monitoring" {
					t.Errorf("ConfigMap %s/%s labels %v", cm.GetNamespace(), cm.GetName(), cm.GetLabels())
				}
				got, _, _ := unstructured.NestedString(cm.Object, "data", "scribe-rollouts.json")
				want, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "scribe-rollouts.json"))
				if err != nil {
					t.Fatal(err)
				}
				if got != strings.TrimRight(string(want), "\n") {
					t.Errorf("the ConfigMap's dashboard is not dashboards/scribe-rollouts.json:\n%s", lineDiff(got, string(want)))
				}
			}},
		{"a ServiceMonitor with metrics.secure=false scrapes http without a token",
			map[string]any{"metrics": map[string]any{"secure": false, "serviceMonitor": map[string]any{"enabled": true}}},
			func(t *testing.T, objs []*unstructured.Unstructured) {
				ep := serviceMonitorEndpoint(t, objs)
				if want := map[string]any{"port": "http", "path": "/metrics", "scheme": "http"}; !reflect.DeepEqual(ep, want) {
					t.Errorf("endpoint %v, want %v", ep, want)
				}
			}},
		{"replicaCount=2 renders a PodDisruptionBudget of one unavailable pod", map[string]any{"replicaCount": 2}, func(t *testing.T, objs []*unstructured.Unstructured) {
			pdb := podDisruptionBudget(t, objs)
			if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
				t.Errorf("PDB spec %+v, want maxUnavailable 1", pdb.Spec)
			}
		}},
		{"podDisruptionBudget.enabled=true renders one with one replica, minAvailable winning", map[string]any{"podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": "50%"}}, func(t *testing.T, objs []*unstructured.Unstructured) {
			pdb := podDisruptionBudget(t, objs)
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.String() != "50%" || pdb.Spec.MaxUnavailable != nil {
				t.Errorf("PDB spec %+v, want minAvailable 50%% only", pdb.Spec)
			}
		}},
		{"podDisruptionBudget.enabled=false renders none with three replicas", map[string]any{"replicaCount": 3, "podDisruptionBudget": map[string]any{"enabled": false}}, func(t *testing.T, objs []*unstructured.Unstructured) {
			if n := len(byKind(objs, "PodDisruptionBudget")); n != 0 {
				t.Errorf("%d PodDisruptionBudgets rendered", n)
			}
		}},
		{"topologySpreadConstraints without a labelSelector select the controller's pods", map[string]any{"topologySpreadConstraints": []any{
			map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"},
			map[string]any{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": map[string]any{"matchLabels": map[string]any{"a": "b"}}},
		}}, func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			tsc := d.Spec.Template.Spec.TopologySpreadConstraints
			if len(tsc) != 2 {
				t.Fatalf("topologySpreadConstraints %+v", tsc)
			}
			if tsc[0].LabelSelector == nil || !selects(tsc[0].LabelSelector.MatchLabels, d.Spec.Template.Labels) || tsc[0].TopologyKey != "topology.kubernetes.io/zone" {
				t.Errorf("first constraint %+v does not select the pods %v", tsc[0], d.Spec.Template.Labels)
			}
			if tsc[1].LabelSelector == nil || !reflect.DeepEqual(tsc[1].LabelSelector.MatchLabels, map[string]string{"a": "b"}) {
				t.Errorf("second constraint's own labelSelector was replaced: %+v", tsc[1].LabelSelector)
			}
		}},
		{"logLevel and logFormat reach LOG_LEVEL and --log-encoding", map[string]any{"logLevel": "debug", "logFormat": "console"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			c := deployment(t, objs).Spec.Template.Spec.Containers[0]
			if !slices.Contains(c.Args, "--log-encoding=console") {
				t.Errorf("args %q lack --log-encoding=console", c.Args)
			}
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "LOG_LEVEL" && e.Value == "debug" }) {
				t.Errorf("env %v lacks LOG_LEVEL=debug", c.Env)
			}
		}},
		{"the other values reach the Deployment", map[string]any{
			"image":             map[string]any{"repository": "registry.example/scribe", "digest": "sha256:" + strings.Repeat("0123456789abcdef", 4)},
			"leaderElect":       false,
			"concurrent":        50,
			"watchNamespaces":   []any{"flux-system", "apps"},
			"applierNamespaces": []any{"flux-system", "tenants-flux"},
			"labelSelector":     "sharding.scribe.dev/key=shard1",
			"eventsAddr":        "http://notification-controller.flux-system.svc.cluster.local./",
			"testkubeAPIURL":    "http://testkube-api-server.tk.svc:8088",
			"metrics":           map[string]any{"secure": false},
			"serviceAccount":    map[string]any{"create": false, "name": "existing"},
			"resources":         nil,
		}, func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			c := d.Spec.Template.Spec.Containers[0]
			if c.Image != "registry.example/scribe@sha256:"+strings.Repeat("0123456789abcdef", 4) {
				t.Errorf("image %q", c.Image)
			}
			for _, want := range []string{"--watch-namespaces=flux-system,apps", "--applier-namespaces=flux-system,tenants-flux", "--watch-label-selector=sharding.scribe.dev/key=shard1", "--metrics-secure=false", "--concurrent=50", "--events-addr=http://notification-controller.flux-system.svc.cluster.local./", "--testkube-api-url=http://testkube-api-server.tk.svc:8088"} {
				if !slices.Contains(c.Args, want) {
					t.Errorf("args %q lack %s", c.Args, want)
				}
			}
			if slices.Contains(c.Args, "--leader-elect") {
				t.Error("leaderElect=false still passes --leader-elect")
			}
			if d.Spec.Template.Spec.ServiceAccountName != "existing" || len(byKind(objs, "ServiceAccount")) != 0 {
				t.Error("serviceAccount.create=false must use serviceAccount.name and create none")
			}
			if len(c.Resources.Limits)+len(c.Resources.Requests) != 0 {
				t.Errorf("resources=null still sets %+v", c.Resources)
			}
			for _, o := range byKind(objs, "ClusterRole") {
				if strings.Contains(o.GetName(), "metrics") {
					t.Errorf("metrics.secure=false still creates %s", o.GetName())
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, render(t, tc.values))
		})
	}
}

// TestChartSchemaRefuses: values.schema.json refuses unknown keys, at the
// top and nested, and invalid values, and Helm's error names the key.
func TestChartSchemaRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  string
		want []string
	}{
		{"a misspelt top-level key", "replicaCont=3", []string{"replicaCont"}},
		{"an unknown nested key", "metrics.serviceMonitor.enable=true", []string{"enable", "serviceMonitor"}},
		{"an unknown key in crds", "crds.upgrade=true", []string{"upgrade", "crds"}},
		{"a log level that is not one of debug, info, warn, error", "logLevel=verbose", []string{"logLevel"}},
		{"a log format that is not json or console", "logFormat=text", []string{"logFormat"}},
		{"a negative replicaCount", "replicaCount=-1", []string{"replicaCount"}},
		{"a fractional replicaCount", "replicaCount=1.5", []string{"replicaCount"}},
		{"a metrics port above 65535", "metrics.port=70000", []string{"port"}},
		{"a health probe port of 0", "healthProbePort=0", []string{"healthProbePort"}},
		{"a pull policy Kubernetes does not know", "image.pullPolicy=Sometimes", []string{"pullPolicy"}},
		{"a digest that is not sha256", "image.digest=latest", []string{"digest"}},
		{"a namespace that is not a DNS label", "watchNamespaces={Flux_System}", []string{"watchNamespaces"}},
		{"a string for a boolean", "crds.keep=maybe", []string{"keep"}},
		{"concurrent of 0", "concurrent=0", []string{"concurrent"}},
		{"an events address that is not an HTTP URL", "eventsAddr=notification-controller:80", []string{"eventsAddr"}},
		{"a Testkube API address that is not an HTTP URL", "testkubeAPIURL=testkube-api-server:8088", []string{"testkubeAPIURL"}},
		{"a PDB percentage without %", "podDisruptionBudget.minAvailable=half", []string{"minAvailable"}},
		{"a Service type Kubernetes does not know", "metrics.service.type=Ingress", []string{"type"}},
		{"an invalid scrape interval", "metrics.serviceMonitor.interval=often", []string{"interval"}},
		{"removing a value the templates need", "crds=null", []string{"crds"}},
		// The pod meets the restricted Pod Security Standard unless the
		// values say podSecurity.restricted=false.
		{"a privileged container", "securityContext.privileged=true", []string{"securityContext", "privileged"}},
		{"a container running as root", "securityContext.runAsUser=0", []string{"securityContext", "runAsUser"}},
		{"a pod running as root", "podSecurityContext.runAsUser=0", []string{"podSecurityContext", "runAsUser"}},
		{"a pod that may run as root", "podSecurityContext.runAsNonRoot=false", []string{"podSecurityContext", "runAsNonRoot"}},
		{"privilege escalation", "securityContext.allowPrivilegeEscalation=true", []string{"allowPrivilegeEscalation"}},
		{"an added capability", "securityContext.capabilities.add={SYS_ADMIN}", []string{"capabilities", "add"}},
		{"capabilities not dropping ALL", "securityContext.capabilities.drop={NET_RAW}", []string{"capabilities", "drop"}},
		{"an unconfined seccomp profile", "securityContext.seccompProfile.type=Unconfined", []string{"seccompProfile"}},
		{"an unsafe sysctl", "podSecurityContext.sysctls[0].name=kernel.msgmax", []string{"sysctls"}},
		{"a hostPath data volume", "dataVolume.hostPath.path=/var/lib/scribe", []string{"dataVolume"}},
		{"no securityContext at all", "securityContext=null", []string{"securityContext"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helm(t, templateArgs(t, chartDir, nil, "--set", tc.set)...)
			if err == nil {
				t.Fatalf("--set %s rendered", tc.set)
			}
			msg := err.Error()
			if !strings.Contains(msg, "schema") {
				t.Errorf("--set %s failed, but not on the schema:\n%s", tc.set, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("--set %s: the error does not name %q:\n%s", tc.set, w, msg)
				}
			}
		})
	}
}

// TestChartCRDsMatchConfig: the CRDs the chart renders are those of
// config/crd/bases, with only the keep policy and the chart's labels
// added. `make chart-crds` (run by make manifests) regenerates them.
func TestChartCRDsMatchConfig(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	objs := render(t, nil)
	if n := len(byKind(objs, "CustomResourceDefinition")); n != len(files) {
		t.Errorf("the chart renders %d CRDs, config/crd/bases has %d (run make chart-crds)", n, len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := decodeAll(data)
		if err != nil || len(want) != 1 {
			t.Fatalf("%s: %v", f, err)
		}
		have := named(objs, "CustomResourceDefinition", want[0].GetName())
		if have == nil {
			t.Errorf("the chart does not render CRD %s (run make chart-crds)", want[0].GetName())
			continue
		}
		have = have.DeepCopy()
		ann := have.GetAnnotations()
		delete(ann, keepPolicy)
		have.SetAnnotations(ann)
		have.SetLabels(nil)
		if !reflect.DeepEqual(have.Object, want[0].Object) {
			hy, _ := yaml.Marshal(have.Object)
			t.Errorf("CRD %s differs from %s (run make chart-crds):\n%s", have.GetName(), f, lineDiff(string(hy), string(data)))
		}
	}
}

// TestChartGeneratedFilesAreCurrent: the chart's generated templates are
// what `make chart-crds` writes from config/ now.
func TestChartGeneratedFilesAreCurrent(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(filepath.Join("..", "hack", "gen-chart.sh"), tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/gen-chart.sh: %v\n%s", err, out)
	}
	var generated []string
	err := filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(tmp, p)
			generated = append(generated, rel)
		}
		return err
	})
	if err != nil || len(generated) == 0 {
		t.Fatalf("hack/gen-chart.sh generated nothing: %v", err)
	}
	for _, rel := range generated {
		want, err := os.ReadFile(filepath.Join(tmp, rel))
		if err != nil {
			t.Fatal(err)
		}
		have, err := os.ReadFile(filepath.Join(chartDir, rel))
		if err != nil {
			t.Errorf("charts/scribe/%s: %v (run make chart-crds)", rel, err)
			continue
		}
		if !bytes.Equal(have, want) {
			t.Errorf("charts/scribe/%s is not what make chart-crds generates (run it)", rel)
		}
		if !bytes.Contains(have, []byte("do not edit")) {
			t.Errorf("charts/scribe/%s does not say it is generated", rel)
		}
	}
	// No stale CRD template of a CRD that config/ no longer has.
	crds, _ := filepath.Glob(filepath.Join(chartDir, "templates", "crds", "*"))
	for _, p := range crds {
		rel, _ := filepath.Rel(chartDir, p)
		if !slices.Contains(generated, rel) {
			t.Errorf("charts/scribe/%s is not generated from config/crd/bases (run make chart-crds)", rel)
		}
	}
}

// TestChartRBACMatchesConfig: every ClusterRole of the chart has exactly
// the rules and aggregation labels of its config/rbac counterpart, which
// controller/rbac_test.go holds to DESIGN.md's "one invariant"
// (the manager's) or to no binding (edit and view).
func TestChartRBACMatchesConfig(t *testing.T) {
	counterpart := map[string]string{
		releaseName + "-manager":        "role.yaml",
		releaseName + "-metrics-auth":   "metrics_auth_role.yaml",
		releaseName + "-metrics-reader": "metrics_reader_role.yaml",
		releaseName + "-edit":           "edit_role.yaml",
		releaseName + "-view":           "view_role.yaml",
	}
	objs := render(t, nil)
	roles := byKind(objs, "ClusterRole")
	if len(roles) != len(counterpart) {
		t.Errorf("chart renders %d ClusterRoles, want %d", len(roles), len(counterpart))
	}
	aggregation := func(labels map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range labels {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/") {
				out[k] = v
			}
		}
		return out
	}
	for _, o := range roles {
		file, ok := counterpart[o.GetName()]
		if !ok {
			t.Errorf("ClusterRole %s has no counterpart in config/rbac", o.GetName())
			continue
		}
		var have, want rbacv1.ClusterRole
		decode(t, o, &have)
		data, err := os.ReadFile(filepath.Join("..", "config", "rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, &want); err != nil {
			t.Fatal(err)
		}
		hy, _ := yaml.Marshal(have.Rules)
		wy, _ := yaml.Marshal(want.Rules)
		if !bytes.Equal(hy, wy) {
			t.Errorf("ClusterRole %s rules differ from config/rbac/%s (run make chart-crds):\nchart:\n%s\nconfig:\n%s", o.GetName(), file, hy, wy)
		}
		if h, w := aggregation(have.Labels), aggregation(want.Labels); !reflect.DeepEqual(h, w) {
			t.Errorf("ClusterRole %s aggregation labels %v, config/rbac/%s has %v", o.GetName(), h, file, w)
		}
	}
	if len(byKind(objs, "Role")) != 0 {
		t.Error("namespaced Roles are not expected: the manager ClusterRole grants the Lease")
	}
	for _, o := range byKind(objs, "ClusterRoleBinding") {
		var b rbacv1.ClusterRoleBinding
		decode(t, o, &b)
		if b.RoleRef.Name == releaseName+"-edit" || b.RoleRef.Name == releaseName+"-view" {
			t.Errorf("ClusterRoleBinding %s binds %s, which is only for aggregation", b.Name, b.RoleRef.Name)
		}
	}
}

// TestChartDeploymentMatchesConfigDefault: with the defaults, the manager
// Deployment the chart renders runs the controller as config/default's does
// (kustomize build, as `go run ./hack/kbuild config/default`): the same
// arguments, environment, ports, probes, security contexts, volumes and
// resources.
func TestChartDeploymentMatchesConfigDefault(t *testing.T) {
	chart := deployment(t, render(t, nil))
	config := configDeployment(t)
	chartPod, configPod := chart.Spec.Template.Spec, config.Spec.Template.Spec
	cc, kc := chartPod.Containers[0], configPod.Containers[0]
	for _, tc := range []struct {
		what          string
		chart, config any
	}{
		{"container name", cc.Name, kc.Name},
		{"args", cc.Args, kc.Args},
		{"env", cc.Env, kc.Env},
		{"ports", cc.Ports, kc.Ports},
		{"liveness probe", cc.LivenessProbe, kc.LivenessProbe},
		{"readiness probe", cc.ReadinessProbe, kc.ReadinessProbe},
		{"container securityContext", cc.SecurityContext, kc.SecurityContext},
		{"pod securityContext", chartPod.SecurityContext, configPod.SecurityContext},
		{"volumes", chartPod.Volumes, configPod.Volumes},
		{"volume mounts", cc.VolumeMounts, kc.VolumeMounts},
		{"resources", cc.Resources, kc.Resources},
		{"image pull policy", cc.ImagePullPolicy, kc.ImagePullPolicy},
		{"termination grace period", chartPod.TerminationGracePeriodSeconds, configPod.TerminationGracePeriodSeconds},
		{"replicas", chart.Spec.Replicas, config.Spec.Replicas},
		{"default-container annotation", chart.Spec.Template.Annotations, config.Spec.Template.Annotations},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if !reflect.DeepEqual(tc.chart, tc.config) {
				cy, _ := yaml.Marshal(tc.chart)
				ky, _ := yaml.Marshal(tc.config)
				t.Errorf("chart and config/default differ:\nchart:\n%s\nconfig/default:\n%s", cy, ky)
			}
		})
	}
}

// TestChartDeploymentWiring: the rendered objects refer to each other: the
// pod runs as the ServiceAccount bound to the manager role, the metrics
// Service selects the pod and reaches its metrics port.
func TestChartDeploymentWiring(t *testing.T) {
	objs := render(t, nil)
	d := deployment(t, objs)
	if d.Namespace != releaseNS {
		t.Errorf("Deployment namespace %q, want the release namespace", d.Namespace)
	}
	pod := d.Spec.Template.Spec
	if c := pod.Containers[0]; c.Image != "ghcr.io/scribe-gitops/scribe:"+chartAppVersion(t) {
		t.Errorf("image %q, want the appVersion tag", c.Image)
	}
	if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("Deployment selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	sas := byKind(objs, "ServiceAccount")
	if len(sas) != 1 {
		t.Fatalf("want one ServiceAccount, have %d", len(sas))
	}
	var sa corev1.ServiceAccount
	decode(t, sas[0], &sa)
	if pod.ServiceAccountName != sa.Name {
		t.Errorf("pod runs as %q, the chart creates %q", pod.ServiceAccountName, sa.Name)
	}
	bound := false
	for _, o := range byKind(objs, "ClusterRoleBinding") {
		var b rbacv1.ClusterRoleBinding
		decode(t, o, &b)
		if b.RoleRef.Name == releaseName+"-manager" && slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa.Name && s.Namespace == releaseNS
		}) {
			bound = true
		}
	}
	if !bound {
		t.Error("no ClusterRoleBinding binds the manager role to the ServiceAccount")
	}
	svcs := byKind(objs, "Service")
	if len(svcs) != 1 {
		t.Fatalf("want one metrics Service, have %d", len(svcs))
	}
	var svc corev1.Service
	decode(t, svcs[0], &svc)
	if !selects(svc.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("metrics Service selector %v does not select the pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	p := svc.Spec.Ports[0]
	if p.Port != 8443 || p.Name != "https" || !slices.ContainsFunc(pod.Containers[0].Ports, func(cp corev1.ContainerPort) bool {
		return cp.Name == p.TargetPort.StrVal && cp.ContainerPort == 8443
	}) {
		t.Errorf("metrics Service ports %+v do not reach the container's 8443", svc.Spec.Ports)
	}
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	deps := byKind(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("want one Deployment, have %d", len(deps))
	}
	var d appsv1.Deployment
	decode(t, deps[0], &d)
	return &d
}

// configDeployment builds config/default with kustomize (the API
// hack/kbuild runs) and returns its Deployment.
func configDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	data, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(data)
	if err != nil {
		t.Fatal(err)
	}
	return deployment(t, objs)
}

func podDisruptionBudget(t *testing.T, objs []*unstructured.Unstructured) *policyv1.PodDisruptionBudget {
	t.Helper()
	pdbs := byKind(objs, "PodDisruptionBudget")
	if len(pdbs) != 1 {
		t.Fatalf("want one PodDisruptionBudget, have %d", len(pdbs))
	}
	var pdb policyv1.PodDisruptionBudget
	decode(t, pdbs[0], &pdb)
	d := deployment(t, objs)
	if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("PDB selector %v does not select the pods %v", pdb.Spec.Selector, d.Spec.Template.Labels)
	}
	if pdb.Namespace != releaseNS {
		t.Errorf("PDB in namespace %q", pdb.Namespace)
	}
	return &pdb
}

// dashboardConfigMaps are the ConfigMaps that carry a Grafana dashboard.
func dashboardConfigMaps(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, cm := range byKind(objs, "ConfigMap") {
		if _, ok := cm.GetLabels()["grafana_dashboard"]; ok {
			out = append(out, cm)
		}
	}
	return out
}

// serviceMonitorEndpoint returns the only endpoint of the only
// ServiceMonitor.
func serviceMonitorEndpoint(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	sms := byKind(objs, "ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("want one ServiceMonitor, have %d", len(sms))
	}
	if sms[0].GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("ServiceMonitor apiVersion %s", sms[0].GetAPIVersion())
	}
	eps, _, _ := unstructured.NestedSlice(sms[0].Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("endpoints %v", eps)
	}
	return eps[0].(map[string]any)
}

func chartAppVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c.AppVersion
}

func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// lineDiff lists the lines of a missing from b and of b missing from a,
// enough to find a drift.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "- "+l)
		}
	}
	if len(out) > 40 {
		out = append(out[:40], "…")
	}
	return strings.Join(out, "\n")
}
