package e2e

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"

	"github.com/scribe-gitops/scribe/internal/imagebuild"
)

// The loop's images, built as `make image` builds them (internal/imagebuild:
// no Docker engine) and pushed to the real node's registry. Each is built
// once per test process.

// nodeImages memoizes the images pushed to a node's registry.
type nodeImages struct {
	mu     sync.Mutex
	pushed map[string]error // by reference
}

// push builds app (with env added) and pushes it to ref once per process.
func (n *Node) push(ctx context.Context, logf func(string, ...any), app imagebuild.App, ref string) error {
	return n.pushBinary(ctx, logf, app, "", ref)
}

// pushBinary is push with a static binary built already (bin), or "" to
// build app's package.
func (n *Node) pushBinary(ctx context.Context, logf func(string, ...any), app imagebuild.App, bin, ref string) error {
	n.images.mu.Lock()
	defer n.images.mu.Unlock()
	if err, ok := n.images.pushed[ref]; ok {
		return err
	}
	if n.images.pushed == nil {
		n.images.pushed = map[string]error{}
	}
	logf("building the %s image and pushing it to %s", app.Name, ref)
	_, err := imagebuild.Build(ctx, imagebuild.Options{
		App: app, ModuleRoot: repoRoot(), Platforms: []string{"linux/" + runtime.GOARCH},
		Version: "e2e", Push: ref, Binary: bin, Log: logWriter{logf},
	})
	if err != nil {
		err = fmt.Errorf("image %s: %w", ref, err)
	}
	n.images.pushed[ref] = err
	return err
}

// pauseApp is the sandbox image: testdata/pause waits for SIGTERM, as
// Kubernetes' pause does.
func pauseApp() imagebuild.App {
	return imagebuild.App{
		Name: "pause", Description: "the real node's sandbox image", Package: "./test/e2e/testdata/pause",
		Binary: "/pause", User: "65535:65535", Entrypoint: []string{"/pause"},
	}
}

// ScribeImage builds Scribe's image and pushes it to the node's registry;
// it returns the repository and tag to install.
func (n *Node) ScribeImage(ctx context.Context, logf func(string, ...any)) (repo, tag string, err error) {
	repo, tag = n.Registry+"/scribe", "e2e"
	return repo, tag, n.push(ctx, logf, imagebuild.Scribe(), repo+":"+tag)
}

// PushDemoApp pushes the demo app (test/demoapp) as repo:tag for each tag,
// with VERSION=v<tag> in the image's environment, so that a pod tells which
// version it runs.
func (n *Node) PushDemoApp(ctx context.Context, logf func(string, ...any), repo string, tags ...string) error {
	for _, tag := range tags {
		app := imagebuild.DemoApp()
		app.Env = append(app.Env, "VERSION=v"+tag)
		if err := n.push(ctx, logf, app, n.Registry+"/"+repo+":"+tag); err != nil {
			return err
		}
	}
	return nil
}

// PushStandIns pushes the demo app in place of the catalog's docker.io
// images, which this machine cannot pull (the node's registry mirrors
// docker.io): hashicorp/http-echo (the demo app takes its -listen and
// -text flags) and moul/grpcbin (a server on its port 9000; nothing probes
// it for gRPC). Their pods then run, and pass their probes, for real.
func (n *Node) PushStandIns(ctx context.Context, logf func(string, ...any)) error {
	echo := imagebuild.DemoApp()
	if err := n.push(ctx, logf, echo, n.Registry+"/hashicorp/http-echo:1.0.0"); err != nil {
		return err
	}
	grpc := imagebuild.DemoApp()
	grpc.Cmd = []string{"-listen=:9000"}
	return n.push(ctx, logf, grpc, n.Registry+"/moul/grpcbin:latest")
}

// K6Image is the image the catalog's k6-http-loadgen WorkflowTemplate
// runs, without its registry (the node's registry mirrors docker.io).
const K6Image = "grafana/k6:0.55.0"

// PushK6 pushes testdata/k6 as K6Image: a stand-in for k6, which cannot
// be built here (AGPL) nor pulled, that runs the catalog's load script the
// way k6 does (its flags, its summary export, its exit code 99 when a
// threshold is crossed). The loadgen's pods then really load the target.
func (n *Node) PushK6(ctx context.Context, logf func(string, ...any)) error {
	return n.push(ctx, logf, imagebuild.App{
		Name: "k6", Description: "a stand-in for grafana/k6 running the catalog's load script", Package: "./test/e2e/testdata/k6",
		Binary: "/usr/bin/k6", User: "12345:12345", Entrypoint: []string{"/usr/bin/k6"},
	}, n.Registry+"/"+K6Image)
}

// CollectorImage is the catalog's collector image
// (catalog/config/otel-collector) as the node's registry, which mirrors
// docker.io, serves it.
const CollectorImage = "otel/opentelemetry-collector-contrib:0.115.1"

// PushCollector pushes bin, the OpenTelemetry Collector
// hack/build-otelcol.sh builds, as CollectorImage. It is the real collector
// at another version (OTELCOL_VERSION) with only the components the loop
// configures, in place of the contrib distribution this machine cannot
// pull: the catalog's configuration runs in it as it would in that image,
// whose binary is /otelcol-contrib too.
func (n *Node) PushCollector(ctx context.Context, logf func(string, ...any), bin string) error {
	app := imagebuild.App{
		Name: "otelcol", Description: "the OpenTelemetry Collector (hack/build-otelcol.sh) in place of " + CollectorImage,
		Package: "go.opentelemetry.io/collector/otelcol", Binary: "/otelcol-contrib",
		User: "10001:10001", Entrypoint: []string{"/otelcol-contrib"},
	}
	return n.pushBinary(ctx, logf, app, bin, n.Registry+"/"+CollectorImage)
}

// ProbeImage is the catalog's validation image as its WorkflowTemplate
// names it by default (catalog/workflows/gateway-validation), without the
// registry: the node's registry mirrors ghcr.io.
const ProbeImage = "scribe-gitops/scribe-probe:0.1.0"

// PushProbe pushes Scribe's probe (cmd/scribe-probe) as ProbeImage, so the
// catalog's default ghcr.io/scribe-gitops/scribe-probe image resolves on
// the node as it does from ghcr.io.
func (n *Node) PushProbe(ctx context.Context, logf func(string, ...any)) error {
	return n.push(ctx, logf, imagebuild.Probe(), n.Registry+"/"+ProbeImage)
}

// logWriter turns a build's log into the test's log lines.
type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l != "" {
			w.logf("image: %s", l)
		}
	}
	return len(p), nil
}

var _ io.Writer = logWriter{}
