package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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
