package ocisink

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

func TestPublishPushesFluxArtifact(t *testing.T) {
	reg := newRegistry(t, "", "")
	created := time.Date(2026, 5, 4, 3, 2, 1, 0, time.FixedZone("X", 3600))
	for _, tc := range []struct {
		name                      string
		opts                      Options
		created, source, revision string // "" revision: sha256 of the tar
	}{{
		name:    "defaults",
		opts:    Options{URL: reg.url("defaults"), Path: "clusters/dev"},
		created: "1970-01-01T00:00:00Z", source: "oci://" + reg.host + "/defaults:latest",
	}, {
		name:    "annotations from options",
		opts:    Options{URL: reg.url("set:v1"), Path: "clusters/dev", Created: created, Source: "https://git.example/x", Revision: "main@sha1:abc"},
		created: "2026-05-04T02:02:01Z", source: "https://git.example/x", revision: "main@sha1:abc",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSink(t, tc.opts)
			web := workload("shop", "web", "v1")
			res := mustPublish(t, s, publish.ChangeFor(web))

			ref, err := name.ParseReference(strings.TrimPrefix(s.URL(), "oci://"))
			if err != nil {
				t.Fatal(err)
			}
			desc, err := remote.Get(ref)
			if err != nil {
				t.Fatal(err)
			}
			if desc.MediaType != types.OCIManifestSchema1 {
				t.Errorf("manifest media type = %s, want %s", desc.MediaType, types.OCIManifestSchema1)
			}
			if !res.Changed || res.Commit != desc.Digest.String() || res.Revision != ref.Identifier()+"@"+desc.Digest.String() {
				t.Errorf("result = %+v, want changed, commit %s", res, desc.Digest)
			}
			img, err := desc.Image()
			if err != nil {
				t.Fatal(err)
			}
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if m.Config.MediaType != ConfigMediaType {
				t.Errorf("config media type = %s", m.Config.MediaType)
			}
			if cfg, _ := img.RawConfigFile(); string(cfg) != "{}" {
				t.Errorf("config = %s, want {}", cfg)
			}
			if len(m.Layers) != 1 || m.Layers[0].MediaType != ContentMediaType {
				t.Fatalf("layers = %+v, want one %s", m.Layers, ContentMediaType)
			}
			if len(m.Annotations) != 3 {
				t.Errorf("annotations = %v, want exactly created, source and revision", m.Annotations)
			}
			if got := m.Annotations[AnnotationCreated]; got != tc.created {
				t.Errorf("created = %q, want %q", got, tc.created)
			}
			if got := m.Annotations[AnnotationSource]; got != tc.source {
				t.Errorf("source = %q, want %q", got, tc.source)
			}

			layer, err := img.LayerByDigest(m.Layers[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			tarData, names := readLayer(t, layer)
			want := paths("clusters/dev/", web)
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Errorf("tar entries = %q, want %q", names, want)
			}
			wantRev := tc.revision
			if wantRev == "" {
				sum := sha256.Sum256(tarData)
				wantRev = "sha256:" + hex.EncodeToString(sum[:])
			}
			if got := m.Annotations[AnnotationRevision]; got != wantRev {
				t.Errorf("revision = %q, want %q", got, wantRev)
			}
		})
	}
}

// readLayer checks the gzip header and every tar header for reproducibility
// and returns the tar and its entry names in order.
func readLayer(t *testing.T, layer v1.Layer) ([]byte, []string) {
	t.Helper()
	rc, err := layer.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header name %q mtime %v, want none", zr.Name, zr.ModTime)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(strings.NewReader(string(data)))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" ||
			hdr.Mode != 0o644 || hdr.ModTime.Unix() != 0 {
			t.Errorf("entry %s: type %c uid %d gid %d uname %q gname %q mode %o mtime %v; want a 0644 file of 0:0 at the epoch",
				hdr.Name, hdr.Typeflag, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname, hdr.Mode, hdr.ModTime)
		}
		names = append(names, hdr.Name)
	}
	return data, names
}

func TestPublishSameBundleGivesSameDigestAcrossRegistriesAndPushesOnce(t *testing.T) {
	a, b := newRegistry(t, "", ""), newRegistry(t, "", "")
	web := workload("shop", "web", "v1")
	// Source is fixed: by default it is the URL, which names the registry.
	sa := newSink(t, Options{URL: a.url("app"), Source: "scribe"})
	sb := newSink(t, Options{URL: b.url("app"), Source: "scribe"})

	first := mustPublish(t, sa, publish.ChangeFor(web))
	other := mustPublish(t, sb, publish.ChangeFor(web))
	if first.Commit != other.Commit {
		t.Errorf("digests differ across registries: %s and %s", first.Commit, other.Commit)
	}
	before := a.requests.Load()
	again := mustPublish(t, sa, publish.ChangeFor(web))
	// Reading the current artifact is a few requests; a push is more.
	if n := a.requests.Load() - before; n > 4 {
		t.Errorf("unchanged publish made %d requests, looks like a push", n)
	}
	if again.Changed || again != (publish.Result{Revision: first.Revision, Commit: first.Commit}) {
		t.Errorf("second push = %+v, want %+v unchanged", again, first)
	}
	// A fresh sink (as after a controller restart) sees the same.
	if res := mustPublish(t, newSink(t, Options{URL: a.url("app"), Source: "scribe"}), publish.ChangeFor(web)); res.Changed || res.Commit != first.Commit {
		t.Errorf("push from a new sink = %+v, want unchanged %s", res, first.Commit)
	}
	if !first.Changed {
		t.Errorf("first push reported unchanged")
	}
	changed := mustPublish(t, sa, publish.ChangeFor(workload("shop", "web", "v2")))
	if !changed.Changed || changed.Commit == first.Commit {
		t.Errorf("new content = %+v, want a new digest", changed)
	}
}

func TestPublishReplacesOnlyOwnedPaths(t *testing.T) {
	reg := newRegistry(t, "", "")
	s := newSink(t, Options{URL: reg.url("app:prod"), Path: "./clusters/prod/"})
	// Files no source of this sink owns, among them a sibling that shares
	// the name prefix "web" and a file under another repository path.
	foreign := map[string][]byte{
		"README.md": []byte("hand written"),
		"clusters/prod/shop/workload/web-canary/x.yaml":    []byte("x"),
		"clusters/prod/shop/workload/web-canary.sync.yaml": []byte("x"),
		"clusters/dev/shop/workload/web/x.yaml":            []byte("x"),
	}
	img, err := s.artifact(foreign)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(s.ref, img); err != nil {
		t.Fatal(err)
	}

	a, b := workload("shop", "web", "a"), workload("shop", "api", "b")
	mustPublish(t, s, publish.ChangeFor(a))
	mustPublish(t, s, publish.ChangeFor(b))
	assertFiles(t, mustFetch(t, s), foreign, paths("clusters/prod/", a, b))

	// A new render of a with fewer files drops the old ones.
	a2 := workload("shop", "web", "a2")
	a2.Files = a2.Files[1:]
	mustPublish(t, s, publish.ChangeFor(a2))
	assertFiles(t, mustFetch(t, s), foreign, paths("clusters/prod/", a2, b))

	mustPublish(t, s, publish.DeleteFor(a.Source, 2))
	assertFiles(t, mustFetch(t, s), foreign, paths("clusters/prod/", b))
}

func assertFiles(t *testing.T, got, foreign map[string][]byte, owned []string) {
	t.Helper()
	var want []string
	for p, data := range foreign {
		if string(got[p]) != string(data) {
			t.Errorf("foreign file %s = %q, want it kept as %q", p, got[p], data)
		}
		want = append(want, p)
	}
	want = append(want, owned...)
	var have []string
	for p := range got {
		have = append(have, p)
	}
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Errorf("artifact files = %q\nwant %q", have, want)
	}
}

func TestFetchOfMissingTagIsEmpty(t *testing.T) {
	s := newSink(t, Options{URL: newRegistry(t, "", "").url("nothing")})
	if files := mustFetch(t, s); len(files) != 0 {
		t.Errorf("Fetch = %v, want empty", files)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping of a missing tag: %v", err)
	}
	if res := mustPublish(t, s); res != (publish.Result{}) {
		t.Errorf("Publish without changes to a missing tag = %+v, want nothing", res)
	}
}

func TestPublishRefusesToOverwriteNonFluxArtifact(t *testing.T) {
	reg := newRegistry(t, "", "")
	s := newSink(t, Options{URL: reg.url("image")})
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(s.ref, img); err != nil {
		t.Fatal(err)
	}
	_, err = s.Publish(context.Background(), publish.ChangeFor(workload("shop", "web", "v1")))
	if err == nil || !strings.Contains(err.Error(), "not a Flux artifact") {
		t.Errorf("Publish over a container image: %v, want a refusal", err)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"empty URL", Options{}, "must start with oci://"},
		{"wrong scheme", Options{URL: "https://ghcr.io/x/y"}, "must start with oci://"},
		{"no host", Options{URL: "oci:///x"}, "no registry host"},
		{"no repository", Options{URL: "oci://ghcr.io"}, `no repository after the registry host "ghcr.io"`},
		{"empty repository", Options{URL: "oci://ghcr.io/"}, "no repository"},
		{"upper case repository", Options{URL: "oci://ghcr.io/Team/App"}, `repository "Team/App"`},
		{"bad tag", Options{URL: "oci://ghcr.io/x:bad tag"}, `tag "bad tag"`},
		{"digest", Options{URL: "oci://ghcr.io/x@sha256:" + strings.Repeat("0", 64)}, "digest references"},
		{"bad host", Options{URL: "oci://ex ample.com/x"}, `registry host "ex ample.com"`},
		{"password in the URL", Options{URL: "oci://robot:s3cret@ghcr.io/x"}, "carries credentials"},
		{"dot-dot repository component", Options{URL: "oci://ghcr.io/team/../admin/app"}, ".. path components"},
		{"dot repository component", Options{URL: "oci://ghcr.io/./app"}, ".. path components"},
		{"path escapes", Options{URL: "oci://ghcr.io/x", Path: "a/../../b"}, `invalid path "a/../../b"`},
		{"absolute path", Options{URL: "oci://ghcr.io/x", Path: "/a"}, `invalid path "/a"`},
		{"bad docker config", Options{URL: "oci://ghcr.io/x", DockerConfigJSON: []byte("{")}, "parse docker config JSON"},
		{"bad auth field", Options{URL: "oci://ghcr.io/x", DockerConfigJSON: []byte(`{"auths":{"ghcr.io":{"auth":"!"}}}`)}, "parse docker config JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%+v) = %v, %v; want error containing %q", tc.opts, s, err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q repeats the password", err)
			}
			if strings.HasPrefix(tc.opts.URL, "oci") && tc.opts.Path == "" && tc.opts.DockerConfigJSON == nil && !errors.Is(err, ErrInvalidURL) {
				t.Errorf("error %v is not ErrInvalidURL", err)
			}
		})
	}
}

func TestNewAcceptsURLForms(t *testing.T) {
	for url, want := range map[string]string{
		"oci://ghcr.io/team/app":          "oci://ghcr.io/team/app:latest",
		"oci://ghcr.io/team/app:v1.2":     "oci://ghcr.io/team/app:v1.2",
		"oci://localhost:5000/app:stable": "oci://localhost:5000/app:stable",
		"oci://docker.io/team/app":        "oci://index.docker.io/team/app:latest",
	} {
		s, err := New(Options{URL: url})
		if err != nil || s.URL() != want {
			t.Errorf("New(%q) = %v, %v; want URL %s", url, s, err, want)
		}
	}
}

func TestRegistryErrorsAreClassified(t *testing.T) {
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	reg := newRegistry(t, "scribe", "s3cret")

	for _, tc := range []struct {
		name   string
		opts   Options
		is     error // nil: success
		substr string
	}{
		{"closed port", Options{URL: "oci://" + closed + "/app", Insecure: true}, ErrUnreachable, "push oci://" + closed + "/app:latest: registry unreachable"},
		{"no credentials", Options{URL: reg.url("app")}, ErrUnauthorized, "unauthorized: no credentials for " + reg.host},
		{"wrong password", Options{URL: reg.url("app"), DockerConfigJSON: dockerConfig(reg.host, "scribe", "wrong")}, ErrUnauthorized, "push oci://" + reg.host + "/app:latest: unauthorized: the registry rejected the credentials"},
		{"credentials for another registry", Options{URL: reg.url("app"), DockerConfigJSON: dockerConfig("ghcr.io", "scribe", "s3cret")}, ErrUnauthorized, "unauthorized: no credentials for " + reg.host},
		{"right password", Options{URL: reg.url("app"), DockerConfigJSON: dockerConfig(reg.host, "scribe", "s3cret")}, nil, ""},
		{"auth field with scheme in key", Options{URL: reg.url("app"), DockerConfigJSON: fmt.Appendf(nil, `{"auths":{"http://%s/v2/":{"auth":%q}}}`, reg.host, base64.StdEncoding.EncodeToString([]byte("scribe:s3cret")))}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSink(t, tc.opts)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := s.Publish(ctx, publish.ChangeFor(workload("shop", "web", "v1")))
			pingErr := s.Ping(ctx)
			if tc.is == nil {
				if err != nil || pingErr != nil {
					t.Fatalf("Publish: %v; Ping: %v", err, pingErr)
				}
				return
			}
			for what, err := range map[string]error{"Publish": err, "Ping": pingErr} {
				if !errors.Is(err, tc.is) {
					t.Errorf("%s error %v is not %v", what, err, tc.is)
				}
				if want := map[error]publish.Reason{ErrUnauthorized: publish.ReasonAuthentication, ErrUnreachable: publish.ReasonUnreachable}[tc.is]; want != "" && publish.ReasonOf(err) != want {
					t.Errorf("%s error reason %s, want %s", what, publish.ReasonOf(err), want)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("Publish error %q does not contain %q", err, tc.substr)
			}
		})
	}
}

func TestPublishValidatesChangesBeforeNetworkIO(t *testing.T) {
	reg := newRegistry(t, "", "")
	s := newSink(t, Options{URL: reg.url("app")})
	good := workload("shop", "web", "v1")
	outside := workload("shop", "api", "v1")
	outside.Files = append(outside.Files, render.File{Path: "shop/workload/web/steal.yaml", Data: []byte("x")})
	for _, tc := range []struct {
		name   string
		change publish.Change
		want   string
	}{
		{"file outside owned paths", publish.ChangeFor(outside), `file "shop/workload/web/steal.yaml" is outside the owned paths`},
		{"no bundle", publish.Change{Source: good.Source}, "no bundle"},
		{"delete with bundle", publish.Change{Source: good.Source, Delete: true, Bundle: good}, "a delete carries no bundle"},
		{"empty name", publish.Change{Delete: true}, "non-empty path segments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Publish(context.Background(), publish.ChangeFor(good), tc.change)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "publish to "+s.URL()) || publish.ReasonOf(err) != publish.ReasonInvalid {
				t.Errorf("Publish = %v, want error containing %q", err, tc.want)
			}
			if n := reg.requests.Load(); n != 0 {
				t.Errorf("%d registry requests before the change was rejected", n)
			}
		})
	}
}

func TestConcurrentPublishesAllLand(t *testing.T) {
	reg := newRegistry(t, "", "")
	s := newSink(t, Options{URL: reg.url("app"), Path: "fleet"})
	var (
		wg      sync.WaitGroup
		bundles []*render.Bundle
		errs    = make(chan error, 8)
	)
	for i := range 8 {
		b := workload("shop", fmt.Sprintf("w%d", i), "v1")
		bundles = append(bundles, b)
		wg.Go(func() {
			if _, err := s.Publish(context.Background(), publish.ChangeFor(b)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assertFiles(t, mustFetch(t, s), nil, paths("fleet/", bundles...))
}

func TestUntarSkipsDirectoriesAndRejectsUnsafeEntries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tar.Header
		want    string // error substring; "" for success
	}{
		{"files and directories", []tar.Header{{Name: "a/", Typeflag: tar.TypeDir}, {Name: "./a/b.yaml", Typeflag: tar.TypeReg}}, ""},
		{"parent escape", []tar.Header{{Name: "../etc/passwd", Typeflag: tar.TypeReg}}, "outside the artifact root"},
		{"absolute", []tar.Header{{Name: "/etc/passwd", Typeflag: tar.TypeReg}}, "outside the artifact root"},
		{"symlink", []tar.Header{{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/"}}, "not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf strings.Builder
			tw := tar.NewWriter(&buf)
			for _, h := range tc.entries {
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
			}
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			files, err := untarFiles(strings.NewReader(buf.String()))
			if tc.want == "" {
				if err != nil || len(files) != 1 || files["a/b.yaml"] == nil {
					t.Errorf("untar = %v, %v; want a/b.yaml only", files, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("untar error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDockerConfigKeysMatchTheRegistry(t *testing.T) {
	for key, want := range map[string]string{
		"ghcr.io":                     "ghcr.io",
		"https://ghcr.io":             "ghcr.io",
		"https://index.docker.io/v1/": "index.docker.io",
		"docker.io":                   "index.docker.io",
		"127.0.0.1:5000":              "127.0.0.1:5000",
	} {
		if got := registryOf(key); got != want {
			t.Errorf("registryOf(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestRegistryErrorsCarryPublishReasons(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	_ = closed.Close()
	s, err := New(Options{URL: "oci://" + addr + "/app", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Ping(context.Background())
	if publish.ReasonOf(err) != publish.ReasonUnreachable || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, reason %s", err, publish.ReasonOf(err))
	}
}

func TestPublishNeverOverwritesAnIndexScribeDidNotWrite(t *testing.T) {
	reg := newRegistry(t, "", "")
	s := newSink(t, Options{URL: reg.url("app:prod"), Path: "clusters/prod", SyncIndex: true})
	human := []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- platform.yaml\n")
	img, err := s.artifact(map[string][]byte{"clusters/prod/kustomization.yaml": human})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(s.ref, img); err != nil {
		t.Fatal(err)
	}
	_, err = s.Publish(context.Background(), publish.ChangeFor(workload("shop", "web", "v1")))
	if publish.ReasonOf(err) != publish.ReasonSyncIndexConflict || !strings.Contains(err.Error(), "clusters/prod/kustomization.yaml") {
		t.Fatalf("Publish over a hand-written index: %v (reason %s), want %s naming the file", err, publish.ReasonOf(err), publish.ReasonSyncIndexConflict)
	}
	if got := mustFetch(t, s)["clusters/prod/kustomization.yaml"]; string(got) != string(human) {
		t.Fatalf("the index was changed: %q", got)
	}
	// Scribe's own index it keeps rewriting.
	s2 := newSink(t, Options{URL: reg.url("app:dev"), Path: "clusters/dev", SyncIndex: true})
	mustPublish(t, s2, publish.ChangeFor(workload("shop", "web", "v1")))
	mustPublish(t, s2, publish.ChangeFor(workload("shop", "api", "v1")))
	if got := string(mustFetch(t, s2)["clusters/dev/kustomization.yaml"]); !strings.HasSuffix(got, "resources:\n- shop/workload/api.sync.yaml\n- shop/workload/web.sync.yaml\n") {
		t.Fatalf("index = %q", got)
	}
}
