// Package render turns a Scribe custom resource into a deterministic bundle
// of manifests: the CR is validated and defaulted as the kube-apiserver would,
// catalog components are resolved, the CUE template of its kind is evaluated,
// and every rendered object is checked against the closed CUE schema of its
// kind. Render is pure: no I/O but the embedded CUE.
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	cueliteral "cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/parser"

	"github.com/scribe-gitops/scribe/catalog"
	"github.com/scribe-gitops/scribe/config/crd"
	"github.com/scribe-gitops/scribe/schemas"
	"github.com/scribe-gitops/scribe/templates"
)

// moduleRoot is where the engine's CUE module sits in the in-memory file
// system it is loaded from (cueModule): a path of that file system, never
// of the host's. (It once was the root of a load.Config.Overlay, which CUE
// lays over the host's files: with the binary itself at /scribe, as in the
// container image, every load failed on /scribe/cue.mod.)
const moduleRoot = "/scribe"

// Engine renders custom resources. Build one per process with New and share
// it: it is safe for concurrent use.
type Engine struct {
	ctx             *cue.Context
	templates       map[string]cue.Value // by CR kind
	catalogs        []cue.Value          // entries values, highest precedence first
	catalogFrom     []string             // where each of catalogs comes from (WithCatalog's name)
	entrySchema     cue.Value
	validators      map[string]*crValidator // by "group/version/Kind"
	templateVersion string
	cueCheck        bool // check rendered objects with CUE instead (tests)

	// The CUE schema registry (templates/registry, 3 MB of schemas) is
	// loaded only for the CUE check and the schema compiler: renders use
	// the embedded compiled checks (schemachecks_file.go).
	module       *cueModule
	registryOnce sync.Once
	registry     map[string]cue.Value // by "apiVersion/Kind"
	registryErr  error

	// entries caches each catalog entry's JSON data through #Entry, by
	// "<catalog index>/<name>" (entryData): bounded by the catalogs.
	entries sync.Map
	// hydrations caches the objects of hydrated catalog components.
	hydrations hydrationCache
}

// schemaCheck returns the embedded compiled check of a registry kind; ok
// is false for a kind not in the registry.
func (e *Engine) schemaCheck(key string) (cs *compiledSchema, ok bool, err error) {
	t, err := embeddedChecks()
	if err != nil {
		return nil, false, err
	}
	l, ok := t.kinds[key]
	if !ok {
		return nil, false, nil
	}
	cs, err = l.get()
	return cs, true, err
}

// registrySchemas loads the CUE schema registry on first use.
func (e *Engine) registrySchemas() (map[string]cue.Value, error) {
	e.registryOnce.Do(func() {
		insts := load.Instances([]string{"./registry"}, e.module.config(nil))
		if err := insts[0].Err; err != nil {
			e.registryErr = fmt.Errorf("load CUE package ./registry: %s", cueerrors.Details(err, nil))
			return
		}
		v := e.ctx.BuildInstance(insts[0])
		if err := v.Err(); err != nil {
			e.registryErr = fmt.Errorf("build CUE package ./registry: %s", cueerrors.Details(err, nil))
			return
		}
		kinds, err := v.LookupPath(cue.ParsePath("kinds")).Fields()
		if err != nil {
			e.registryErr = fmt.Errorf("schema registry: %w", err)
			return
		}
		e.registry = map[string]cue.Value{}
		for kinds.Next() {
			e.registry[kinds.Selector().Unquoted()] = kinds.Value()
		}
	})
	return e.registry, e.registryErr
}

// Option configures an Engine.
type Option func(*engineOptions)

type engineOptions struct {
	catalogs     []fs.FS
	catalogNames []string
	// cueChecks (tests) loads the templates with the build tag `contract`,
	// which unifies every input with its closed CUE definition, and checks
	// rendered objects with the CUE schema registry instead of the
	// compiled checks.
	cueChecks bool
}

// WithCatalog adds a user catalog: a file system whose top-level *.cue files
// form a CUE package `catalog` with `entries: <name>: {...}` (see the
// built-in catalog for the shape). Entries of later catalogs take precedence
// over earlier ones and over the built-in catalog; an entry that replaces
// one must say so with `override: true`. name says where the catalog comes
// from (a directory, a Flux source): errors in its files are reported under
// it.
//
// New evaluates the catalog's CUE in this process, without a bound on time
// or memory: CUE has neither cancellation nor a memory cap, and a few lines
// of CUE can take gigabytes. Load a catalog you do not trust with
// CatalogBound.New instead, which evaluates it first in a child process
// with limits.
func WithCatalog(name string, fsys fs.FS) Option {
	return func(o *engineOptions) {
		o.catalogs = append(o.catalogs, fsys)
		o.catalogNames = append(o.catalogNames, name)
	}
}

// New loads the embedded templates, schemas, catalog and CRDs.
func New(opts ...Option) (*Engine, error) {
	var o engineOptions
	for _, opt := range opts {
		opt(&o)
	}
	e, err := newEngine(o)
	if err != nil {
		return nil, userCatalogError(err, o.catalogNames)
	}
	return e, nil
}

// userCatalogError names user catalog files in err as the user knows them,
// not by their place in the engine's CUE module.
func userCatalogError(err error, names []string) error {
	msg := err.Error()
	for i, name := range names {
		msg = strings.ReplaceAll(msg, path.Join(moduleRoot, userCatalogDir(i))+"/", strings.TrimSuffix(name, "/")+"/")
		msg = strings.ReplaceAll(msg, fmt.Sprintf("catalog %d:", i), fmt.Sprintf("catalog %s:", name))
	}
	return errors.New(msg)
}

// userCatalogDir is where user catalog i sits in the engine's CUE module,
// relative to its root.
func userCatalogDir(i int) string { return fmt.Sprintf("usercatalog%d", i) }

// The engine's CUE module: its path, and the directory of the embedded
// schemas in it.
const (
	modulePath = "scribe.dev/templates"
	schemasDir = "schemas"
)

// cueModule is the CUE module an engine loads its packages from: the
// embedded schemas, templates and built-in catalog, and the user catalogs,
// in an in-memory file system. Loading reads nothing else: load.Config.FS
// keeps CUE off the host's file system (no module file, catalog or
// cue.mod/local-module.cue of the host can join or break it), unlike
// load.Config.Overlay, which lays its files over the host's.
//
// The schemas are the module's packages under schemasDir, not cue.mod/gen:
// cue/load v0.17.1 cannot load a package of cue.mod/gen from a
// load.Config.FS ("cannot get absolute path for FS of type
// *load.fsIOFS"). The templates import them by their own paths
// ("k8s.io/api/core/v1"), as cue.mod/gen would have them: parseFile turns
// such an import into the module's ("scribe.dev/templates/schemas/k8s.io/api/core/v1").
type cueModule struct {
	fsys    *memFS
	root    string          // the module's directory in fsys, absolute (moduleRoot)
	schemas map[string]bool // import paths of the schema packages
}

// config is the load configuration of the module's packages.
func (m *cueModule) config(tags []string) *load.Config {
	return &load.Config{FS: m.fsys, Dir: m.root, Tags: tags, ParseFile: m.parseFile}
}

// parseFile parses a CUE file as cue/load would, and points its imports of
// schema packages at the module's schemasDir.
func (m *cueModule) parseFile(name string, src any, cfg parser.Config) (*ast.File, error) {
	f, err := parser.ParseFile(name, src, cfg)
	if f == nil {
		return f, err
	}
	for d := range f.ImportDecls() {
		for _, spec := range d.Specs {
			if spec.Path == nil {
				continue
			}
			p, uerr := cueliteral.Unquote(spec.Path.Value)
			if uerr != nil {
				continue
			}
			if ip := ast.ParseImportPath(p); ip.Version != "" || !m.schemas[ip.Path] {
				continue
			}
			spec.Path.Value = cueliteral.String.Quote(modulePath + "/" + schemasDir + "/" + p)
		}
	}
	return f, err
}

// newCUEModule builds the CUE module of the embedded files (schemas and
// templates, hashed into h) and the user catalogs, at root in its file
// system.
func newCUEModule(root string, catalogs []fs.FS, h interface{ Write([]byte) (int, error) }) (*cueModule, error) {
	m := &cueModule{fsys: newMemFS(), root: path.Clean("/" + root), schemas: map[string]bool{}}
	modFile := path.Join(strings.TrimPrefix(m.root, "/"), "cue.mod/module.cue")
	if err := m.fsys.add(modFile, []byte("module: \""+modulePath+"@v0\"\nlanguage: version: \"v0.17.0\"\n")); err != nil {
		return nil, err
	}
	schemaFiles, err := m.add(schemas.FS, schemasDir, h)
	if err != nil {
		return nil, err
	}
	for _, p := range schemaFiles {
		m.schemas[path.Dir(p)] = true
	}
	if _, err := m.add(templates.FS, ".", h); err != nil {
		return nil, err
	}
	// The built-in entries ship in the catalog directory, beside the
	// manifests they deliver; they join templates/catalog's schema.
	builtin, err := fs.Sub(catalog.FS, catalog.BuiltinDir)
	if err != nil {
		return nil, fmt.Errorf("built-in catalog: %w", err)
	}
	if _, err := m.add(builtin, "catalog", h); err != nil {
		return nil, err
	}
	for i, c := range catalogs {
		if _, err := m.add(c, userCatalogDir(i), nil); err != nil {
			return nil, fmt.Errorf("catalog %d: %w", i, err)
		}
	}
	return m, nil
}

// loadedCatalogs are the catalog packages of an engine.
type loadedCatalogs struct {
	entrySchema cue.Value
	// entries holds the entries values, highest precedence first: the
	// user catalogs, last given first, then the built-in one.
	entries []cue.Value
	// packages are the user catalogs' package values, in the order given.
	packages []cue.Value
}

// loadCatalogs builds the built-in catalog and the n user catalogs of
// module, checks every user entry against #Entry, and checks that an entry
// replacing one of a lower-precedence catalog says `override: true`.
func loadCatalogs(ctx *cue.Context, module *cueModule, names []string) (*loadedCatalogs, error) {
	n := len(names)
	pkgs := []string{"./catalog"}
	for i := range n {
		pkgs = append(pkgs, "./"+userCatalogDir(i))
	}
	insts := load.Instances(pkgs, module.config(nil))
	values := make([]cue.Value, len(insts))
	for i, inst := range insts {
		if inst.Err != nil {
			return nil, fmt.Errorf("load CUE package %s: %s", pkgs[i], cueerrors.Details(inst.Err, nil))
		}
		v := ctx.BuildInstance(inst)
		if err := v.Err(); err != nil {
			return nil, fmt.Errorf("build CUE package %s: %s", pkgs[i], cueerrors.Details(err, nil))
		}
		values[i] = v
	}
	lc := &loadedCatalogs{
		entrySchema: values[0].LookupPath(cue.MakePath(cue.Def("#Entry"))),
		packages:    values[1:],
	}
	builtin := values[0].LookupPath(cue.ParsePath("entries"))
	user := make([]cue.Value, n)
	for i := range n {
		user[i] = values[1+i].LookupPath(cue.ParsePath("entries"))
		if err := checkCatalog(lc.entrySchema, user[i]); err != nil {
			return nil, fmt.Errorf("catalog %d: %w", i, err)
		}
		if err := checkOverrides(user[i], builtin, user[:i], names[:i]); err != nil {
			return nil, fmt.Errorf("catalog %d: %w", i, err)
		}
	}
	for i := n - 1; i >= 0; i-- {
		lc.entries = append(lc.entries, user[i])
	}
	lc.entries = append(lc.entries, builtin)
	return lc, nil
}

func newEngine(o engineOptions) (*Engine, error) {
	h := sha256.New()
	module, err := newCUEModule(moduleRoot, o.catalogs, h)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		ctx:             cuecontext.New(),
		templates:       map[string]cue.Value{},
		module:          module,
		templateVersion: "sha256:" + hex.EncodeToString(h.Sum(nil))[:16],
		cueCheck:        o.cueChecks,
	}
	lc, err := loadCatalogs(e.ctx, module, o.catalogNames)
	if err != nil {
		return nil, err
	}
	e.entrySchema, e.catalogs = lc.entrySchema, lc.entries
	for i := len(o.catalogNames) - 1; i >= 0; i-- {
		e.catalogFrom = append(e.catalogFrom, o.catalogNames[i])
	}
	e.catalogFrom = append(e.catalogFrom, "built-in")

	kinds := []string{"Workload", "Experiment"}
	pkgs := []string{"./workload", "./experiment"}
	var tags []string
	if o.cueChecks {
		tags = []string{"contract"}
	}
	insts := load.Instances(pkgs, module.config(tags))
	for i, inst := range insts {
		if inst.Err != nil {
			return nil, fmt.Errorf("load CUE package %s: %s", pkgs[i], cueerrors.Details(inst.Err, nil))
		}
		// Templates are incomplete without their input: checking them now
		// would evaluate (and cache) their comprehensions over an empty
		// input.
		e.templates[kinds[i]] = e.ctx.BuildInstance(inst)
	}

	e.validators, err = loadCRValidators(crd.Bases)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// TemplateVersion identifies the embedded templates and schemas.
func (e *Engine) TemplateVersion() string { return e.templateVersion }

// checkCatalog validates every entry of a user catalog against #Entry.
func checkCatalog(entrySchema, entries cue.Value) error {
	if !entries.Exists() {
		return fmt.Errorf("no `entries` field")
	}
	it, err := entries.Fields()
	if err != nil {
		return fmt.Errorf("entries: %w", err)
	}
	for it.Next() {
		if err := entrySchema.Unify(it.Value()).Validate(); err != nil {
			return fmt.Errorf("entry %q: %s", it.Selector().Unquoted(), cueerrors.Details(err, nil))
		}
	}
	return nil
}

// checkOverrides refuses an entry of a user catalog that replaces an entry
// of the built-in catalog or of an earlier user catalog without saying
// `override: true`: a catalog cannot silently shadow what the platform
// team vouched for.
func checkOverrides(entries, builtin cue.Value, earlier []cue.Value, earlierNames []string) error {
	it, err := entries.Fields()
	if err != nil {
		return fmt.Errorf("entries: %w", err)
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		sel := cue.MakePath(cue.Str(name))
		var replaces string
		if builtin.LookupPath(sel).Exists() {
			replaces = "the built-in catalog's entry"
		}
		for j, c := range earlier {
			if c.LookupPath(sel).Exists() {
				replaces = fmt.Sprintf("the entry of catalog %s", earlierNames[j])
			}
		}
		if replaces == "" {
			continue
		}
		if o, err := it.Value().LookupPath(cue.ParsePath("override")).Bool(); err == nil && o {
			continue
		}
		where := ""
		if f := it.Value().Pos().Filename(); f != "" {
			where = " in " + f
		}
		return fmt.Errorf("entry %q%s replaces %s of that name: add `override: true` to the entry to replace it on purpose, or rename it", name, where, replaces)
	}
	return nil
}

// add adds every .cue file of fsys under dir, relative to the module's
// root, and returns their paths in fsys; h, when set, hashes them.
func (m *cueModule) add(fsys fs.FS, dir string, h interface{ Write([]byte) (int, error) }) ([]string, error) {
	var files []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".cue") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk CUE files: %w", err)
	}
	sort.Strings(files)
	base := strings.TrimPrefix(path.Join(m.root, dir), "/")
	for _, p := range files {
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		if h != nil {
			_, _ = h.Write([]byte(p))
			_, _ = h.Write(data)
		}
		if err := m.fsys.add(path.Join(base, p), data); err != nil {
			return nil, err
		}
	}
	return files, nil
}
