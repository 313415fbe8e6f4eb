// Package hydrate builds a catalog component's kustomization into the plain
// objects an applier applies: the kustomize build of the entry's directory
// (sigs.k8s.io/kustomize/api, in memory, no plugins, no remote bases, no
// file outside the directory), the namespace the entry says, and the
// component's params substituted as Flux's postBuild substitution does
// (github.com/fluxcd/pkg/envsubst, strict). It reads only the files it is
// given and holds no state: the same request gives the same objects.
package hydrate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/fluxcd/pkg/envsubst"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Default bounds of one hydration.
const (
	// DefaultMaxInputBytes bounds the files of an entry's directory.
	DefaultMaxInputBytes = 4 << 20
	// DefaultMaxFiles bounds how many files the directory holds.
	DefaultMaxFiles = 512
	// DefaultMaxOutputBytes bounds the built objects, as YAML.
	DefaultMaxOutputBytes = 8 << 20
	// DefaultMaxObjects bounds how many objects the build yields.
	DefaultMaxObjects = 1000
)

// Limits bound one hydration; a zero field means its default.
type Limits struct {
	MaxInputBytes  int64
	MaxFiles       int
	MaxOutputBytes int64
	MaxObjects     int
}

func (l Limits) withDefaults() Limits {
	if l.MaxInputBytes <= 0 {
		l.MaxInputBytes = DefaultMaxInputBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultMaxObjects
	}
	return l
}

// Request is one component to hydrate.
type Request struct {
	// FS holds the published catalog: Dir is a path in it.
	FS fs.FS
	// Dir is the entry's source path ("./apps/demo-services"): a
	// directory inside FS, never above its root.
	Dir string
	// Params are substituted for ${name} (and ${name:=default}, and the
	// other forms Flux's envsubst knows) in every built object but those
	// labelled or annotated kustomize.toolkit.fluxcd.io/substitute:
	// disabled. A ${name} without a default and without a param is an
	// error (*MissingParamError).
	Params map[string]string
	// Namespace, when set, is set on every namespaced object as
	// kustomize's namespace field does (the overlay Flux's
	// targetNamespace builds).
	Namespace string
	// NameSuffix, when set, is appended to the name of every object but
	// the shared ones (SharedKind) as kustomize's nameSuffix does, which
	// also rewrites the references to them kustomize knows (a
	// RoleBinding's subjects and roleRef, a Pod template's service account,
	// ConfigMap and Secret volumes, an Ingress's backends), plus those of
	// Argo Workflows objects (argoReferences). A suffixed name longer than
	// 63 characters is an error.
	NameSuffix string
	Limits     Limits
}

// MissingParamError is a ${name} in the manifests that neither a param nor
// a default fills.
type MissingParamError struct {
	// Param is the name in ${name}.
	Param string
	// Object is the object it appears in: Kind/name.
	Object string
}

func (e *MissingParamError) Error() string {
	return fmt.Sprintf("%s uses ${%s}, which has no default and no param sets it", e.Object, e.Param)
}

// ParamNameError is a param whose name Flux's substitution would refuse.
type ParamNameError struct{ Param string }

func (e *ParamNameError) Error() string {
	return fmt.Sprintf("param name %q cannot be substituted: it must match %s", e.Param, varName)
}

// varName is what a substituted name must match (Flux's varsubRegex).
const varName = "^[_[:alpha:]][_[:alpha:][:digit:]]*$"

var varNameRE = regexp.MustCompile(varName)

// substituteKey disables the substitution of an object, as in Flux.
const substituteKey = "kustomize.toolkit.fluxcd.io/substitute"

// buildMu serializes kustomize builds: kustomize keeps global state (its
// OpenAPI schema) that concurrent builds race on
// (kubernetes-sigs/kustomize#3659; Flux serializes them the same way).
var buildMu sync.Mutex

// Build hydrates req: the objects, in the build's order.
func Build(req Request) ([]map[string]any, error) {
	lim := req.Limits.withDefaults()
	dir, err := entryDir(req.Dir)
	if err != nil {
		return nil, err
	}
	for k := range req.Params {
		if !varNameRE.MatchString(k) {
			return nil, &ParamNameError{Param: k}
		}
	}
	mem, kfiles, err := load(req.FS, dir, lim)
	if err != nil {
		return nil, err
	}
	for _, kf := range kfiles {
		if err := checkKustomization(mem, kf); err != nil {
			return nil, err
		}
	}
	if !slices.ContainsFunc(kfiles, func(p string) bool { return path.Dir(p) == entryRoot }) {
		if err := generateKustomization(mem, kfiles); err != nil {
			return nil, err
		}
	}
	root := entryRoot
	if req.Namespace != "" || req.NameSuffix != "" {
		if err := writeOverlay(mem, req); err != nil {
			return nil, err
		}
		root = overlayRoot
	}
	resources, err := build(mem, root)
	if err != nil {
		return nil, err
	}
	if len(resources) > lim.MaxObjects {
		return nil, fmt.Errorf("the build yields %d objects, more than %d", len(resources), lim.MaxObjects)
	}
	var out []map[string]any
	var size int64
	for _, r := range resources {
		obj, n, err := substitute(r, req.Params)
		if err != nil {
			return nil, err
		}
		if err := checkOwned(obj, req.NameSuffix); err != nil {
			return nil, err
		}
		if size += int64(n); size > lim.MaxOutputBytes {
			return nil, fmt.Errorf("the built objects exceed %d KiB", lim.MaxOutputBytes>>10)
		}
		out = append(out, obj)
	}
	return out, nil
}

// Key identifies what Build would yield for req: a hash of the files under
// its directory (within its limits), its params and its namespace. Two
// requests with one key build the same objects, so a caller may keep
// Build's result by it. It reads the files as Build does.
func Key(req Request) (string, error) {
	lim := req.Limits.withDefaults()
	dir, err := entryDir(req.Dir)
	if err != nil {
		return "", err
	}
	mem, _, err := load(req.FS, dir, lim)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "dir\x00%s\x00ns\x00%s\x00suffix\x00%s\x00", dir, req.Namespace, req.NameSuffix)
	keys := make([]string, 0, len(req.Params))
	for k := range req.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		_, _ = fmt.Fprintf(h, "param\x00%s\x00%d\x00%s\x00", k, len(req.Params[k]), req.Params[k])
	}
	var files []string
	err = mem.Walk(entryRoot, func(p string, info fs.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, p := range files {
		data, err := mem.ReadFile(p)
		if err != nil {
			return "", err
		}
		_, _ = fmt.Fprintf(h, "file\x00%s\x00%d\x00", p, len(data))
		_, _ = h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Where the in-memory file system holds the entry's files and the
// namespace overlay.
const (
	entryRoot   = "/entry"
	overlayRoot = "/overlay"
)

// entryDir is the entry's source path, cleaned, relative to the catalog's
// root; a path above the root is an error.
func entryDir(p string) (string, error) {
	if p == "" {
		return "", errors.New("the entry's source path is empty")
	}
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q is absolute: an entry's path is relative to the catalog (./dir)", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves the catalog's directory", p)
	}
	return c, nil
}

// kustomizationNames are the file names kustomize reads as a kustomization.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// load copies the regular files under dir of fsys into an in-memory file
// system at entryRoot, within lim, and returns it with the paths of the
// kustomization files in it.
func load(fsys fs.FS, dir string, lim Limits) (filesys.FileSystem, []string, error) {
	if fsys == nil {
		return nil, nil, errors.New("no catalog files to read")
	}
	fi, err := fs.Stat(fsys, dir)
	if err != nil || !fi.IsDir() {
		return nil, nil, fmt.Errorf("path %q is not a directory of the catalog", dir)
	}
	mem := filesys.MakeFsInMemory()
	var kfiles []string
	var total int64
	files := 0
	err = fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (a link may lead outside the entry's directory)", path.Join(dir, rel))
		}
		if files++; files > lim.MaxFiles {
			return fmt.Errorf("the directory %s holds more than %d files", dir, lim.MaxFiles)
		}
		f, err := fsys.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		data, err := io.ReadAll(io.LimitReader(f, lim.MaxInputBytes-total+1))
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if total += int64(len(data)); total > lim.MaxInputBytes {
			return fmt.Errorf("the files of %s exceed %d KiB", dir, lim.MaxInputBytes>>10)
		}
		at := path.Join(entryRoot, rel)
		if slices.Contains(kustomizationNames, path.Base(rel)) {
			kfiles = append(kfiles, at)
		}
		return mem.WriteFile(at, data)
	})
	if err != nil {
		return nil, nil, err
	}
	if files == 0 {
		return nil, nil, fmt.Errorf("the directory %s holds no files", dir)
	}
	sort.Strings(kfiles)
	return mem, kfiles, nil
}

// checkKustomization refuses a kustomization that would read anything but
// files of the entry's directory: a remote base or file (kustomize would
// clone or download it), a path above the directory, a Helm chart or a
// plugin. Every path it names must be a file or directory of the entry.
func checkKustomization(mem filesys.FileSystem, file string) error {
	data, err := mem.ReadFile(file)
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(file, entryRoot+"/")
	var k kustypes.Kustomization
	if err := k.Unmarshal(data); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	k.FixKustomization()
	switch {
	case len(k.HelmCharts) > 0 || k.HelmGlobals != nil || len(k.HelmChartInflationGenerator) > 0:
		return fmt.Errorf("%s: helmCharts are not built: name the chart as a Helm entry of the catalog", name)
	case len(k.OpenAPI) > 0:
		return fmt.Errorf("%s: openapi is not supported", name)
	}
	dir := path.Dir(file)
	var refs []string
	add := func(field string, paths ...string) {
		for i, p := range paths {
			refs = append(refs, fmt.Sprintf("%s[%d]\x00%s", field, i, p))
		}
	}
	add("resources", k.Resources...)
	add("components", k.Components...)
	add("crds", k.Crds...)
	add("configurations", k.Configurations...)
	for field, list := range map[string][]string{"generators": k.Generators, "transformers": k.Transformers, "validators": k.Validators} {
		for i, p := range list {
			if !strings.Contains(p, "\n") { // an inline builtin config is YAML
				refs = append(refs, fmt.Sprintf("%s[%d]\x00%s", field, i, p))
			}
		}
	}
	for i, p := range k.PatchesStrategicMerge { //nolint:staticcheck // deprecated, still built by kustomize
		if s := string(p); !strings.Contains(s, "\n") {
			refs = append(refs, fmt.Sprintf("patchesStrategicMerge[%d]\x00%s", i, s))
		}
	}
	for i, p := range k.Patches {
		if p.Path != "" {
			refs = append(refs, fmt.Sprintf("patches[%d].path\x00%s", i, p.Path))
		}
	}
	for i, p := range k.PatchesJson6902 { //nolint:staticcheck // deprecated, still built by kustomize
		if p.Path != "" {
			refs = append(refs, fmt.Sprintf("patchesJson6902[%d].path\x00%s", i, p.Path))
		}
	}
	for i, r := range k.Replacements {
		if r.Path != "" {
			refs = append(refs, fmt.Sprintf("replacements[%d].path\x00%s", i, r.Path))
		}
	}
	gens := func(field string, args []kustypes.GeneratorArgs) {
		for i, g := range args {
			for j, f := range g.FileSources {
				if _, after, ok := strings.Cut(f, "="); ok {
					f = after
				}
				refs = append(refs, fmt.Sprintf("%s[%d].files[%d]\x00%s", field, i, j, f))
			}
			for j, f := range g.EnvSources {
				refs = append(refs, fmt.Sprintf("%s[%d].envs[%d]\x00%s", field, i, j, f))
			}
		}
	}
	cms := make([]kustypes.GeneratorArgs, len(k.ConfigMapGenerator))
	for i, c := range k.ConfigMapGenerator {
		cms[i] = c.GeneratorArgs
	}
	gens("configMapGenerator", cms)
	ss := make([]kustypes.GeneratorArgs, len(k.SecretGenerator))
	for i, s := range k.SecretGenerator {
		ss[i] = s.GeneratorArgs
	}
	gens("secretGenerator", ss)
	for _, r := range refs {
		field, p, _ := strings.Cut(r, "\x00")
		if strings.Contains(p, "://") || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "git@") {
			return fmt.Errorf("%s: %s %q is not a path in the entry's directory: Scribe builds only the catalog's own files (no remote bases)", name, field, p)
		}
		at := path.Join(dir, p)
		if at != entryRoot && !strings.HasPrefix(at, entryRoot+"/") {
			return fmt.Errorf("%s: %s %q leaves the entry's directory", name, field, p)
		}
		if !mem.Exists(at) {
			return fmt.Errorf("%s: %s %q is not a file or directory of the entry", name, field, p)
		}
	}
	return nil
}

// generateKustomization writes a kustomization at the entry's root listing
// its manifests, as Flux generates one for a directory without: every
// *.yaml and *.yml file, when no subdirectory has a kustomization of its
// own.
func generateKustomization(mem filesys.FileSystem, kfiles []string) error {
	if len(kfiles) > 0 {
		return fmt.Errorf("the entry has no kustomization.yaml at its root, and %s has one: add one at the root", strings.TrimPrefix(path.Dir(kfiles[0]), entryRoot+"/"))
	}
	var res []string
	err := mem.Walk(entryRoot, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			res = append(res, strings.TrimPrefix(p, entryRoot+"/"))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(res) == 0 {
		return errors.New("the entry's directory holds no kustomization.yaml and no *.yaml manifests")
	}
	sort.Strings(res)
	data, err := yaml.Marshal(kustypes.Kustomization{
		TypeMeta:  kustypes.TypeMeta{APIVersion: kustypes.KustomizationVersion, Kind: kustypes.KustomizationKind},
		Resources: res,
	})
	if err != nil {
		return err
	}
	return mem.WriteFile(entryRoot+"/kustomization.yaml", data)
}

// build runs kustomize on root of mem, builtin plugins only, in the order
// the kustomizations list them. As in Flux, a kustomization may read a
// file above its own directory (a base's ../deploy.yaml): mem holds the
// entry's files only, and checkKustomization kept every path inside it.
func build(mem filesys.FileSystem, root string) (res []*resource.Resource, err error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	// kustomize panics on some malformed input: it is the input's error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kustomize build failed: %v", r)
		}
	}()
	k := krusty.MakeKustomizer(&krusty.Options{
		Reorder:          krusty.ReorderOptionNone,
		LoadRestrictions: kustypes.LoadRestrictionsNone,
		PluginConfig:     kustypes.DisabledPluginConfig(),
	})
	m, err := k.Run(mem, root)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), entryRoot+"/", "")
		msg = strings.ReplaceAll(msg, overlayRoot+"/", "")
		return nil, fmt.Errorf("kustomize build: %s", msg)
	}
	return m.Resources(), nil
}

// substitute returns r as JSON data with params substituted as Flux's
// postBuild does (strict), and the size of its YAML.
func substitute(r *resource.Resource, params map[string]string) (map[string]any, int, error) {
	id := r.GetKind() + "/" + r.GetName()
	data, err := r.AsYAML()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", id, err)
	}
	if r.GetLabels()[substituteKey] != "disabled" && r.GetAnnotations()[substituteKey] != "disabled" {
		out, err := envsubst.Eval(string(data), func(name string) (string, bool) {
			v, ok := params[name]
			// Flux drops newlines from substituted values.
			return strings.ReplaceAll(v, "\n", ""), ok
		})
		if err != nil {
			if p, ok := missingParam(err); ok {
				return nil, 0, &MissingParamError{Param: p, Object: id}
			}
			return nil, 0, fmt.Errorf("%s: substitute params: %w", id, err)
		}
		data = []byte(out)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: after substituting params: %w", id, err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(j, &obj); err != nil {
		return nil, 0, fmt.Errorf("%s: after substituting params: %w", id, err)
	}
	if obj == nil {
		return nil, 0, fmt.Errorf("%s: not an object after substituting params", id)
	}
	return obj, len(data), nil
}

// missingParam reads the name out of envsubst's strict-mode error
// (`variable not set (strict mode): "name"`).
func missingParam(err error) (string, bool) {
	const marker = "variable not set (strict mode): "
	msg := err.Error()
	i := strings.Index(msg, marker)
	if i < 0 {
		return "", false
	}
	rest := strings.TrimPrefix(msg[i+len(marker):], "\"")
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		rest = rest[:j]
	}
	return rest, rest != ""
}
