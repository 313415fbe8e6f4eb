package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// pushPause builds the sandbox image (testdata/pause, a static program
// that waits for SIGTERM) and pushes it to the node's registry.
func pushPause(ctx context.Context, reg string) error {
	dir, err := os.MkdirTemp("", "scribe-pause-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./test/e2e/testdata/pause")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the pause program: %w: %s", err, out)
	}
	return pushBinaryImage(ctx, reg+"/"+pauseImage, bin, "/pause", nil, nil)
}

// pushBinaryImage pushes an image of one static binary at path in (as
// its entrypoint, user 65535) to ref on a plain-HTTP registry.
func pushBinaryImage(ctx context.Context, ref, bin, path string, cmdArgs, env []string) error {
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: path[1:], Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: []string{path}, Cmd: cmdArgs, Env: env, User: "65532:65532"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(r, img, remote.WithContext(ctx))
}

// ScribeImage builds Scribe's image and pushes it to the node's registry;
// it returns the repository and tag to install.
func (n *Node) ScribeImage(ctx context.Context, logf func(string, ...any)) (repo, tag string, err error) {
	dir, err := os.MkdirTemp("", "scribe-image-")
	if err != nil {
		return "", "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "scribe")
	logf("building Scribe's image")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/scribe")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build scribe: %w: %s", err, out)
	}
	repo, tag = n.Registry+"/scribe", "e2e"
	return repo, tag, pushBinaryImage(ctx, repo+":"+tag, bin, "/scribe", []string{"controller"}, nil)
}

// PushDemoApp builds the demo app and pushes it as repo:tag for each tag,
// with VERSION=v<tag> in the image's environment.
func (n *Node) PushDemoApp(ctx context.Context, logf func(string, ...any), repo string, tags ...string) error {
	dir, err := os.MkdirTemp("", "scribe-demoapp-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "demo-app")
	logf("building the demo app's image")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./test/demoapp")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the demo app: %w: %s", err, out)
	}
	for _, tag := range tags {
		if err := pushBinaryImage(ctx, n.Registry+"/"+repo+":"+tag, bin, "/demo-app", nil, []string{"VERSION=v" + tag}); err != nil {
			return err
		}
	}
	return nil
}
