package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// startAPIServer starts a kube-apiserver serving Scribe's CRDs and the
// upstream CRD files given, stopped when the test ends; it skips the test
// where `make test` did not build one (KUBEBUILDER_ASSETS).
func startAPIServer(t *testing.T, upstream ...string) (*envtest.Environment, *rest.Config) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set; `make test` builds kube-apiserver and etcd and sets it")
	}
	env := &envtest.Environment{CRDDirectoryPaths: append([]string{filepath.Join("..", "..", "config", "crd", "bases")}, upstream...),
		ErrorIfCRDPathMissing: true, CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 3 * time.Minute}}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return env, cfg
}

// adminClient is a client of cfg with Scribe's scheme.
func adminClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// canaryFixture is the Workload of fixtures/valid/workload-canary-50.yaml,
// mid-canary at step 2 of 3.
func canaryFixture(t *testing.T) scribev1.Workload {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, "valid", "workload-canary-50.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var w scribev1.Workload
	if err := yaml.Unmarshal(data, &w); err != nil {
		t.Fatal(err)
	}
	return w
}
