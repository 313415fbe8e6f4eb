package imagebuild

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// NamesRegistry reports whether an image reference names its registry, by
// Docker's rule: the part before the first "/" has a "." or a ":", or is
// "localhost" ("127.0.0.1:5000/scribe:dev", "ghcr.io/x/scribe"; not
// "scribe:latest" nor "team/scribe").
func NamesRegistry(ref string) bool {
	first, _, ok := strings.Cut(ref, "/")
	return ok && (strings.ContainsAny(first, ".:") || first == "localhost")
}

// ParsePushReference parses a reference to push to; a registry on a
// loopback address or localhost is spoken to over plain HTTP.
func ParsePushReference(ref string) (name.Reference, error) {
	if !NamesRegistry(ref) {
		return nil, fmt.Errorf("push to %q: the reference names no registry (want host[:port]/repository[:tag])", ref)
	}
	var opts []name.Option
	if IsLoopbackRegistry(ref) {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("push to %q: %w", ref, err)
	}
	return r, nil
}

// IsLoopbackRegistry reports whether ref's registry is localhost or on a
// loopback address.
func IsLoopbackRegistry(ref string) bool {
	host, _, _ := strings.Cut(ref, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// writeLayout writes idx as an OCI image layout into dir, replacing the
// layout there; it refuses a dir that holds anything else.
func writeLayout(dir string, idx v1.ImageIndex, tag string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("OCI layout %s: the directory holds something else than an OCI layout; not replacing it", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("replace the OCI layout %s: %w", dir, err)
		}
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}
