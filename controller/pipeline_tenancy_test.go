package controller_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// controllerAccount is the ServiceAccount config/default runs the
// controller as, which the admission policy lets through.
const controllerAccount = "system:serviceaccount:scribe-system:scribe-controller"

// tenant is a team's user with the rights config/rbac/edit_role.yaml gives
// on Scribe's kinds (the aggregated edit role), bound in the fixture's
// namespace only, as the platform binds a team: a client impersonating it.
func (f *fixture) tenant(t *testing.T) client.Client {
	t.Helper()
	data, err := os.ReadFile("../config/rbac/edit_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var edit rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &edit); err != nil {
		t.Fatal(err)
	}
	user := "tenant-of-" + f.ns
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "scribe-edit"}, Rules: edit.Rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "scribe-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := f.e.c.Create(f.ctx(), o); err != nil {
			t.Fatal(err)
		}
	}
	return f.impersonate(t, rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}})
}

func (f *fixture) impersonate(t *testing.T, as rest.ImpersonationConfig) client.Client {
	t.Helper()
	cfg := f.impersonated(as)
	c, err := client.New(cfg, client.Options{Scheme: f.e.c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fixture) impersonated(as rest.ImpersonationConfig) *rest.Config {
	cfg := rest.CopyConfig(f.e.cfg)
	cfg.Impersonate = as
	return cfg
}

// startControllerAsItsAccount runs the controller as config/default's
// ServiceAccount under config/rbac's manager ClusterRole, as it runs in a
// cluster, so the admission policy tells its writes from a tenant's.
func (f *fixture) startControllerAsItsAccount(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "scribe-system", Name: "scribe-controller"}}}
	for _, o := range []client.Object{&role, binding} {
		if err := f.e.c.Create(f.ctx(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg := f.impersonated(rest.ImpersonationConfig{UserName: controllerAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:scribe-system", "system:authenticated"}})
	startControllerCfg(t, cfg, f.ns, controller.Options{Poll: 150 * time.Millisecond, Concurrency: 2, CommitInterval: -1})
}

// bindPipelineWorkloadPolicy installs config/admission's policy as shipped
// and binds it to the fixture's namespace only (other tests share the
// API server); unbind removes the binding.
func (f *fixture) bindPipelineWorkloadPolicy(t *testing.T) (unbind func()) {
	t.Helper()
	data, err := os.ReadFile("../config/admission/pipeline_workloads.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := dec.Decode(policy); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(binding); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(policy.Spec.MatchConditions[0].Expression, "'"+controllerAccount+"'") {
		t.Fatalf("the policy does not let %s through: %s", controllerAccount, policy.Spec.MatchConditions[0].Expression)
	}
	if err := f.e.c.Create(f.ctx(), policy); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding.Name += "-" + f.ns
	binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": f.ns}}}
	if err := f.e.c.Create(f.ctx(), binding); err != nil {
		t.Fatal(err)
	}
	unbind = func() {
		if err := f.e.c.Delete(f.ctx(), binding); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	t.Cleanup(unbind)
	return unbind
}

// refusedByPolicy says err is the admission policy's refusal.
func refusedByPolicy(err error) bool {
	return err != nil && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) && strings.Contains(err.Error(), "by Scribe's controller only")
}

// tenantEdit changes the Workload name as the tenant, again on a conflict
// with the controller's writes.
func (f *fixture) tenantEdit(tenant client.Client, name string, edit func(w *scribev1.Workload), opts ...client.UpdateOption) (*scribev1.Workload, error) {
	w := &scribev1.Workload{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := tenant.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: name}, w); err != nil {
			return err
		}
		edit(w)
		return tenant.Update(f.ctx(), w, opts...)
	})
	return w, err
}

// everCommitted says text is in any file of any commit on the git server.
func (f *fixture) everCommitted(t *testing.T, text string) bool {
	t.Helper()
	out := publishtest.Git(t, "", "--git-dir", f.srv.BareDir(repoName), "log", "--all", "-p", "--format=%H")
	return strings.Contains(out, text)
}

const unverified = "registry.example/unverified:latest"

func addUnverified(w *scribev1.Workload) {
	w.Spec.Versions = append(w.Spec.Versions, scribev1.Version{Name: "v9", Image: unverified})
}

// A tenant who may edit Workloads in its namespace cannot get a change to
// the Pipeline's prod Workload committed: with config/admission's policy
// the API server refuses it; without it, the controller holds it back
// (NotWrittenByPipeline) until the Pipeline has written the Workload again,
// and a Workload taken from its Pipeline stays held back.
func TestPipelineOwnedWorkloadChangedByATenantIsNeverCommitted(t *testing.T) {
	f := newFixture(t)
	tenant := f.tenant(t)
	stages := []string{"staging", "prod"}
	f.createPipelineRepositories(t, stages, nil)
	f.startControllerAsItsAccount(t)
	f.waitRepositoriesReady(t, stages)
	if err := tenant.Create(f.ctx(), webPipeline(f.ns, []string{"v1"}, stages...)); err != nil {
		t.Fatal(err)
	}
	staging, prod := stage{f: f, name: "staging"}, stage{f: f, name: "prod"}
	staging.stableAt(t, "v1")
	prod.stableAt(t, "v1")
	p := f.waitPipeline(t, "v1 everywhere", pipelineReady)

	// With the admission policy, the API server refuses every change to
	// the prod Workload but the controller's.
	unbind := f.bindPipelineWorkloadPolicy(t)
	waitFor(t, "the policy enforced", func() (bool, string) {
		_, err := f.tenantEdit(tenant, "web-prod", addUnverified, client.DryRunAll)
		return refusedByPolicy(err), "dry run: " + errString(err)
	})
	for _, tc := range []struct {
		what string
		edit func(w *scribev1.Workload)
	}{
		{"an unverified version", addUnverified},
		{"another image for the running version", func(w *scribev1.Workload) { w.Spec.Versions[0].Image = unverified }},
		{"its owner reference removed", func(w *scribev1.Workload) { w.OwnerReferences = nil }},
		{"forged promotion evidence", func(w *scribev1.Workload) {
			w.Annotations = map[string]string{controller.PromotedVersionAnnotation: "v1", controller.PromotionEvidenceAnnotation: "forged"}
		}},
		{"its stage label", func(w *scribev1.Workload) { w.Labels[controller.StageLabel] = "dev" }},
	} {
		if _, err := f.tenantEdit(tenant, "web-prod", tc.edit); !refusedByPolicy(err) {
			t.Errorf("%s: update = %v, want the policy's refusal", tc.what, err)
		}
	}
	forged := workload(f.ns, "v1")
	forged.Name = "web-canary"
	forged.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(p, scribev1.GroupVersion.WithKind(scribev1.PipelineKind))}
	if err := tenant.Create(f.ctx(), forged); !refusedByPolicy(err) {
		t.Errorf("a Workload created as the Pipeline's: %v, want the policy's refusal", err)
	}
	// The controller's own writes pass: the tenant's new version reaches
	// the first stage's Workload.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &scribev1.Pipeline{}
		if err := tenant.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, p); err != nil {
			return err
		}
		p.Spec.Template.Versions = append(p.Spec.Template.Versions, version("v2"))
		return tenant.Update(f.ctx(), p)
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "v2 written to staging's Workload under the policy", func() (bool, string) {
		v := versionNames(f.stageWorkload(t, "staging"))
		return v == "v1,v2", v
	})

	// Without it, the tenant's change is stored, and the Pipeline writes
	// the Workload again; the controller never commits the change.
	unbind()
	var edited *scribev1.Workload
	waitFor(t, "the policy no longer enforced", func() (bool, string) {
		w, err := f.tenantEdit(tenant, "web-prod", addUnverified)
		edited = w
		return err == nil, errString(err)
	})
	waitFor(t, "the Pipeline's prod Workload written again and observed", func() (bool, string) {
		w := f.stageWorkload(t, "prod")
		ok := w.Generation > edited.Generation && versionNames(w) == "v1" && w.Status.ObservedGeneration == w.Generation
		return ok, versionNames(w) + " " + describe(w)
	})
	if f.everCommitted(t, unverified) {
		t.Fatal("the tenant's unverified image was committed")
	}

	// A Workload taken from its Pipeline (owner reference removed) and
	// changed is held back for good: Stalled, saying why.
	owners := f.stageWorkload(t, "prod").OwnerReferences
	if _, err := f.tenantEdit(tenant, "web-prod", func(w *scribev1.Workload) {
		w.OwnerReferences = nil
		w.Spec.Versions[0].Image = unverified
	}); err != nil {
		t.Fatal(err)
	}
	w := prod.drive(t, "held back as not written by its Pipeline", func(w *scribev1.Workload) bool {
		c := apimeta.FindStatusCondition(w.Status.Conditions, scribev1.StalledCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == controller.ReasonNotWrittenByPipeline
	})
	if c := apimeta.FindStatusCondition(w.Status.Conditions, scribev1.ReadyCondition); c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != controller.ReasonNotWrittenByPipeline || !strings.Contains(c.Message, "bears the name of its stage prod but is not controlled by it") {
		t.Errorf("Ready = %+v", c)
	}
	if f.everCommitted(t, unverified) {
		t.Fatal("the tenant's unverified image was committed")
	}
	f.waitPipeline(t, "the Pipeline reports the conflict", func(p *scribev1.Pipeline) bool {
		c := apimeta.FindStatusCondition(p.Status.Conditions, scribev1.StalledCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == controller.ReasonStageConflict
	})

	// Given back to its Pipeline, the Workload is written again (v1's
	// verified image) and published; the hold is released.
	if _, err := f.tenantEdit(tenant, "web-prod", func(w *scribev1.Workload) { w.OwnerReferences = owners }); err != nil {
		t.Fatal(err)
	}
	w = prod.drive(t, "written again and published", func(w *scribev1.Workload) bool {
		return w.Spec.Versions[0].Image == version("v1").Image && w.Status.ObservedGeneration == w.Generation &&
			apimeta.IsStatusConditionTrue(w.Status.Conditions, scribev1.ReadyCondition)
	})
	if c := apimeta.FindStatusCondition(w.Status.Conditions, scribev1.StalledCondition); c != nil {
		t.Errorf("still %+v", c)
	}
	if f.everCommitted(t, unverified) {
		t.Fatal("the tenant's unverified image was committed")
	}
}

// Promotion annotations a tenant writes on its own Workload are not the
// Pipeline's: its commits never say the version was promoted.
func TestStandaloneWorkloadWithForgedPromotionAnnotationsCommitsNoPromotionClaim(t *testing.T) {
	f := newFixture(t)
	tenant := f.tenant(t)
	f.startWithRepository(t)
	w := workload(f.ns, "v1")
	if err := tenant.Create(f.ctx(), w); err != nil {
		t.Fatal(err)
	}
	first := f.waitWorkload(t, "the first commit", func(w *scribev1.Workload) bool { return w.Status.Revision != "" }).Status.Revision
	f.deploymentReady(t, "web-v1", true)
	f.playFlux(t, kustomizationName("Workload", f.ns, "web"), first, true, "", "")
	f.waitWorkload(t, "v1 stable", func(w *scribev1.Workload) bool {
		return w.Status.Phase == scribev1.WorkloadHealthy && w.Status.StableVersion == "v1"
	})

	edited, err := f.tenantEdit(tenant, "web", func(w *scribev1.Workload) {
		w.Spec.Versions = append(w.Spec.Versions, version("v2"))
		w.Annotations = map[string]string{
			controller.PromotedVersionAnnotation:   "v2",
			controller.PromotionEvidenceAnnotation: "v2 was stable and healthy in stage prod-eu (trust me)",
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	step := f.waitWorkload(t, "v2's first step committed", func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.Step == 0 && w.Status.Revision != "" && w.Status.Revision != first
	})
	msg, err := f.commitMessage(t, step.Status.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, fmt.Sprintf("Scribe-Generation: %d\n", edited.Generation)) {
		t.Fatalf("commit %s is not of the tenant's change (generation %d):\n%s", step.Status.Revision, edited.Generation, msg)
	}
	for _, claim := range []string{"Promoted from the previous stage", "trust me"} {
		if strings.Contains(msg, claim) {
			t.Errorf("the commit message carries %q:\n%s", claim, msg)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}
