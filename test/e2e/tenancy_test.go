package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// TestLoopLockedDownFluxAppliesATenantsBundleOnlyInItsNamespace runs the
// real Flux in its multi-tenancy lockdown (--no-cross-namespace-refs, a
// default service account without rights) with the platform's
// TenantPolicy naming the tenant's applier account, which may write in
// the tenant's namespace only. The tenant's Workload is applied and
// healthy through that account; an object outside the namespace slipped
// into the tenant's directory (as a commit to its path would) is refused
// by Flux, which reports the account's lack of rights, and never created.
func TestLoopLockedDownFluxAppliesATenantsBundleOnlyInItsNamespace(t *testing.T) {
	t.Parallel()
	skipWithoutLoop(t)
	skipUnlessApplier(t, scribev1.ApplierFlux)
	const ns, account = "tenant", "tenant-applier"
	s := StartOpts(t, StackOptions{Applier: scribev1.ApplierFlux, FluxLockdown: true})
	ctx := context.Background()
	newNamespaceAndRepository(t, s, ns)
	// The platform: the tenant's applier account, in the applier's
	// namespace, with rights in the tenant's namespace only; the policy
	// naming it.
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account, Namespace: "flux-system"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: account, Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: account, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: account},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: "flux-system"}}},
	} {
		if err := s.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	policy := &scribev1.TenantPolicy{}
	if err := s.Client.Get(ctx, types.NamespacedName{Name: "tenant-" + ns}, policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.Applier = &scribev1.TenantApplier{ServiceAccountName: account}
	if err := s.Client.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	startScribe(t, s)

	w := canaryWorkload(ns)
	get := createHealthy(t, s, w)
	ks := &kustomizev1.Kustomization{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "flux-system", Name: "workload." + ns + ".web"}, ks); err != nil {
		t.Fatal(err)
	}
	if ks.Spec.ServiceAccountName != account {
		t.Fatalf("the tenant's Kustomization applies as %q, want the policy's %q", ks.Spec.ServiceAccountName, account)
	}

	slipOutsideNamespace(t, s, ns)
	// Flux fetches it at once, as after Scribe's own pushes.
	src := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "workload." + ns + ".web"}}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	if err := s.Client.Patch(ctx, src, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "Flux refusing the object outside the tenant's namespace", func() (bool, string) {
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(ks.Status.Conditions, "Ready")
		if ready == nil {
			return false, "no Ready condition"
		}
		return ready.Status == metav1.ConditionFalse && strings.Contains(ready.Message, "forbidden") && strings.Contains(ready.Message, account),
			fmt.Sprintf("%s/%s: %s", ready.Status, ready.Reason, ready.Message)
	})
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "escaped-" + ns}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the ConfigMap outside the tenant's namespace: %v; want NotFound", err)
	}
	if got := get(); got.Status.Phase != scribev1.WorkloadHealthy {
		t.Logf("the Workload after the refused apply: %s", describe(got))
	}
}

// skipUnlessApplier skips a test of one applier's enforcement when the
// run asks for another (SCRIBE_E2E_APPLIER).
func skipUnlessApplier(t *testing.T, a scribev1.ApplierKind) {
	t.Helper()
	if only := os.Getenv("SCRIBE_E2E_APPLIER"); only != "" && !strings.EqualFold(only, string(a)) {
		t.Skipf("SCRIBE_E2E_APPLIER=%s", only)
	}
}

// slipOutsideNamespace commits, beside Scribe's files in the Workload
// web's directory of ns, a ConfigMap in kube-system, as a commit to the
// tenant's path would.
func slipOutsideNamespace(t *testing.T, s *Stack, ns string) {
	t.Helper()
	dir := SyncPath + "/" + ns + "/workload/web/"
	kfile := publishtest.Git(t, s.Git.BareDir(RepoName), "show", "main:"+dir+"kustomization.yaml")
	escape := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: escaped-" + ns + ", namespace: kube-system}\ndata: {owner: tenant}\n"
	if _, err := s.Git.CommitOnServer(RepoName, "main", dir+"escape.yaml", escape); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Git.CommitOnServer(RepoName, "main", dir+"kustomization.yaml", strings.TrimRight(kfile, "\n")+"\n- escape.yaml\n"); err != nil {
		t.Fatal(err)
	}
}

// TestLoopArgoCDKeepsATenantsApplicationInItsNamespace: under Argo CD, a
// custom resource's own AppProject allows its namespace (and what the
// TenantPolicy grants) as the only destinations. An object outside them
// slipped into the tenant's directory is refused by Argo CD ("not
// permitted in project") and never created, while the tenant's Workload
// was applied and healthy.
func TestLoopArgoCDKeepsATenantsApplicationInItsNamespace(t *testing.T) {
	t.Parallel()
	skipWithoutLoop(t)
	skipUnlessApplier(t, scribev1.ApplierArgoCD)
	const ns = "tenant-argo"
	s := newLoopWith(t, scribev1.ApplierArgoCD, ns)
	ctx := context.Background()
	createHealthy(t, s, canaryWorkload(ns))

	slipOutsideNamespace(t, s, ns)
	key := types.NamespacedName{Namespace: ns, Name: "workload." + ns + ".web"}
	app, err := s.ArgoApplication(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`)
	if err := s.Client.Patch(ctx, app, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "Argo CD refusing the object outside the tenant's namespace", func() (bool, string) {
		app, err := s.ArgoApplication(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		raw, _ := json.Marshal(app.Object["status"])
		status := string(raw)
		shown := status
		if len(shown) > 800 {
			shown = "..." + shown[len(shown)-800:]
		}
		return strings.Contains(status, "not permitted in project"), shown
	})
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "escaped-" + ns}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the ConfigMap outside the tenant's namespace: %v; want NotFound", err)
	}
}
