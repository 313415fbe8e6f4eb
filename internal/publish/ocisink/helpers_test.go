package ocisink

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

// testRegistry is an in-memory registry on 127.0.0.1.
type testRegistry struct {
	host     string // host:port
	requests atomic.Int64
}

// newRegistry serves a registry; with user set, every request needs HTTP
// basic auth with user and password.
func newRegistry(tb testing.TB, user, password string) *testRegistry {
	tb.Helper()
	r := &testRegistry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if user != "" {
			if u, p, ok := req.BasicAuth(); !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
		}
		reg.ServeHTTP(w, req)
	}))
	tb.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// url is the oci:// URL of repo (with optional :tag) in r.
func (r *testRegistry) url(repo string) string { return "oci://" + r.host + "/" + repo }

func newSink(tb testing.TB, opts Options) *Sink {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("New(%+v): %v", opts, err)
	}
	return s
}

// workload makes the bundle of Workload ns/name with data in its files.
func workload(ns, name, data string) *render.Bundle {
	dir := ns + "/workload/" + name
	return &render.Bundle{
		Dir:    dir,
		Source: scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: scribev1.WorkloadKind, Namespace: ns, Name: name},
		Files: []render.File{
			{Path: dir + "/deployment-" + name + ".yaml", Data: []byte("kind: Deployment\n# " + data + "\n")},
			{Path: dir + "/kustomization.yaml", Data: []byte("resources: [deployment-" + name + ".yaml]\n")},
			{Path: dir + ".sync.yaml", Data: []byte("kind: Kustomization\n# " + data + "\n")},
		},
	}
}

// paths lists the artifact paths of b's files under prefix.
func paths(prefix string, bs ...*render.Bundle) []string {
	var out []string
	for _, b := range bs {
		for _, f := range b.Files {
			out = append(out, prefix+f.Path)
		}
	}
	return out
}

func mustPublish(tb testing.TB, s *Sink, changes ...publish.Change) publish.Result {
	tb.Helper()
	res, err := s.Publish(context.Background(), changes...)
	if err != nil {
		tb.Fatalf("Publish: %v", err)
	}
	return res
}

func mustFetch(tb testing.TB, s *Sink) map[string][]byte {
	tb.Helper()
	files, err := s.Fetch(context.Background())
	if err != nil {
		tb.Fatalf("Fetch: %v", err)
	}
	return files
}

func dockerConfig(host, user, password string) []byte {
	return fmt.Appendf(nil, `{"auths":{%q:{"username":%q,"password":%q}}}`, host, user, password)
}
