package ocisink

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types and annotations of a Flux artifact, as `flux push artifact`
// writes them and source-controller's OCIRepository reads them.
const (
	ConfigMediaType  types.MediaType = "application/vnd.cncf.flux.config.v1+json"
	ContentMediaType types.MediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"

	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
)

// maxArtifactBytes bounds the uncompressed content read from a registry.
const maxArtifactBytes = 512 << 20

// fluxConfig is the base image: no layers and the config blob "{}".
type fluxConfig struct{}

func (fluxConfig) RawConfigFile() ([]byte, error)      { return []byte("{}"), nil }
func (fluxConfig) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (fluxConfig) LayerByDiffID(h v1.Hash) (partial.UncompressedLayer, error) {
	return nil, fmt.Errorf("no layer %s", h)
}

// artifact builds the Flux artifact holding files.
func (s *Sink) artifact(files map[string][]byte) (v1.Image, error) {
	tarData, err := tarFiles(files)
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarData); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}

	base, err := partial.UncompressedToImage(fluxConfig{})
	if err != nil {
		return nil, err
	}
	// The config media type goes first: mutate keeps the raw config of a
	// non-image config type, so the blob stays "{}".
	img := mutate.MediaType(mutate.ConfigMediaType(base, ConfigMediaType), types.OCIManifestSchema1)
	img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(gz.Bytes(), ContentMediaType)})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(tarData)
	revision := s.opts.Revision
	if revision == "" {
		revision = "sha256:" + hex.EncodeToString(sum[:])
	}
	source := s.opts.Source
	if source == "" {
		source = s.url
	}
	created := s.opts.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	return mutate.Annotations(img, map[string]string{
		AnnotationCreated:  created.UTC().Format(time.RFC3339),
		AnnotationSource:   source,
		AnnotationRevision: revision,
	}).(v1.Image), nil
}

// tarFiles writes files into a reproducible tar: entries sorted by path,
// regular files only (directories are implied), owner 0:0, mode 0644,
// mtime the Unix epoch.
func tarFiles(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     p,
			Size:     int64(len(files[p])),
			Mode:     0o644,
			ModTime:  epoch,
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar %s: %w", p, err)
		}
		if _, err := tw.Write(files[p]); err != nil {
			return nil, fmt.Errorf("tar %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return buf.Bytes(), nil
}

// readArtifact returns the files of a Flux artifact. It refuses anything
// else, so that Publish never overwrites an unrelated image.
func readArtifact(img v1.Image) (map[string][]byte, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if m.Config.MediaType != ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != ContentMediaType {
		return nil, fmt.Errorf("not a Flux artifact (config %s, %d layers): refusing to read or overwrite it", m.Config.MediaType, len(m.Layers))
	}
	layer, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		return nil, err
	}
	rc, err := layer.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return untarFiles(rc)
}

// untarFiles reads the regular files of a tar, skipping directories.
func untarFiles(r io.Reader) (map[string][]byte, error) {
	files := map[string][]byte{}
	var total int64
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read artifact content: %w", err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("artifact entry %q: type %q is not supported, only regular files and directories", hdr.Name, hdr.Typeflag)
		}
		p := path.Clean(hdr.Name)
		if p == "." || p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("artifact entry %q lies outside the artifact root", hdr.Name)
		}
		if total += hdr.Size; total > maxArtifactBytes {
			return nil, fmt.Errorf("artifact content exceeds %d bytes", maxArtifactBytes)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("read artifact entry %q: %w", hdr.Name, err)
		}
		files[p] = data
	}
}
