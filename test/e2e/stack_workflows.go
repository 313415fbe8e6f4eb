package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/scribe-gitops/scribe/internal/imagebuild"
)

// Argo Workflows in the loop (StackOptions.ArgoWorkflows): the real
// workflow-controller of github.com/argoproj/argo-workflows/v4 v4.0.5
// (hack/build-argo-workflows.sh; test-only, never a dependency of
// Scribe's module) runs on the host against the loop's API server, every
// listener on 127.0.0.1, with the CRDs of its version. Its ConfigMap names
// the executor image, argoexec of the same build packed by
// internal/imagebuild and pushed to the node's registry, and the emissary
// executor (the only one v4 has) runs each step's container on the real
// node. The executor's RBAC (create and patch workflowtaskresults, the
// Role upstream ships as manifests/quick-start/base/executor/emissary) is
// what the catalog's workflow components deliver for their own
// ServiceAccount, so the loop adds none.
const (
	// ArgoWorkflowsNamespace is the controller's install namespace: its
	// ConfigMap lives there. It runs workflows of every namespace.
	ArgoWorkflowsNamespace = "argo"
	// ArgoWorkflowsVersion is the module version the build script builds.
	ArgoWorkflowsVersion = "v4.0.5"

	workflowControllerName      = "workflow-controller"
	workflowControllerConfigMap = "workflow-controller-configmap"
	// executorImage is argoexec's image in the node's registry.
	executorImage = "scribe-e2e/argoexec:" + ArgoWorkflowsVersion
)

// argoexecApp is the executor's image: the prebuilt static argoexec at
// /bin/argoexec, as upstream's image has it (the controller runs
// "argoexec init" and "argoexec wait" by name, and the init container
// copies it for the emissary), on imagebuild's distroless-like root, as
// its nonroot user.
func argoexecApp() imagebuild.App {
	return imagebuild.App{
		Name:        "argoexec",
		Description: "Argo Workflows' executor " + ArgoWorkflowsVersion + " for the local loop",
		Package:     "github.com/argoproj/argo-workflows/v4/cmd/argoexec",
		Binary:      "/bin/argoexec",
		User:        "65532:65532",
		Entrypoint:  []string{"argoexec"},
	}
}

// startArgoWorkflows installs the CRDs, pushes the executor image, writes
// the controller's ConfigMap and runs the controller until its health
// endpoint answers.
func (s *Stack) startArgoWorkflows(ctx context.Context) error {
	start := time.Now()
	dir, err := buildDir(s.logf, "build-argo-workflows.sh")
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(dir, "crds")}, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute}); err != nil {
		return fmt.Errorf("install Argo Workflows' CRDs: %w", err)
	}
	image := s.Node.Registry + "/" + executorImage
	if err := s.Node.pushBinary(ctx, s.logf, argoexecApp(), filepath.Join(dir, "argoexec"), image); err != nil {
		return fmt.Errorf("the executor image: %w", err)
	}
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ArgoWorkflowsNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ArgoWorkflowsNamespace, err)
	}
	metricsPort, err := s.port()
	if err != nil {
		return err
	}
	health, err := s.addr()
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: workflowControllerConfigMap, Namespace: ArgoWorkflowsNamespace},
		Data: map[string]string{
			// The executor container's spec: the image the loop built.
			"executor": fmt.Sprintf("image: %s\nimagePullPolicy: IfNotPresent\n", image),
			// Plain HTTP on 127.0.0.1 (LOOP_METRICS_HOST below).
			"metricsConfig": fmt.Sprintf("enabled: true\nport: %s\nsecure: false\n", metricsPort),
		},
	}
	if err := s.Client.Create(ctx, cm); err != nil {
		return fmt.Errorf("create ConfigMap %s: %w", cm.Name, err)
	}
	env := []string{
		"LEADER_ELECTION_DISABLE=true",
		// The build's two listeners (hack/build-argo-workflows.sh).
		"LOOP_HEALTH_ADDR=" + health,
		"LOOP_METRICS_HOST=127.0.0.1",
	}
	if err := s.run(workflowControllerName, filepath.Join(dir, "workflow-controller"), env,
		"--kubeconfig="+s.Kubeconfig, "--namespace="+ArgoWorkflowsNamespace,
		"--configmap="+workflowControllerConfigMap, "--loglevel=info"); err != nil {
		return err
	}
	var last string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		resp, err := http.Get("http://" + health + "/healthz")
		if err != nil {
			last = err.Error()
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			s.logf("argo workflows: workflow-controller %s healthy on %s (metrics 127.0.0.1:%s), executor %s, in %s",
				ArgoWorkflowsVersion, health, metricsPort, image, time.Since(start).Round(time.Millisecond))
			return nil
		}
		last = resp.Status
	}
	return fmt.Errorf("workflow-controller not healthy on %s after 90s (%s); its log:\n%s", health, last, s.Logs(workflowControllerName, 30))
}
