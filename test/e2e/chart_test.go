package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// TestLoopChartInstallsUpgradesAndUninstallsWithTheControllerRunning
// installs Scribe by its chart on the real node, upgrades it to a chart
// whose Workload CRD changed and with changed values, and uninstalls it:
// the controller pod runs and reconciles throughout, the upgrade applies
// the CRD change and the values, a namespace editor can write Workloads
// through the aggregated roles, and the uninstall keeps the CRDs and the
// custom resources.
func TestLoopChartInstallsUpgradesAndUninstallsWithTheControllerRunning(t *testing.T) {
	skipWithoutLoop(t)
	s := StartOpts(t, StackOptions{RealNode: true, ControlPlaneOnly: true})
	ctx := context.Background()
	s.InstallScribe(t, InstallOptions{})

	// The controller reconciles: a Workload without a Repository gets a
	// Ready=False condition from the pod.
	ns := "team-a"
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	w := canaryWorkload(ns)
	if err := s.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(w.Finalizers, controller.Finalizer) {
		t.Errorf("the Workload as created holds finalizers %v: the chart's finalizer policy did not set %s", w.Finalizers, controller.Finalizer)
	}
	poll(t, 2*time.Minute, "the in-cluster controller to reconcile the Workload", func() (bool, string) {
		got := &scribev1.Workload{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name}, got); err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == scribev1.ReadyCondition {
				return true, c.Reason
			}
		}
		return false, describe(got) + "; scribe: " + s.Logs("scribe", 5)
	})

	// A namespace editor (the built-in edit ClusterRole, which the chart's
	// scribe-edit aggregates into) may create Workloads.
	if err := s.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}},
	}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "edit to aggregate the chart's scribe-edit role", func() (bool, string) {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "alice",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: scribev1.GroupVersion.Group, Resource: "workloads"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return r.Status.Allowed, fmt.Sprintf("allowed=%v %s", r.Status.Allowed, r.Status.Reason)
	})

	// The upgrade: a chart whose Workload CRD has a new printer column,
	// with two replicas (a PodDisruptionBudget comes with them) and console
	// logs.
	chart := copyChart(t)
	crdFile := filepath.Join(chart, "templates", "crds", "scribe.dev_workloads.yaml")
	crd, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(crd), "  - additionalPrinterColumns:\n",
		"  - additionalPrinterColumns:\n    - jsonPath: .metadata.labels.upgrade\n      name: Upgraded\n      type: string\n", 1)
	if changed == string(crd) {
		t.Fatal("the Workload CRD template has no additionalPrinterColumns to extend")
	}
	if err := os.WriteFile(crdFile, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, tag, err := s.Node.ScribeImage(ctx, s.logf)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Helm(ctx, "upgrade", ScribeRelease, chart, "--namespace", ScribeNamespace,
		"--set", "image.repository="+repo, "--set", "image.tag="+tag, "--set", "extraArgs={--poll-interval=1s}",
		"--set", "replicaCount=2", "--set", "logFormat=console"); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "the upgraded Deployment: two Ready pods logging in console format", func() (bool, string) {
		d := &appsv1.Deployment{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ScribeNamespace, Name: ScribeRelease}, d); err != nil {
			return false, err.Error()
		}
		args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
		return d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == 2 && d.Status.UpdatedReplicas == 2 &&
				d.Status.Replicas == 2 && strings.Contains(args, "--log-encoding=console"),
			fmt.Sprintf("ready %d/%d updated %d, args %s", d.Status.ReadyReplicas, d.Status.Replicas, d.Status.UpdatedReplicas, args)
	})
	t.Logf("helm upgrade -> two Ready controller pods: %s", time.Since(start).Round(time.Millisecond))
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := s.Client.Get(ctx, types.NamespacedName{Name: "workloads.scribe.dev"}, got); err != nil {
		t.Fatal(err)
	}
	if cols := got.Spec.Versions[0].AdditionalPrinterColumns; len(cols) == 0 || cols[0].Name != "Upgraded" {
		t.Fatalf("helm upgrade did not apply the changed CRD: printer columns %v", cols)
	}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ScribeNamespace, Name: ScribeRelease}, &policyv1.PodDisruptionBudget{}); err != nil {
		t.Fatalf("two replicas, no PodDisruptionBudget: %v", err)
	}
	// The old pod released the Lease on its way out; one of the new ones
	// takes it.
	poll(t, time.Minute, "a new pod to lead after the upgrade", func() (bool, string) {
		leader, err := s.ScribeLeader(ctx)
		if err != nil {
			return false, err.Error()
		}
		pod, err := s.ScribePod(ctx)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(strings.Join(pod.Spec.Containers[0].Args, " "), "--log-encoding=console") && leader != "", "leader " + leader
	})

	// The uninstall keeps the CRDs (helm.sh/resource-policy: keep) and so
	// every custom resource; the controller's pods go.
	if _, err := s.Helm(ctx, "uninstall", ScribeRelease, "--namespace", ScribeNamespace); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "the controller's pods gone", func() (bool, string) {
		_, err := s.ScribePod(ctx)
		return err != nil, fmt.Sprint(err)
	})
	for _, name := range []string{"workloads.scribe.dev", "experiments.scribe.dev", "pipelines.scribe.dev", "repositories.scribe.dev"} {
		if err := s.Client.Get(ctx, types.NamespacedName{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("CRD %s after helm uninstall: %v", name, err)
		}
	}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name}, &scribev1.Workload{}); err != nil {
		t.Errorf("the Workload after helm uninstall: %v", err)
	}
	if err := s.Client.Get(ctx, types.NamespacedName{Name: ScribeRelease + "-manager"}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
		t.Errorf("the manager ClusterRole after helm uninstall: %v, want it gone", err)
	}
}

// copyChart copies charts/scribe into a temporary folder.
func copyChart(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "scribe")
	if err := copyTree(filepath.Join(repoRoot(), "charts", "scribe"), dst); err != nil {
		t.Fatal(err)
	}
	return dst
}
