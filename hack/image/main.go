// Command image builds Scribe's container image, or the demo app's,
// without a Docker engine (internal/imagebuild): the static binary on a
// root built from scratch, for one or more linux platforms.
//
//	go run ./hack/image                                  # scribe:latest -> OCI layout bin/image/scribe
//	go run ./hack/image -img 127.0.0.1:5000/scribe:dev   # push (plain HTTP to a loopback registry)
//	go run ./hack/image -app demo-app -img demo-app:v2 -version v2
//	go run ./hack/image -platforms linux/amd64,linux/arm64
//
// An -img that names a registry (its first part has a "." or a ":", or is
// localhost) is pushed there; otherwise the image is written as an OCI
// image layout into -layout (default bin/image/<app>), with -img as its
// ref name. `make image` and `make demo-app-image` run this.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/scribe-gitops/scribe/internal/imagebuild"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, os.Getenv, stderr)
	if err != nil {
		return err
	}
	if opts.Version == "" || opts.Revision == "" || opts.Created.IsZero() {
		root := opts.ModuleRoot
		if root == "" {
			root = "."
		}
		version, revision, committed := imagebuild.GitInfo(ctx, root)
		if opts.Version == "" {
			opts.Version = version
		}
		if opts.Revision == "" {
			opts.Revision = revision
		}
		if opts.Created.IsZero() {
			opts.Created = committed
		}
	}
	opts.Log = stdout
	res, err := imagebuild.Build(ctx, opts)
	if err != nil {
		return err
	}
	switch {
	case res.Pushed != "":
		_, err = fmt.Fprintln(stdout, res.Pushed)
	default:
		_, err = fmt.Fprintf(stdout, "%s@%s\n", opts.Layout, res.Digest)
	}
	if err != nil {
		return fmt.Errorf("write stdout: %w", err)
	}
	return nil
}

// parseFlags turns the command line into the builder's options.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (imagebuild.Options, error) {
	fl := flag.NewFlagSet("image", flag.ContinueOnError)
	fl.SetOutput(stderr)
	app := fl.String("app", "scribe", "the image to build: scribe, demo-app or scribe-probe")
	img := fl.String("img", "", "the image reference: pushed when it names a registry (127.0.0.1:5000/scribe:dev), else the ref name in the OCI layout (default <app>:latest)")
	layoutDir := fl.String("layout", "", "the OCI layout directory when -img names no registry (default bin/image/<app>)")
	platforms := fl.String("platforms", "linux/amd64", "comma-separated platforms; more than one makes a multi-platform index")
	version := fl.String("version", "", "the version set into the binary and the labels (default `git describe --tags --always --dirty`, or dev)")
	binary := fl.String("binary", "", "use this static binary instead of building one (one platform only)")
	caBundle := fl.String("ca-bundle", imagebuild.DefaultCABundle, "the host CA bundle copied into the image")
	created := fl.String("created", "", "the image's creation time, RFC 3339 (default the commit's time; SOURCE_DATE_EPOCH, when set, wins)")
	moduleRoot := fl.String("module-root", "", "the directory of go.mod (default: found from the working directory up)")
	if err := fl.Parse(args); err != nil {
		return imagebuild.Options{}, err
	}
	if fl.NArg() > 0 {
		return imagebuild.Options{}, fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	a, err := imagebuild.AppNamed(*app)
	if err != nil {
		return imagebuild.Options{}, err
	}
	opts := imagebuild.Options{
		App:        a,
		ModuleRoot: *moduleRoot,
		Version:    *version,
		Binary:     *binary,
		CABundle:   *caBundle,
	}
	for _, p := range strings.Split(*platforms, ",") {
		if p = strings.TrimSpace(p); p != "" {
			opts.Platforms = append(opts.Platforms, p)
		}
	}
	if s := getenv("SOURCE_DATE_EPOCH"); s != "" {
		*created = s
	}
	if *created != "" {
		t, err := parseTime(*created)
		if err != nil {
			return imagebuild.Options{}, err
		}
		opts.Created = t
	}
	ref := *img
	if ref == "" {
		ref = a.Name + ":latest"
	}
	if imagebuild.NamesRegistry(ref) {
		if *layoutDir != "" {
			return imagebuild.Options{}, fmt.Errorf("-img %s names a registry: the image is pushed, not written to -layout", ref)
		}
		opts.Push = ref
		return opts, nil
	}
	opts.Tag = ref
	opts.Layout = *layoutDir
	if opts.Layout == "" {
		root := *moduleRoot
		if root == "" {
			root = "."
		}
		opts.Layout = filepath.Join(root, "bin", "image", a.Name)
	}
	return opts, nil
}

// parseTime reads RFC 3339 or seconds since the Unix epoch.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	var secs int64
	if _, err := fmt.Sscanf(s, "%d", &secs); err == nil && fmt.Sprint(secs) == s {
		return time.Unix(secs, 0), nil
	}
	return time.Time{}, fmt.Errorf("creation time %q: want RFC 3339 or seconds since the epoch", s)
}
