package charts_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/scribe-gitops/scribe/internal/crds/crdstest"
)

// cluster is a kube-apiserver started by envtest (no node: no pod runs).
type cluster struct {
	cfg        *rest.Config
	client     client.Client
	warnings   *warningRecorder
	kubeconfig string   // a cluster admin's, for helm
	missing    []string // the upstream projects whose CRDs were not found
}

// controlPlane starts a kube-apiserver with the upstream CRDs of those
// projects that can be found.
func controlPlane(t *testing.T, projects ...string) *cluster {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	upstream, missing := crdstest.Available(t, projects...)
	env := &envtest.Environment{
		CRDDirectoryPaths:     upstream,
		ErrorIfCRDPathMissing: true,
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: 2 * time.Minute},
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // a failed CRD install leaves the control plane running
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.AddUser(envtest.User{Name: "helm-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("add a user for helm: %v", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig for helm: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	warnings := &warningRecorder{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandlerWithContext = warnings
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return &cluster{cfg: cfg, client: c, warnings: warnings, kubeconfig: path, missing: missing}
}

// TestChartPassesServerSideApply applies what `helm template` renders,
// every option on, to a real kube-apiserver with server-side apply: the
// CRDs for real, then every other object with dryRun=All into a namespace
// that enforces the "restricted" Pod Security Standard. An invalid or
// unknown field, or any warning, fails.
func TestChartPassesServerSideApply(t *testing.T) {
	cl := controlPlane(t, "prometheus-operator")
	c, ctx := cl.client, t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	objs := render(t, allOnValues())
	if len(cl.missing) > 0 {
		t.Logf("no ServiceMonitor CRD (%v): the ServiceMonitor is not applied", cl.missing)
		objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "ServiceMonitor" })
	} else if len(byKind(objs, "ServiceMonitor")) != 1 {
		t.Fatal("every option on renders no ServiceMonitor")
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, o := range byKind(objs, "CustomResourceDefinition") {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("server-side apply of CRD %s: %v", o.GetName(), err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		decode(t, o, crd)
		crds = append(crds, crd)
	}
	if err := envtest.WaitForCRDs(cl.cfg, crds, envtest.CRDInstallOptions{MaxTime: time.Minute, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatalf("CRDs not established: %v", err)
	}
	applied := 0
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.DryRunAll, client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Errorf("server-side dry-run apply of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		applied++
	}
	if w := cl.warnings.take(); len(w) > 0 {
		t.Errorf("the apiserver warned: %q", w)
	}
	t.Logf("%d CRDs applied, %d objects accepted by a dry run", len(crds), applied)
}

// TestChartInstallUpgradeUninstall runs helm against a real kube-apiserver:
// install creates the CRDs and the aggregated roles; an upgrade to a chart
// whose Workload CRD gained a field, with changed values, updates the CRD
// and the Deployment and adds the PodDisruptionBudget; uninstall removes
// everything but the CRDs (keep policy) and the custom resources in them;
// installing again adopts the kept CRDs.
func TestChartInstallUpgradeUninstall(t *testing.T) {
	cl := controlPlane(t, "prometheus-operator")
	c, ctx := cl.client, t.Context()
	kc := "--kubeconfig=" + cl.kubeconfig
	run := func(args ...string) string {
		t.Helper()
		out, err := helm(t, append(args, kc)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	crdNames := []string{"experiments.scribe.dev", "pipelines.scribe.dev", "repositories.scribe.dev", "workloads.scribe.dev"}
	monitor := map[string]any{}
	if len(cl.missing) == 0 {
		monitor = map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}
	}

	// Install, with a Workload created in the new CRD.
	run(releaseArgs(t, "install", chartDir, monitor, "--create-namespace")...)
	for _, name := range crdNames {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			t.Fatalf("after install: CRD %s: %v", name, err)
		}
		if crd.Annotations[keepPolicy] != "keep" || crd.Annotations["meta.helm.sh/release-name"] != releaseName {
			t.Errorf("after install: CRD %s annotations %v", name, crd.Annotations)
		}
	}
	for _, name := range []string{releaseName + "-edit", releaseName + "-view", releaseName + "-manager"} {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{}); err != nil {
			t.Errorf("after install: ClusterRole %s: %v", name, err)
		}
	}
	if env := deploymentEnv(t, c); env["LOG_LEVEL"] != "info" {
		t.Errorf("after install: env %v, want LOG_LEVEL=info", env)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: releaseName}, &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
		t.Errorf("after install with one replica: PodDisruptionBudget: %v, want not found", err)
	}
	if len(cl.missing) == 0 {
		sm := &unstructured.Unstructured{}
		sm.SetAPIVersion("monitoring.coreos.com/v1")
		sm.SetKind("ServiceMonitor")
		if err := c.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: releaseName}, sm); err != nil {
			t.Errorf("after install: ServiceMonitor: %v", err)
		}
	}
	workload := fixtureWorkload(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workload.GetNamespace()}}); err != nil {
		t.Fatal(err)
	}
	// The chart's finalizer policy needs the new kind's schema, which the
	// API server's policy runtime learns every 5 s: until then a creation
	// is refused, ServiceUnavailable, as a user right after install sees.
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Create(ctx, workload.DeepCopy())
		if err == nil {
			break
		}
		if !apierrors.IsServiceUnavailable(err) || time.Now().After(deadline) {
			t.Fatalf("create Workload %s/%s in the installed CRD: %v", workload.GetNamespace(), workload.GetName(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(workload), workload); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(workload.GetFinalizers(), []string{"scribe.dev/finalizer"}) {
		t.Errorf("the Workload created after install has finalizers %v, want the chart's policy to set scribe.dev/finalizer", workload.GetFinalizers())
	}

	// Upgrade to a chart whose Workload CRD has one more field, with
	// changed values.
	changed := filepath.Join(t.TempDir(), "scribe")
	copyDir(t, chartDir, changed)
	crdFile := filepath.Join(changed, "templates", "crds", "scribe.dev_workloads.yaml")
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	const schemaProps = "\n      openAPIV3Schema:\n"
	i := strings.Index(string(data), schemaProps)
	j := strings.Index(string(data[i+1:]), "\n        properties:\n")
	if i < 0 || j < 0 {
		t.Fatal("the Workload CRD template has no openAPIV3Schema.properties at the expected indentation")
	}
	at := i + 1 + j + len("\n        properties:\n")
	added := "          upgradeProbe:\n            description: Added by the upgrade test.\n            type: string\n"
	data = append(data[:at:at], append([]byte(added), data[at:]...)...)
	if err := os.WriteFile(crdFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	up := map[string]any{"logLevel": "debug", "replicaCount": 2}
	for k, v := range monitor {
		up[k] = v
	}
	run(releaseArgs(t, "upgrade", changed, up)...)
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: "workloads.scribe.dev"}, &crd); err != nil {
		t.Fatal(err)
	}
	if _, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["upgradeProbe"]; !ok {
		t.Error("after upgrade: the Workload CRD lacks the field the new chart added: helm upgrade did not update it")
	}
	if env := deploymentEnv(t, c); env["LOG_LEVEL"] != "debug" {
		t.Errorf("after upgrade: env %v, want LOG_LEVEL=debug", env)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: releaseName}, &policyv1.PodDisruptionBudget{}); err != nil {
		t.Errorf("after upgrade to two replicas: PodDisruptionBudget: %v", err)
	}

	// Uninstall: the CRDs and the Workload stay, the rest goes.
	out := run("uninstall", releaseName, "--namespace", releaseNS, "--wait", "--timeout=2m")
	if !strings.Contains(out, "kept due to the resource policy") {
		t.Errorf("helm uninstall does not report the kept CRDs:\n%s", out)
	}
	for _, name := range crdNames {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("after uninstall: CRD %s: %v, want kept", name, err)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(workload), workload.DeepCopy()); err != nil {
		t.Errorf("after uninstall: Workload %s/%s: %v, want kept with its CRD", workload.GetNamespace(), workload.GetName(), err)
	}
	for _, o := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: releaseName}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: releaseName + "-manager"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: releaseName + "-edit"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: releaseName + "-view"}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("after uninstall: %T %s: %v, want not found", o, o.GetName(), err)
		}
	}

	// Install again: Helm adopts the CRDs the first release kept.
	run(releaseArgs(t, "install", chartDir, nil)...)
	if err := c.Get(ctx, client.ObjectKey{Name: "workloads.scribe.dev"}, &crd); err != nil {
		t.Fatal(err)
	}
	if _, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["upgradeProbe"]; ok {
		t.Error("after installing the original chart again: the Workload CRD still has the upgrade's field")
	}
}

// TestChartTakesOverCRDsOfChart01 follows the chart README's steps for a
// cluster whose CRDs chart 0.1.x installed from its crds/ directory,
// without Helm's ownership metadata: helm refuses them, and after the
// documented labels and annotations it takes them over, with the keep
// policy.
func TestChartTakesOverCRDsOfChart01(t *testing.T) {
	cl := controlPlane(t)
	c, ctx := cl.client, t.Context()
	kc := "--kubeconfig=" + cl.kubeconfig
	files, err := filepath.Glob(filepath.Join("..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeAll(data)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, objs[0]); err != nil {
			t.Fatalf("create CRD %s as chart 0.1.x did: %v", objs[0].GetName(), err)
		}
		names = append(names, objs[0].GetName())
	}

	_, err = helm(t, append(releaseArgs(t, "install", chartDir, nil, "--create-namespace"), kc)...)
	if err == nil || !strings.Contains(err.Error(), "invalid ownership metadata") {
		t.Fatalf("helm install over CRDs it does not own: %v, want invalid ownership metadata", err)
	}
	for _, name := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(crd.DeepCopy())
		metav1.SetMetaDataLabel(&crd.ObjectMeta, "app.kubernetes.io/managed-by", "Helm")
		metav1.SetMetaDataAnnotation(&crd.ObjectMeta, "meta.helm.sh/release-name", releaseName)
		metav1.SetMetaDataAnnotation(&crd.ObjectMeta, "meta.helm.sh/release-namespace", releaseNS)
		if err := c.Patch(ctx, crd, patch); err != nil {
			t.Fatalf("label and annotate CRD %s: %v", name, err)
		}
	}
	if _, err := helm(t, append(releaseArgs(t, "install", chartDir, nil, "--create-namespace"), kc)...); err != nil {
		t.Fatalf("after the README's steps: %v", err)
	}
	for _, name := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		if crd.Annotations[keepPolicy] != "keep" {
			t.Errorf("CRD %s taken over without the keep policy: %v", name, crd.Annotations)
		}
	}
}

// deploymentEnv returns the manager container's environment.
func deploymentEnv(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	var d appsv1.Deployment
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: releaseNS, Name: releaseName}, &d); err != nil {
		t.Fatalf("Deployment: %v", err)
	}
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

// fixtureWorkload returns the Workload of fixtures/valid/workload-canary-50.yaml.
func fixtureWorkload(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "fixtures", "valid", "workload-canary-50.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Workload" {
			unstructured.RemoveNestedField(o.Object, "status")
			return o
		}
	}
	t.Fatal("no Workload in fixtures/valid/workload-canary-50.yaml")
	return nil
}

// copyDir copies the regular files under src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return errors.New(p + ": not a regular file")
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s to %s: %v", src, dst, err)
	}
}

// warningRecorder keeps the apiserver's warnings.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}
