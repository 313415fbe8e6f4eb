package charts_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "scribe"
	releaseName = "scribe"
	releaseNS   = "scribe-system"
)

func load(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

// render renders the chart's templates like `helm template` with values
// overriding values.yaml, and returns the objects.
func render(t *testing.T, c *chart.Chart, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: releaseNS, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(c, vals)
	if err != nil {
		t.Fatalf("render chart: %v", err)
	}
	var out []*unstructured.Unstructured
	for name, content := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(content) {
			u := &unstructured.Unstructured{}
			data, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			if string(data) == "null" {
				continue
			}
			if err := u.UnmarshalJSON(data); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			out = append(out, u)
		}
	}
	return out
}

func decode(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func byKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func TestChartLints(t *testing.T) {
	for _, values := range []map[string]any{nil, {"metrics": map[string]any{"secure": false}, "leaderElect": false, "watchNamespaces": []any{"flux-system", "apps"}, "labelSelector": "sharding.scribe.dev/key=shard1"}} {
		l := lint.AllWithKubeVersion(chartDir, values, releaseNS, nil)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint (values %v): %s", values, m)
			}
		}
	}
}

// TestChartCRDsMatchConfig fails when charts/scribe/crds differs from
// config/crd/bases: run `make chart-crds` (make manifests does).
func TestChartCRDsMatchConfig(t *testing.T) {
	want, _ := filepath.Glob(filepath.Join("..", "config", "crd", "bases", "*.yaml"))
	have, _ := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if len(want) == 0 {
		t.Fatal("no CRDs in config/crd/bases")
	}
	base := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if !slices.Equal(base(want), base(have)) {
		t.Fatalf("charts/scribe/crds has %v, config/crd/bases has %v (run make chart-crds)", base(have), base(want))
	}
	for _, p := range want {
		a, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(p)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("charts/scribe/crds/%s differs from config/crd/bases (run make chart-crds)", filepath.Base(p))
		}
	}
	if n := len(load(t).CRDObjects()); n != len(want) {
		t.Errorf("Helm sees %d CRDs in the chart, want %d", n, len(want))
	}
}

// TestChartRBACMatchesConfig: every ClusterRole of the chart has exactly
// the rules of its config/rbac counterpart, which controller/rbac_test.go
// holds to DESIGN.md's "one invariant"; the manager role is generated from
// config/rbac/role.yaml by `make chart-crds`.
func TestChartRBACMatchesConfig(t *testing.T) {
	counterpart := map[string]string{
		releaseName + "-manager":        "role.yaml",
		releaseName + "-metrics-auth":   "metrics_auth_role.yaml",
		releaseName + "-metrics-reader": "metrics_reader_role.yaml",
	}
	objs := render(t, load(t), nil)
	roles := byKind(objs, "ClusterRole")
	if len(roles) != len(counterpart) {
		t.Errorf("chart renders %d ClusterRoles, want %d", len(roles), len(counterpart))
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
		if err := yaml.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		hy, _ := yaml.Marshal(have.Rules)
		wy, _ := yaml.Marshal(want.Rules)
		if !bytes.Equal(hy, wy) {
			t.Errorf("ClusterRole %s rules differ from config/rbac/%s (run make chart-crds):\nchart:\n%s\nconfig:\n%s", o.GetName(), file, hy, wy)
		}
	}
	if len(byKind(objs, "Role")) != 0 {
		t.Error("namespaced Roles are not expected: the manager ClusterRole grants the Lease")
	}
}

func TestChartDeploymentDefaults(t *testing.T) {
	objs := render(t, load(t), nil)
	deps := byKind(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("want one Deployment, have %d", len(deps))
	}
	var d appsv1.Deployment
	decode(t, deps[0], &d)
	if d.Namespace != releaseNS {
		t.Errorf("Deployment namespace %q, want the release namespace", d.Namespace)
	}
	pod := d.Spec.Template.Spec
	psc, c := pod.SecurityContext, pod.Containers[0]
	sc := c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("no securityContext")
	}
	if !isTrue(psc.RunAsNonRoot) || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v is not restricted", psc)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !isTrue(sc.ReadOnlyRootFilesystem) ||
		!isTrue(sc.RunAsNonRoot) || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v is not restricted", sc)
	}
	if c.Image != "ghcr.io/scribe-gitops/scribe:"+load(t).Metadata.AppVersion {
		t.Errorf("image %q, want the appVersion tag", c.Image)
	}
	for _, want := range []string{"controller", "--leader-elect", "--metrics-bind-address=:8443", "--metrics-secure=true", "--health-probe-bind-address=:8081", "--data-dir=/var/lib/scribe"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "LOG_LEVEL" && e.Value == "info" }) {
		t.Error("env lacks LOG_LEVEL=info")
	}

	var sa corev1.ServiceAccount
	sas := byKind(objs, "ServiceAccount")
	if len(sas) != 1 {
		t.Fatalf("want one ServiceAccount, have %d", len(sas))
	}
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
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("metrics Service selector %s=%s does not match the pod", k, v)
		}
	}
	if svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].TargetPort.StrVal != "metrics" {
		t.Errorf("metrics Service ports %+v", svc.Spec.Ports)
	}
}

func TestChartValues(t *testing.T) {
	objs := render(t, load(t), map[string]any{
		"image":           map[string]any{"repository": "registry.example/scribe", "digest": "sha256:0123"},
		"logLevel":        "debug",
		"leaderElect":     false,
		"watchNamespaces": []any{"flux-system", "apps"},
		"labelSelector":   "sharding.scribe.dev/key=shard1",
		"metrics":         map[string]any{"secure": false},
		"serviceAccount":  map[string]any{"create": false, "name": "existing"},
	})
	var d appsv1.Deployment
	decode(t, byKind(objs, "Deployment")[0], &d)
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example/scribe@sha256:0123" {
		t.Errorf("image %q", c.Image)
	}
	for _, want := range []string{"--watch-namespaces=flux-system,apps", "--watch-label-selector=sharding.scribe.dev/key=shard1", "--metrics-secure=false"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	if slices.Contains(c.Args, "--leader-elect") {
		t.Error("leaderElect=false still passes --leader-elect")
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "LOG_LEVEL" && e.Value == "debug" }) {
		t.Error("env lacks LOG_LEVEL=debug")
	}
	if d.Spec.Template.Spec.ServiceAccountName != "existing" || len(byKind(objs, "ServiceAccount")) != 0 {
		t.Error("serviceAccount.create=false must use serviceAccount.name and create none")
	}
	for _, o := range byKind(objs, "ClusterRole") {
		if strings.Contains(o.GetName(), "metrics") {
			t.Errorf("metrics.secure=false still creates %s", o.GetName())
		}
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

// TestChartPassesServerSideDryRunApply installs the chart's CRDs into a
// real kube-apiserver (as Helm does first) and dry-run applies every
// rendered object into a namespace that enforces the "restricted" Pod
// Security Standard, failing on any warning.
func TestChartPassesServerSideDryRunApply(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(chartDir, "crds")},
		ErrorIfCRDPathMissing: true,
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: time.Minute},
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	var warnings []string
	cfg.WarningHandlerWithContext = warningFunc(func(text string) { warnings = append(warnings, text) })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds); err != nil || len(crds.Items) == 0 {
		t.Fatalf("chart CRDs not installed: %v", err)
	}
	objs := render(t, load(t), nil)
	for _, o := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.DryRunAll, client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Errorf("server-side dry-run apply of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	if len(warnings) > 0 {
		t.Errorf("the apiserver warned: %q", warnings)
	}
	t.Logf("%d rendered objects and %d CRDs accepted", len(objs), len(crds.Items))
}

type warningFunc func(text string)

func (f warningFunc) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	f(text)
}
