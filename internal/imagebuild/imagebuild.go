// Package imagebuild builds Scribe's container images without a Docker
// engine: a static Go binary on a root built from scratch with what
// distroless/static gives a Go program (/etc/passwd and /etc/group with
// nonroot 65532, a CA bundle, /tmp, a home directory for nonroot), assembled with
// go-containerregistry for one or more linux platforms, then pushed to a
// registry or written as an OCI image layout.
//
// hack/image is its command line (make image, make demo-app-image); tests
// call Build to push Scribe's and the demo app's images into a registry
// on 127.0.0.1. The Dockerfile builds the same layout with Docker; a test
// keeps the two from drifting.
package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultCABundle is the host's CA bundle (Debian's and Ubuntu's path, and
// Alpine's), copied into every image at CABundlePath.
const DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"

// CABundlePath is where an image holds its CA bundle, as in distroless.
const CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

// Source is the org.opencontainers.image.source label of every image.
const Source = "https://github.com/scribe-gitops/scribe"

// The nonroot user of distroless, which the images run as, and its home
// directory.
const (
	nonrootUID  = 65532
	nonrootName = "nonroot"
	homeDir     = "/home"
	nonrootHome = homeDir + "/" + nonrootName
)

// App is one image: the Go package that becomes its binary and how the
// image runs it.
type App struct {
	// Name is the image's short name ("scribe", "demo-app"): its title
	// label, and its tag in an OCI layout by default.
	Name string
	// Description is the org.opencontainers.image.description label.
	Description string
	// Package is the Go package of the binary, as `go build` takes it in
	// the module's root ("./cmd/scribe").
	Package string
	// Binary is the binary's absolute path in the image.
	Binary string
	// VersionVar is the string variable `-ldflags -X` sets to the version
	// ("main.version"); empty sets none.
	VersionVar string
	// User is the image's user, "uid:gid".
	User       string
	Entrypoint []string
	Cmd        []string
	// Env is added to the image's PATH and SSL_CERT_FILE.
	Env []string
}

// Scribe is Scribe's image, as the Dockerfile builds it.
func Scribe() App {
	return App{
		Name:        "scribe",
		Description: "Scribe: a GitOps reconciler that renders Workloads and Experiments into Git",
		Package:     "./cmd/scribe",
		Binary:      "/scribe",
		VersionVar:  "main.version",
		User:        "65532:65532",
		Entrypoint:  []string{"/scribe"},
		Cmd:         []string{"controller"},
	}
}

// DemoApp is the demo application's image (test/demoapp): the HTTP server
// the demo and the end-to-end tests roll out.
func DemoApp() App {
	return App{
		Name:        "demo-app",
		Description: "Scribe's demo application: an HTTP server with a version, probes, metrics and a failure share",
		Package:     "./test/demoapp",
		Binary:      "/demo-app",
		VersionVar:  "main.version",
		User:        "65532:65532",
		Entrypoint:  []string{"/demo-app"},
	}
}

// Probe is the image of the catalog's validation workflow
// (cmd/scribe-probe): it compares two routes' answers over HTTP.
func Probe() App {
	return App{
		Name:        "scribe-probe",
		Description: "Scribe's HTTP probe: the catalog's validation workflow compares two routes' answers with it",
		Package:     "./cmd/scribe-probe",
		Binary:      "/scribe-probe",
		VersionVar:  "main.version",
		User:        "65532:65532",
		Entrypoint:  []string{"/scribe-probe"},
		Cmd:         []string{"compare"},
	}
}

// Apps are the images this package knows, by name.
func Apps() []App { return []App{Scribe(), DemoApp(), Probe()} }

// AppNamed returns the App of that name.
func AppNamed(appName string) (App, error) {
	var names []string
	for _, a := range Apps() {
		if a.Name == appName {
			return a, nil
		}
		names = append(names, a.Name)
	}
	return App{}, fmt.Errorf("no image named %q (known: %s)", appName, strings.Join(names, ", "))
}

// Options says what Build builds and where it puts it.
type Options struct {
	App App
	// ModuleRoot is the directory of the go.mod the App's package is in;
	// empty looks for it from the working directory upward.
	ModuleRoot string
	// Platforms are "linux/amd64" (the default when empty),
	// "linux/arm64", "linux/arm/v7"...; the image is an index of one
	// image per platform.
	Platforms []string
	// Version is set into App.VersionVar and the version label; empty is
	// "dev".
	Version string
	// Revision is the org.opencontainers.image.revision label; empty
	// leaves it out.
	Revision string
	// Created is the images' creation time and the time of their files;
	// zero is the Unix epoch, so that a build is reproducible.
	Created time.Time
	// CABundle is the host file copied to CABundlePath; empty is
	// DefaultCABundle.
	CABundle string
	// Binary is a static binary built already, used instead of building
	// App.Package; it needs exactly one platform, its own.
	Binary string
	// GoCommand is the go command; empty is "go" on PATH.
	GoCommand string

	// Push is the reference to push the image to
	// ("127.0.0.1:5000/scribe:dev"); a registry on a loopback address or
	// localhost is spoken to over plain HTTP. Empty pushes nothing.
	Push string
	// Keychain authenticates the push; nil is authn.DefaultKeychain (the
	// Docker config file and its credential helpers).
	Keychain authn.Keychain
	// Layout is a directory to write the image into as an OCI image
	// layout; an OCI layout already there is replaced. Empty writes none.
	Layout string
	// Tag is the image's org.opencontainers.image.ref.name in Layout;
	// empty is App.Name + ":latest".
	Tag string

	// Log receives what is built: the go build commands, the files of
	// each layer, the digests and where the image went. Nil discards it.
	Log io.Writer
}

// Result is what Build built.
type Result struct {
	// Index is the image index, one image per platform.
	Index v1.ImageIndex
	// Digest is the index's digest.
	Digest v1.Hash
	// Images are the platforms' images, in Options.Platforms' order.
	Images []PlatformImage
	// Pushed is the pushed reference by digest ("host/repo@sha256:…"),
	// when Options.Push was set.
	Pushed string
	// Layout is the OCI layout written, when Options.Layout was set.
	Layout string
}

// PlatformImage is one platform's image of an index.
type PlatformImage struct {
	Platform string
	Digest   v1.Hash
	Image    v1.Image
}

// Build builds opts.App's image and pushes it, writes it, or both.
func Build(ctx context.Context, opts Options) (*Result, error) {
	if err := validateApp(opts.App); err != nil {
		return nil, err
	}
	platforms, err := parsePlatforms(opts.Platforms)
	if err != nil {
		return nil, err
	}
	if opts.Binary != "" && len(platforms) != 1 {
		return nil, fmt.Errorf("a prebuilt binary (%s) is for one platform; %d asked", opts.Binary, len(platforms))
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	if !versionPattern.MatchString(version) {
		return nil, fmt.Errorf("version %q: want letters, digits and . _ + - only", version)
	}
	created := opts.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	caBundle := opts.CABundle
	if caBundle == "" {
		caBundle = DefaultCABundle
	}
	var pushRef name.Reference
	if opts.Push != "" {
		if pushRef, err = ParsePushReference(opts.Push); err != nil {
			return nil, err
		}
	}
	root := opts.ModuleRoot
	if root == "" && opts.Binary == "" {
		if root, err = findModuleRoot(); err != nil {
			return nil, err
		}
	}

	base, baseFiles, err := baseLayer(caBundle, created)
	if err != nil {
		return nil, err
	}
	baseDigest, err := base.Digest()
	if err != nil {
		return nil, fmt.Errorf("base layer digest: %w", err)
	}
	logf(log, "%s: base layer %s (from scratch, what distroless/static gives a Go binary):", opts.App.Name, short(baseDigest))
	logFiles(log, baseFiles)

	tmp, err := os.MkdirTemp("", "imagebuild-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory for the binaries: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	res := &Result{}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		bin := opts.Binary
		if bin == "" {
			bin = filepath.Join(tmp, opts.App.Name+"-"+strings.ReplaceAll(p.String(), "/", "-"))
			if err := goBuild(ctx, log, opts.GoCommand, root, opts.App, p, version, bin); err != nil {
				return nil, err
			}
		}
		if err := checkStatic(bin, p); err != nil {
			return nil, err
		}
		img, files, err := platformImage(opts, p, base, bin, version, created)
		if err != nil {
			return nil, err
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, fmt.Errorf("%s image digest: %w", p, err)
		}
		logf(log, "%s: %s image %s, its layer of the binary:", opts.App.Name, p, short(digest))
		logFiles(log, files)
		res.Images = append(res.Images, PlatformImage{Platform: p.String(), Digest: digest, Image: img})
		pp := p
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &pp}})
	}
	res.Index = mutate.AppendManifests(idx, adds...)
	if res.Digest, err = res.Index.Digest(); err != nil {
		return nil, fmt.Errorf("index digest: %w", err)
	}
	logf(log, "%s: index %s (%d platform(s)), user %s, entrypoint %q, cmd %q", opts.App.Name, res.Digest, len(platforms), opts.App.User, opts.App.Entrypoint, opts.App.Cmd)

	if pushRef != nil {
		kc := opts.Keychain
		if kc == nil {
			kc = authn.DefaultKeychain
		}
		if err := remote.WriteIndex(pushRef, res.Index, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)); err != nil {
			return nil, fmt.Errorf("push %s: %w", opts.Push, err)
		}
		res.Pushed = pushRef.Context().Digest(res.Digest.String()).String()
		logf(log, "%s: pushed %s", opts.App.Name, res.Pushed)
	}
	if opts.Layout != "" {
		tag := opts.Tag
		if tag == "" {
			tag = opts.App.Name + ":latest"
		}
		if err := writeLayout(opts.Layout, res.Index, tag); err != nil {
			return nil, err
		}
		res.Layout = opts.Layout
		logf(log, "%s: wrote the OCI image layout %s (ref name %s)", opts.App.Name, opts.Layout, tag)
	}
	return res, nil
}

var versionPattern = regexp.MustCompile(`^[A-Za-z0-9._+-]+$`)

func validateApp(a App) error {
	switch {
	case a.Name == "":
		return errors.New("the image has no name")
	case a.Package == "":
		return fmt.Errorf("image %s: no Go package", a.Name)
	case !path.IsAbs(a.Binary) || path.Clean(a.Binary) != a.Binary || a.Binary == "/":
		return fmt.Errorf("image %s: binary path %q is not a clean absolute file path", a.Name, a.Binary)
	case len(a.Entrypoint) == 0:
		return fmt.Errorf("image %s: no entrypoint", a.Name)
	}
	if _, _, err := parseUser(a.User); err != nil {
		return fmt.Errorf("image %s: %w", a.Name, err)
	}
	return nil
}

// parseUser reads "uid:gid".
func parseUser(u string) (uid, gid int, err error) {
	us, gs, ok := strings.Cut(u, ":")
	if ok {
		uid, err = strconv.Atoi(us)
		if err == nil {
			gid, err = strconv.Atoi(gs)
		}
	}
	if !ok || err != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("user %q: want numeric uid:gid", u)
	}
	return uid, gid, nil
}

// findModuleRoot is the nearest directory from the working directory up
// that has a go.mod.
func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the module root: no go.mod in the working directory or above it")
		}
		dir = parent
	}
}

// GitInfo describes the commit checked out in dir: `git describe --tags
// --always --dirty` (as make docker-build tags), the commit's hash and its
// time. Each is empty or zero when git cannot tell.
func GitInfo(ctx context.Context, dir string) (version, revision string, committed time.Time) {
	git := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	version = git("describe", "--tags", "--always", "--dirty")
	revision = git("rev-parse", "HEAD")
	if s, err := strconv.ParseInt(git("log", "-1", "--format=%ct"), 10, 64); err == nil {
		committed = time.Unix(s, 0)
	}
	return version, revision, committed
}

func logf(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format+"\n", args...)
}

func logFiles(w io.Writer, files []file) {
	for _, f := range files {
		logf(w, "  %s", f)
	}
}

func short(h v1.Hash) string {
	if len(h.Hex) > 12 {
		return h.Algorithm + ":" + h.Hex[:12]
	}
	return h.String()
}
