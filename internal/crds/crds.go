// Package crds finds the upstream CustomResourceDefinitions of the projects
// whose objects Scribe renders (Flux, Argo CD, Gateway API, Cluster API, ...),
// for the tests that load them into a kube-apiserver and for `make schemas`.
//
// A project is looked up, in order:
//
//  1. in the repository, for the projects the Go module proxy does not serve
//     (Project.Module is ""): their files are kept, byte for byte and under
//     their upstream names, in internal/crds/upstream/<Project.Mirror>/
//     (RepoFolder; see its SOURCES.md). When the repository carries a
//     project, it is the only place the project is read from: the files are
//     the ones the commit pins, whatever machine runs the tests;
//  2. in the offline mirror named by SCRIBE_CRDS_DIR, when it is set: an
//     absolute path to a folder with one subfolder per project
//     (Project.Mirror) holding the upstream files under their upstream names;
//  3. in the Go module cache, at the version pinned in Projects(), for the
//     projects the Go module proxy serves (`go mod download` fetches the
//     module once and verifies its hash).
//
// A project found nowhere is unavailable (*UnavailableError): that happens
// only when the repository's copies cannot be located (a test binary run
// outside the repository) and no mirror has the project. Tests skip on that
// unless SCRIBE_CRDS_REQUIRED=1 (see package crdstest). The mirror must hold
// the same bytes as the repository; a test of this package compares them
// when SCRIBE_CRDS_DIR is set.
package crds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	// EnvDir names an offline mirror of the upstream CRDs; it takes
	// precedence over the Go module cache (the repository's own copies take
	// precedence over it).
	EnvDir = "SCRIBE_CRDS_DIR"
	// EnvRequired, set to 1, turns a test's skip for an unavailable project
	// into a failure (CI sets it).
	EnvRequired = "SCRIBE_CRDS_REQUIRED"

	// RepoFolder is the folder, relative to the module root, that holds
	// the CRD files of the projects the Go module proxy does not serve, one
	// subfolder per project (Project.Mirror), laid out like a mirror.
	RepoFolder = "internal/crds/upstream"

	// modulePath is the module whose root holds RepoFolder.
	modulePath = "github.com/scribe-gitops/scribe"
)

// Module is a module version in the local module cache.
type Module struct {
	// Dir is the module's extracted, read-only folder.
	Dir string
	// Sum is its go.sum hash (h1:...).
	Sum string
}

// DownloadFunc puts module@version in the module cache and says where.
type DownloadFunc func(ctx context.Context, module, version string) (Module, error)

// Resolver finds CRD files in Repo, else in Mirror, else through Download.
type Resolver struct {
	// Repo is the absolute path of the repository's copies (RepoFolder in
	// the module root), or "" for none. A project it carries (one without
	// a Module) is read from there only.
	Repo string
	// Mirror is an absolute path to an offline mirror, or "" for none.
	Mirror string
	// Download fetches a module; nil means no module is fetched (only the
	// mirror is used).
	Download DownloadFunc
}

// UnavailableError names the projects found nowhere: the Go module proxy
// does not serve them, the repository's copies were not located and no
// mirror has them.
type UnavailableError struct {
	Projects []string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("upstream CRDs of %s not found: the Go module proxy does not serve them and the repository's copies (%s) were not found; run inside the repository, or set %s to an offline mirror with one folder per project",
		strings.Join(e.Projects, ", "), RepoFolder, EnvDir)
}

// FromEnv returns the resolver the environment asks for: the repository's
// copies of the module holding the working directory (tests run in their
// package's folder, `go run ./hack/crds` in the repository), the mirror in
// SCRIBE_CRDS_DIR (which must be absolute, since tests run in their package's
// folder) and `go mod download`.
func FromEnv() (Resolver, error) {
	dir := os.Getenv(EnvDir)
	if dir != "" && !filepath.IsAbs(dir) {
		return Resolver{}, fmt.Errorf("%s=%q: want an absolute path (tests run in their package's folder)", EnvDir, dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return Resolver{}, fmt.Errorf("find the repository's CRDs: %w", err)
	}
	repo, err := FindRepo(wd)
	if err != nil {
		return Resolver{}, err
	}
	return Resolver{Repo: repo, Mirror: dir, Download: GoModDownload}, nil
}

// FindRepo returns the absolute path of RepoFolder in the Scribe module that
// holds dir: the nearest of dir and its parents whose go.mod declares the
// module (another module's go.mod on the way is passed over). It returns ""
// when dir is in no Scribe module.
func FindRepo(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find the repository's CRDs from %s: %w", dir, err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		switch {
		case err == nil:
			if goModModule(data) == modulePath {
				return filepath.Join(d, filepath.FromSlash(RepoFolder)), nil
			}
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("find the repository's CRDs: %w", err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", nil
		}
		d = parent
	}
}

// goModModule returns the module path a go.mod declares, or "".
func goModModule(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "//")
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], "\"`")
		}
	}
	return ""
}

// Files is FromEnv().Files.
func Files(ctx context.Context, projects ...string) ([]string, error) {
	r, err := FromEnv()
	if err != nil {
		return nil, err
	}
	return r.Files(ctx, projects...)
}

// Files returns the absolute paths of the CRD files of the named projects,
// in table order within each project: exactly the files Project.Files names,
// nothing else from the folder they are in. An envtest.Environment takes
// them as CRDDirectoryPaths. When some projects are unavailable, Files
// returns the files of the others together with an *UnavailableError naming
// them; any other error returns no files.
func (r Resolver) Files(ctx context.Context, projects ...string) ([]string, error) {
	if r.Repo != "" {
		if st, err := os.Stat(r.Repo); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("the repository's CRDs %s: not a directory", r.Repo)
		}
	}
	if r.Mirror != "" {
		if st, err := os.Stat(r.Mirror); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%s=%s: not a directory", EnvDir, r.Mirror)
		}
	}
	table := map[string]Project{}
	for _, p := range Projects() {
		table[p.Name] = p
	}
	var files, missing []string
	for _, name := range projects {
		p, ok := table[name]
		if !ok {
			return nil, fmt.Errorf("unknown upstream project %q (known: %s)", name, strings.Join(Names(), ", "))
		}
		dir, err := r.dir(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("upstream CRDs of %s: %w", name, err)
		}
		if dir == "" {
			missing = append(missing, name)
			continue
		}
		for _, f := range p.Files {
			files = append(files, filepath.Join(dir, f))
		}
	}
	if len(missing) > 0 {
		return files, &UnavailableError{Projects: missing}
	}
	return files, nil
}

// dir returns the folder holding every one of p's files, or "" when p is
// found nowhere.
func (r Resolver) dir(ctx context.Context, p Project) (string, error) {
	if p.InRepo() && r.Repo != "" {
		// The repository carries the project: read it from there only, so
		// that every machine tests the same bytes.
		dir := filepath.Join(r.Repo, p.Mirror)
		if err := hasFiles(dir, p.Files); err != nil {
			return "", fmt.Errorf("the repository's copy %s: %w", dir, err)
		}
		return dir, nil
	}
	if r.Mirror != "" {
		dir := filepath.Join(r.Mirror, p.Mirror)
		_, err := os.Stat(dir)
		switch {
		case err == nil:
			// A mirror that has the project must have all of it: a
			// stale mirror is not silently mixed with the module cache.
			if err := hasFiles(dir, p.Files); err != nil {
				return "", fmt.Errorf("mirror %s: %w", dir, err)
			}
			return dir, nil
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("mirror: %w", err)
		}
	}
	if p.Module == "" || r.Download == nil {
		return "", nil
	}
	m, err := r.Download(ctx, p.Module, p.Version)
	if err != nil {
		return "", err
	}
	if p.Sum != "" && m.Sum != p.Sum {
		return "", fmt.Errorf("module %s@%s has hash %s, want the pinned %s", p.Module, p.Version, m.Sum, p.Sum)
	}
	dir := filepath.Join(m.Dir, filepath.FromSlash(p.Path))
	if err := hasFiles(dir, p.Files); err != nil {
		return "", fmt.Errorf("module %s@%s: %w", p.Module, p.Version, err)
	}
	return dir, nil
}

func hasFiles(dir string, files []string) error {
	for _, f := range files {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return fmt.Errorf("no CRD file %s: %w", f, err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", f)
		}
	}
	return nil
}

// GoModDownload runs `go mod download -json module@version`: it fetches the
// module through the configured GOPROXY into the module cache (once; later
// calls read the cache) and verifies it against the checksum database. It
// runs in an empty scratch folder, outside any module, so that no go.mod or
// go.sum is touched.
func GoModDownload(ctx context.Context, module, version string) (Module, error) {
	scratch, err := os.MkdirTemp("", "scribe-crds-")
	if err != nil {
		return Module{}, fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = scratch
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		Dir, Sum, Error string
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		if runErr != nil {
			return Module{}, fmt.Errorf("go mod download %s@%s: %w: %s", module, version, runErr, strings.TrimSpace(stderr.String()))
		}
		return Module{}, fmt.Errorf("go mod download %s@%s: decode its output: %w", module, version, err)
	}
	if out.Error != "" {
		return Module{}, fmt.Errorf("go mod download %s@%s: %s", module, version, out.Error)
	}
	if runErr != nil {
		return Module{}, fmt.Errorf("go mod download %s@%s: %w: %s", module, version, runErr, strings.TrimSpace(stderr.String()))
	}
	if out.Dir == "" {
		return Module{}, fmt.Errorf("go mod download %s@%s: no Dir in its output", module, version)
	}
	return Module{Dir: out.Dir, Sum: out.Sum}, nil
}
