package imagebuild

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// file is one entry of a layer.
type file struct {
	name     string // absolute
	mode     int64  // permission bits, with the sticky bit
	dir      bool
	uid, gid int
	data     []byte
}

func (f file) String() string {
	perm := os.FileMode(f.mode & 0o777)
	if f.mode&0o1000 != 0 {
		perm |= os.ModeSticky
	}
	if f.dir {
		perm |= os.ModeDir
	}
	size := ""
	if !f.dir {
		size = fmt.Sprintf(" (%d bytes)", len(f.data))
	}
	return fmt.Sprintf("%-11s %5d:%-5d %s%s", perm, f.uid, f.gid, f.name, size)
}

// baseFiles are the files distroless/static gives a Go binary that Scribe
// and the demo app use: the users (nonroot is 65532, as the Dockerfile,
// config/manager and the chart say), a CA bundle, a home for nonroot and
// a /tmp open to all (the pods mount an emptyDir there too).
func baseFiles(caBundle []byte) []file {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		fmt.Sprintf("%s:x:%d:%d:%s:%s:/sbin/nologin\n", nonrootName, nonrootUID, nonrootUID, nonrootName, nonrootHome)
	group := "root:x:0:\nnobody:x:65534:\n" + fmt.Sprintf("%s:x:%d:\n", nonrootName, nonrootUID)
	return []file{
		{name: "/etc", mode: 0o755, dir: true},
		{name: "/etc/group", mode: 0o644, data: []byte(group)},
		{name: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "/etc/ssl", mode: 0o755, dir: true},
		{name: "/etc/ssl/certs", mode: 0o755, dir: true},
		{name: CABundlePath, mode: 0o644, data: caBundle},
		{name: homeDir, mode: 0o755, dir: true},
		{name: nonrootHome, mode: 0o700, dir: true, uid: nonrootUID, gid: nonrootUID},
		{name: "/tmp", mode: 0o1777, dir: true},
	}
}

// baseLayer is the layer of baseFiles, the same for every App and
// platform.
func baseLayer(caBundlePath string, created time.Time) (v1.Layer, []file, error) {
	ca, err := os.ReadFile(caBundlePath)
	if err != nil {
		return nil, nil, fmt.Errorf("read the CA bundle: %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, nil, fmt.Errorf("CA bundle %s holds no PEM certificate", caBundlePath)
	}
	files := baseFiles(ca)
	l, err := layerOf(files, created)
	if err != nil {
		return nil, nil, fmt.Errorf("base layer: %w", err)
	}
	return l, files, nil
}

// layerOf is an OCI layer of files (gzip), their parents first.
func layerOf(files []file, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	sorted := append([]file(nil), files...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	for _, f := range sorted {
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(f.name, "/"),
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: created,
			Format:  tar.FormatPAX,
		}
		if f.dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// platformImage is p's image: the base layer, then the binary's.
func platformImage(opts Options, p v1.Platform, base v1.Layer, bin, version string, created time.Time) (v1.Image, []file, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, nil, fmt.Errorf("read the binary: %w", err)
	}
	var files []file
	for dir := path.Dir(opts.App.Binary); dir != "/"; dir = path.Dir(dir) {
		files = append(files, file{name: dir, mode: 0o755, dir: true})
	}
	files = append(files, file{name: opts.App.Binary, mode: 0o755, data: data})
	appLayer, err := layerOf(files, created)
	if err != nil {
		return nil, nil, fmt.Errorf("%s layer: %w", opts.App.Name, err)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       opts.App.Name,
		"org.opencontainers.image.description": opts.App.Description,
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	if opts.Revision != "" {
		labels["org.opencontainers.image.revision"] = opts.Revision
	}
	cf := &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:       opts.App.User,
			Entrypoint: opts.App.Entrypoint,
			Cmd:        opts.App.Cmd,
			Env: append([]string{
				"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"SSL_CERT_FILE=" + CABundlePath,
			}, opts.App.Env...),
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, nil, fmt.Errorf("%s config: %w", p, err)
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "imagebuild: users, CA bundle, " + nonrootHome + ", /tmp", Comment: "from scratch"}},
		mutate.Addendum{Layer: appLayer, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "imagebuild: " + opts.App.Package + " -> " + opts.App.Binary}},
	)
	if err != nil {
		return nil, nil, fmt.Errorf("%s layers: %w", p, err)
	}
	return img, files, nil
}
