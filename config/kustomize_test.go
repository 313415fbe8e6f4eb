package config_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	namespace      = "scribe-system"
	deploymentName = "scribe-controller"
)

// clusterScoped are the kinds config/default may hold outside a namespace.
var clusterScoped = map[string]bool{
	"Namespace":                        true,
	"CustomResourceDefinition":         true,
	"ClusterRole":                      true,
	"ClusterRoleBinding":               true,
	"ValidatingAdmissionPolicy":        true,
	"ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy":          true,
	"MutatingAdmissionPolicyBinding":   true,
}

// build runs `kustomize build config/default` and returns its objects.
func build(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	abs, err := filepath.Abs("default")
	if err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	var out []*unstructured.Unstructured
	for _, r := range res.Resources() {
		// Through JSON, so numbers are int64 as client-go expects.
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// find returns the object of kind, namespace and name, decoded strictly
// into into (so a misspelt field fails), or fails the test.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, ns, name string, into any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			data, err := yaml.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(data, into); err != nil {
				t.Fatalf("%s %s/%s: %v", kind, ns, name, err)
			}
			return
		}
	}
	t.Fatalf("kustomize build config/default has no %s %s/%s", kind, ns, name)
}

func TestDefaultEveryObjectInScribeSystemOrClusterScoped(t *testing.T) {
	for _, o := range build(t) {
		id := o.GetKind() + " " + o.GetName()
		switch {
		case clusterScoped[o.GetKind()] && o.GetNamespace() != "":
			t.Errorf("%s is cluster-scoped but has namespace %q", id, o.GetNamespace())
		case !clusterScoped[o.GetKind()] && o.GetNamespace() != namespace:
			t.Errorf("%s is in namespace %q, not %s", id, o.GetNamespace(), namespace)
		}
		if o.GetKind() == "Namespace" && o.GetName() != namespace {
			t.Errorf("unexpected Namespace %s", o.GetName())
		}
	}
}

func TestDefaultIncludesEveryCRD(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	objs := build(t)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var built apiextensionsv1.CustomResourceDefinition
		find(t, objs, "CustomResourceDefinition", "", crd.Name, &built)
		if built.Spec.Group != crd.Spec.Group || len(built.Spec.Versions) != len(crd.Spec.Versions) {
			t.Errorf("CRD %s differs from %s", crd.Name, f)
		}
	}
}

func TestDefaultDeploymentIsRestricted(t *testing.T) {
	objs := build(t)
	var d appsv1.Deployment
	find(t, objs, "Deployment", namespace, deploymentName, &d)
	pod := d.Spec.Template.Spec

	psc := pod.SecurityContext
	if psc == nil {
		t.Fatal("pod has no securityContext")
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext.runAsUser = %v, want 65532 (distroless nonroot)", psc.RunAsUser)
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile is not RuntimeDefault")
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("pod shares a host namespace")
	}
	if pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken {
		t.Error("the controller needs its ServiceAccount token")
	}

	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container has no securityContext")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("container runAsNonRoot is not true")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("container is privileged")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", sc.Capabilities)
	}
	if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("container seccompProfile is not RuntimeDefault")
	}

	if c.Image != "scribe:latest" {
		t.Errorf("image = %q, want scribe:latest (make deploy IMG=… overrides it)", c.Image)
	}
	if len(c.Args) == 0 || c.Args[0] != "controller" {
		t.Errorf("args %q do not start with the controller subcommand", c.Args)
	}
	for _, want := range []string{"--leader-elect", "--metrics-bind-address=:8443", "--metrics-secure=true", "--health-probe-bind-address=:8081", "--data-dir=/var/lib/scribe", "--log-encoding=json"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "LOG_LEVEL" && e.Value == "info" }) {
		t.Error("env lacks LOG_LEVEL=info")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v lack requests or a memory limit", c.Resources)
	}
	for _, p := range []struct {
		name string
		pr   *corev1.Probe
		path string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.pr == nil || p.pr.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", p.name)
			continue
		}
		if p.pr.HTTPGet.Path != p.path || containerPort(c, p.pr.HTTPGet.Port) != 8081 {
			t.Errorf("%s probe %s on port %s, want %s on 8081", p.name, p.pr.HTTPGet.Path, p.pr.HTTPGet.Port.String(), p.path)
		}
	}

	// With a read-only root, every mount must be an emptyDir, and the data
	// directory and /tmp (known_hosts) must be mounted.
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mounted := map[string]bool{}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok || v.EmptyDir == nil {
			t.Errorf("mount %s (%s) is not an emptyDir", m.MountPath, m.Name)
		}
		mounted[m.MountPath] = true
	}
	for _, p := range []string{"/var/lib/scribe", "/tmp"} {
		if !mounted[p] {
			t.Errorf("%s is not mounted; the root filesystem is read-only", p)
		}
	}

	// The pod runs as a ServiceAccount that exists and is bound to the
	// manager role.
	if pod.ServiceAccountName != "scribe-controller" {
		t.Errorf("serviceAccountName = %q, want scribe-controller", pod.ServiceAccountName)
	}
	var sa corev1.ServiceAccount
	find(t, objs, "ServiceAccount", namespace, pod.ServiceAccountName, &sa)
	var role rbacv1.ClusterRole
	find(t, objs, "ClusterRole", "", "scribe-manager", &role)
	var binding rbacv1.ClusterRoleBinding
	find(t, objs, "ClusterRoleBinding", "", "scribe-manager", &binding)
	if binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Name ||
		!slices.ContainsFunc(binding.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa.Name && s.Namespace == namespace
		}) {
		t.Errorf("ClusterRoleBinding scribe-manager does not bind %s to ServiceAccount %s/%s: %+v", role.Name, namespace, sa.Name, binding)
	}

	// The metrics Service selects the pod and reaches the HTTPS port.
	var svc corev1.Service
	find(t, objs, "Service", namespace, "scribe-controller-metrics", &svc)
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("metrics Service selector %s=%s does not match the pod's labels %v", k, v, d.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Selector) == 0 {
		t.Error("metrics Service has no selector")
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].Name != "https" ||
		containerPort(c, svc.Spec.Ports[0].TargetPort) != 8443 {
		t.Errorf("metrics Service ports %+v, want https 8443 to the container's 8443", svc.Spec.Ports)
	}
	if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("Deployment selector %v does not match its template labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
}

// TestDefaultPipelineWorkloadPolicyExemptsTheControllersAccount: the
// admission policy that keeps Pipeline-owned Workloads the Pipeline's is
// bound (Deny) and lets through exactly the account the controller runs
// as, so the controller's own writes pass and nobody else's do.
func TestDefaultPipelineWorkloadPolicyExemptsTheControllersAccount(t *testing.T) {
	objs := build(t)
	var d appsv1.Deployment
	find(t, objs, "Deployment", namespace, deploymentName, &d)
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	find(t, objs, "ValidatingAdmissionPolicy", "", "scribe-pipeline-workloads", &policy)
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	find(t, objs, "ValidatingAdmissionPolicyBinding", "", "scribe-pipeline-workloads", &binding)
	if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v does not deny by policy %s", binding.Spec, policy.Name)
	}
	account := "'system:serviceaccount:" + namespace + ":" + d.Spec.Template.Spec.ServiceAccountName + "'"
	exempt := ""
	for _, c := range policy.Spec.MatchConditions {
		exempt += c.Expression
	}
	if !strings.Contains(exempt, account) {
		t.Errorf("the policy's match conditions %q do not exempt the controller's account %s", exempt, account)
	}
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Error("the policy does not fail closed")
	}
}

// TestDefaultFinalizerPolicyCoversWhatTheControllerReconciles: the policy
// that sets Scribe's finalizer at creation is bound to every namespace and
// object exactly when the controller watches them all (no
// --watch-namespaces, no --watch-label-selector), so no custom resource
// gets a finalizer that no controller removes; it fails open (the
// controller adds a missing finalizer itself) and sets the controller's
// finalizer.
func TestDefaultFinalizerPolicyCoversWhatTheControllerReconciles(t *testing.T) {
	objs := build(t)
	var d appsv1.Deployment
	find(t, objs, "Deployment", namespace, deploymentName, &d)
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--watch-namespaces") || strings.HasPrefix(a, "--watch-label-selector") {
			t.Fatalf("the controller runs with %s: narrow the finalizer policy's binding to it", a)
		}
	}
	var policy admissionregistrationv1.MutatingAdmissionPolicy
	find(t, objs, "MutatingAdmissionPolicy", "", "scribe-finalizer", &policy)
	var binding admissionregistrationv1.MutatingAdmissionPolicyBinding
	find(t, objs, "MutatingAdmissionPolicyBinding", "", "scribe-finalizer", &binding)
	if binding.Spec.PolicyName != policy.Name || binding.Spec.MatchResources != nil {
		t.Errorf("binding %+v: want policy %s for every namespace and object", binding.Spec, policy.Name)
	}
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionregistrationv1.Ignore {
		t.Error("the policy does not fail open")
	}
	if len(policy.Spec.Mutations) != 1 || policy.Spec.Mutations[0].JSONPatch == nil ||
		!strings.Contains(policy.Spec.Mutations[0].JSONPatch.Expression, `"scribe.dev/finalizer"`) {
		t.Errorf("the policy's mutations %+v do not add scribe.dev/finalizer", policy.Spec.Mutations)
	}
}

// TestDefaultUserRolesAggregateIntoBuiltInRoles: config/default carries
// scribe-edit and scribe-view, which the API server aggregates into the
// built-in admin, edit and view ClusterRoles, so namespace users manage
// (edit) or read (view) Scribe's four kinds; they grant nothing else.
func TestDefaultUserRolesAggregateIntoBuiltInRoles(t *testing.T) {
	resources := []string{"experiments", "pipelines", "repositories", "workloads"}
	objs := build(t)
	for _, tc := range []struct {
		role      string
		aggregate []string
		resources []string
		verbs     []string
	}{
		{"scribe-edit", []string{"admin", "edit"}, resources, []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}},
		{"scribe-view", []string{"view"}, []string{
			"experiments", "experiments/status", "pipelines", "pipelines/status",
			"repositories", "repositories/status", "workloads", "workloads/status",
		}, []string{"get", "list", "watch"}},
	} {
		t.Run(tc.role, func(t *testing.T) {
			var role rbacv1.ClusterRole
			find(t, objs, "ClusterRole", "", tc.role, &role)
			for _, a := range tc.aggregate {
				if l := "rbac.authorization.k8s.io/aggregate-to-" + a; role.Labels[l] != "true" {
					t.Errorf("labels %v lack %s=true", role.Labels, l)
				}
			}
			var granted []string
			for _, r := range role.Rules {
				if !slices.Equal(r.APIGroups, []string{"scribe.dev"}) || len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
					t.Errorf("rule %+v reaches beyond scribe.dev's resources", r)
				}
				if !slices.Equal(r.Verbs, tc.verbs) {
					t.Errorf("rule %+v: verbs %q, want %q", r, r.Verbs, tc.verbs)
				}
				granted = append(granted, r.Resources...)
			}
			slices.Sort(granted)
			if !slices.Equal(granted, tc.resources) {
				t.Errorf("resources %q, want %q", granted, tc.resources)
			}
		})
	}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); ref == "scribe-edit" || ref == "scribe-view" {
			t.Errorf("%s %s binds %s, which is only for aggregation", o.GetKind(), o.GetName(), ref)
		}
	}
}

// containerPort resolves a named or numbered port of c.
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
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

// TestDefaultPassesServerSideDryRunApply applies every object of
// config/default to a real kube-apiserver with dryRun=All, after creating
// the Namespace and the CRDs for real (a dry run stores nothing, so the
// objects that need them could not find them otherwise).
func TestDefaultPassesServerSideDryRunApply(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	objs := build(t)
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // a failed CRD install leaves the control plane running
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	// Namespace scribe-system enforces, warns and audits the "restricted"
	// Pod Security Standard; the PodSecurity admission plugin warns about a
	// Deployment whose pod template would be rejected.
	warnings := &warningRecorder{}
	cfg.WarningHandlerWithContext = warnings
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			if err := c.Create(ctx, o.DeepCopy()); err != nil {
				t.Fatalf("create Namespace %s: %v", o.GetName(), err)
			}
		case "CustomResourceDefinition":
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtimeFromUnstructured(o, crd); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, crd.DeepCopy()); err != nil {
				t.Fatalf("create CRD %s: %v", crd.Name, err)
			}
			crds = append(crds, crd)
		}
	}
	if err := envtest.WaitForCRDs(cfg, crds, envtest.CRDInstallOptions{MaxTime: time.Minute, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatalf("CRDs not established: %v", err)
	}

	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("no API for %s: %v", gvk, err)
			continue
		}
		if want := clusterScoped[o.GetKind()]; want != (m.Scope.Name() == meta.RESTScopeNameRoot) {
			t.Errorf("%s: the apiserver says scope %s; the test's clusterScoped list disagrees", gvk.Kind, m.Scope.Name())
		}
		err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.DryRunAll, client.FieldOwner("scribe-test"), client.ForceOwnership)
		if err != nil {
			t.Errorf("server-side dry-run apply of %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	if w := warnings.take(); len(w) > 0 {
		t.Errorf("the apiserver warned: %q", w)
	}
	t.Logf("%d objects accepted by the apiserver without a warning", len(objs))

	// The warnings are real: the same Deployment with a writable root and
	// privilege escalation draws a PodSecurity warning.
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		bad := o.DeepCopy()
		containers, _, _ := unstructured.NestedSlice(bad.Object, "spec", "template", "spec", "containers")
		sc := containers[0].(map[string]any)["securityContext"].(map[string]any)
		sc["allowPrivilegeEscalation"] = true
		if err := unstructured.SetNestedSlice(bad.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(bad), client.DryRunAll, client.FieldOwner("scribe-test"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		if w := warnings.take(); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "allowPrivilegeEscalation") }) {
			t.Errorf("no PodSecurity warning for allowPrivilegeEscalation=true; warnings: %q", w)
		}
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

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		return err
	}
	return yaml.UnmarshalStrict(data, into)
}
