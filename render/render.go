package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
	cuejson "cuelang.org/go/encoding/json"
	yamlv2 "go.yaml.in/yaml/v2"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render/contract"
)

// File is one file of a bundle, its path relative to the repository path.
type File struct {
	Path string
	Data []byte
}

// Bundle is the deterministic result of one render.
type Bundle struct {
	// Dir is `<namespace>/<kind>/<name>`, relative to the repository path.
	Dir string
	// Files, sorted by path: Dir/kustomization.yaml, Dir/<kind>-<name>.yaml,
	// Dir/.scribe.json and Dir + ".sync.yaml"; for an Experiment also its
	// hydrated catalog components, Dir/components/<target>/<component>/
	// and Dir/validation/<template>/ (see hydrateComponent).
	Files []File
	// Digest is sha256 over every file but .scribe.json (which records it).
	Digest string
	// Objects rendered into Dir, in file order.
	Objects []scribev1.ObjectIdentity
	// Sync identifies the applier object written to Dir + ".sync.yaml".
	Sync scribev1.ObjectIdentity
	// SyncFile is the repository path of Dir + ".sync.yaml" (the publish
	// path joined), as the template computes it for the applier object's
	// own path: the one formula of it.
	SyncFile string
	// SyncSource, when set, is the custom resource's own Flux source
	// (see contract.FluxGitSource) or Argo CD AppProject, written to the
	// same file before Sync.
	SyncSource *scribev1.ObjectIdentity
	// Source is the custom resource the bundle was rendered from.
	Source scribev1.ObjectIdentity
	// ReadBack names, for the controller, the objects whose status moves
	// the source on: decoded from the template's readBack section.
	ReadBack contract.ReadBack
	// Generation is the source's metadata.generation (0 when it has none, as
	// in a file that never went through an apiserver). It is not part of the
	// Digest: a new generation with the same output changes nothing.
	Generation int64
}

// Provenance is the content of .scribe.json.
type Provenance struct {
	APIVersion      string                  `json:"apiVersion"`
	Kind            string                  `json:"kind"`
	Source          scribev1.ObjectIdentity `json:"source"`
	TemplateVersion string                  `json:"templateVersion"`
	Digest          string                  `json:"digest"`
}

// Render decodes in.Object into its typed input (validated and defaulted
// as the kube-apiserver would, see Decode) and renders it: a Workload with
// the split in its status.traffic and status.stableVersion, if any, an
// Experiment with in.Resolved.
func (e *Engine) Render(ctx context.Context, in Input) (*Bundle, error) {
	d, err := e.decode(ctx, in.Object)
	if err != nil {
		return nil, err
	}
	switch o := d.typed.(type) {
	case *scribev1.Workload:
		return e.renderWorkload(ctx, d, WorkloadInput{Workload: o, Traffic: o.Status.Traffic, Stable: o.Status.StableVersion, Publish: in.Publish}, "status.traffic")
	case *scribev1.Experiment:
		return e.renderExperiment(ctx, d, ExperimentInput{Experiment: o, Publish: in.Publish, Resolved: in.Resolved, Stage: in.Stage})
	}
	return nil, fmt.Errorf("render %s: no template for %T", d.name, d.typed)
}

// RenderWorkload renders one Workload with the split in.Traffic.
func (e *Engine) RenderWorkload(ctx context.Context, in WorkloadInput) (*Bundle, error) {
	if in.Workload == nil {
		return nil, errors.New("render: WorkloadInput without a Workload")
	}
	obj, err := crObject(in.Workload, scribev1.WorkloadKind, &in.Workload.Spec)
	if err != nil {
		return nil, err
	}
	d, err := e.decode(ctx, obj)
	if err != nil {
		return nil, err
	}
	return e.renderWorkload(ctx, d, in, "traffic")
}

// RenderExperiment renders one Experiment.
func (e *Engine) RenderExperiment(ctx context.Context, in ExperimentInput) (*Bundle, error) {
	if in.Experiment == nil {
		return nil, errors.New("render: ExperimentInput without an Experiment")
	}
	obj, err := crObject(in.Experiment, scribev1.ExperimentKind, &in.Experiment.Spec)
	if err != nil {
		return nil, err
	}
	d, err := e.decode(ctx, obj)
	if err != nil {
		return nil, err
	}
	return e.renderExperiment(ctx, d, in)
}

// Decode validates and defaults a JSON-shaped custom resource exactly as
// the kube-apiserver does on create (the generated CRD's schema, unknown
// fields, CEL rules, defaults) and decodes it into its typed form, a
// *v1alpha1.Workload or *v1alpha1.Experiment. Errors are *InputError,
// naming the CR's fields.
func (e *Engine) Decode(ctx context.Context, obj map[string]any) (client.Object, error) {
	d, err := e.decode(ctx, obj)
	if err != nil {
		return nil, err
	}
	return d.typed, nil
}

// decoded is a custom resource after the apiserver's validation: the
// defaulted JSON shape and the typed object decoded from it.
type decoded struct {
	obj   map[string]any
	typed client.Object
	kind  string
	name  string // Kind/namespace/name, for messages
	// elsewhere is the one namespace besides the CR's own that some of
	// its objects render into, and the kinds (apiVersion and kind) that
	// may: an Experiment's Testkube objects go into Testkube's namespace.
	elsewhere *elsewhere
	// extra are files written beside the rendered objects, paths relative
	// to the bundle's directory: an Experiment's hydrated catalog
	// components (subdirectories its own kustomization.yaml does not
	// list, each applied by the component's delivery).
	extra []File
}

// elsewhere is a namespace besides a CR's own and the kinds rendered into it.
type elsewhere struct {
	namespace string
	kinds     map[[2]string]bool
	// why says, in a refusal, what the namespace is for.
	why string
}

// allows reports whether an object of apiVersion and kind may be rendered
// into namespace ns.
func (x *elsewhere) allows(apiVersion, kind, ns string) bool {
	return x != nil && ns == x.namespace && x.kinds[[2]string{apiVersion, kind}]
}

// Validate validates and defaults a JSON-shaped custom resource of any
// kind of Scribe's API (Workload, Experiment, Pipeline, Repository,
// TenantPolicy) exactly as Decode does, and decodes it into its typed
// form. Errors are *InputError, naming the CR's fields. Only Workloads and
// Experiments render; the other kinds are checked as the apiserver would
// admit them.
func (e *Engine) Validate(ctx context.Context, obj map[string]any) (client.Object, error) {
	d, err := e.decodeKind(ctx, obj, false)
	if err != nil {
		return nil, err
	}
	return d.typed, nil
}

// apiKind is the typed form of a kind of Scribe's API, and whether it is
// namespaced, or nil for a kind that is not one.
func apiKind(kind string) (typed client.Object, namespaced bool) {
	switch kind {
	case scribev1.WorkloadKind:
		return &scribev1.Workload{}, true
	case scribev1.ExperimentKind:
		return &scribev1.Experiment{}, true
	case scribev1.PipelineKind:
		return &scribev1.Pipeline{}, true
	case scribev1.RepositoryKind:
		return &scribev1.Repository{}, true
	case scribev1.TenantPolicyKind:
		return &scribev1.TenantPolicy{}, false
	}
	return nil, false
}

func (e *Engine) decode(ctx context.Context, in map[string]any) (*decoded, error) {
	return e.decodeKind(ctx, in, true)
}

// decodeKind is decode for the kinds render renders (renderable) or for
// every kind of Scribe's API.
func (e *Engine) decodeKind(ctx context.Context, in map[string]any, renderable bool) (*decoded, error) {
	obj, _ := deepCopyJSON(in).(map[string]any)
	if obj == nil {
		obj = map[string]any{}
	}
	name := objectName(obj)
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion != scribev1.GroupVersion.String() {
		return nil, &InputError{Object: name, Errors: []FieldError{{Path: "apiVersion", Message: fmt.Sprintf("must be %s, not %q", scribev1.GroupVersion, apiVersion)}}}
	}
	typed, namespaced := apiKind(kind)
	switch {
	case renderable && kind != scribev1.WorkloadKind && kind != scribev1.ExperimentKind:
		return nil, &InputError{Object: name, Errors: []FieldError{{Path: "kind", Message: fmt.Sprintf("Scribe renders Workload and Experiment, not %q", kind)}}}
	case typed == nil:
		return nil, &InputError{Object: name, Errors: []FieldError{{Path: "kind", Message: fmt.Sprintf("Scribe's kinds are Workload, Experiment, Pipeline, Repository and TenantPolicy, not %q", kind)}}}
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	ns, _ := md["namespace"].(string)
	switch {
	case namespaced && ns == "":
		md["namespace"] = "default"
	case !namespaced && ns != "":
		// The apiserver ignores it; a file that sets it misleads its reader.
		return nil, &InputError{Object: name, Errors: []FieldError{{Path: "metadata.namespace", Message: fmt.Sprintf("Forbidden: %s is cluster-scoped", kind)}}}
	}
	if n, _ := md["name"].(string); n == "" {
		return nil, &InputError{Object: name, Errors: []FieldError{{Path: "metadata.name", Message: "Required value"}}}
	}
	name = objectName(obj)

	// The apiserver validates metadata before the CRD's schema.
	errs := validateCRMetadata(md, namespaced)
	v := e.validators[scribev1.GroupVersion.Group+"/"+scribev1.GroupVersion.Version+"/"+kind]
	errs = append(errs, v.validate(ctx, obj)...)
	if len(errs) > 0 {
		return nil, &InputError{Object: name, Errors: errs}
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", name, err)
	}
	if len(data) > maxObjectBytes {
		return nil, &InputError{Object: name, Errors: []FieldError{{Message: fmt.Sprintf("the custom resource is %d bytes as JSON, over the %d bytes the apiserver stores", len(data), maxObjectBytes)}}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(typed); err != nil {
		return nil, &InputError{Object: name, Errors: []FieldError{{Path: "", Message: err.Error()}}}
	}
	// What the CRD cannot say: checked in Go before any template runs.
	if x, ok := typed.(*scribev1.Experiment); ok {
		if errs := append(dependsCycles(x), duplicateComponents(x)...); len(errs) > 0 {
			return nil, &InputError{Object: name, Errors: errs}
		}
	}
	return &decoded{obj: obj, typed: typed, kind: kind, name: name}, nil
}

// crObject is the JSON shape of a typed custom resource as render
// validates it: apiVersion, kind, spec, and only the metadata the
// templates and provenance use (status and the rest of metadata are never
// encoded).
func crObject(o client.Object, kind string, spec any) (map[string]any, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode spec of %s/%s: %w", o.GetNamespace(), o.GetName(), err)
	}
	var specJSON any
	if err := utiljson.Unmarshal(raw, &specJSON); err != nil {
		return nil, fmt.Errorf("decode spec of %s/%s: %w", o.GetNamespace(), o.GetName(), err)
	}
	md := map[string]any{"name": o.GetName(), "namespace": o.GetNamespace()}
	if len(o.GetLabels()) > 0 {
		labels := make(map[string]any, len(o.GetLabels()))
		for k, v := range o.GetLabels() {
			labels[k] = v
		}
		md["labels"] = labels
	}
	if g := o.GetGeneration(); g != 0 {
		md["generation"] = g
	}
	return map[string]any{
		"apiVersion": scribev1.GroupVersion.String(),
		"kind":       kind,
		"metadata":   md,
		"spec":       specJSON,
	}, nil
}

// metadataOf is the metadata the templates see.
func metadataOf(o client.Object) contract.Metadata {
	return contract.Metadata{Name: o.GetName(), Namespace: o.GetNamespace(), Labels: o.GetLabels()}
}

// renderBundle evaluates the template of d's kind with input and checks
// every object it yields.
func (e *Engine) renderBundle(ctx context.Context, d *decoded, input any) (*Bundle, error) {
	name := d.name
	tmpl, ok := e.templates[d.kind]
	if !ok {
		return nil, fmt.Errorf("render %s: no template for %s", name, d.kind)
	}
	ns, nm := d.typed.GetNamespace(), d.typed.GetName()

	// The input goes in as a CUE expression built from its JSON data:
	// cue.Context.Encode of nested Go maps made CUE v0.17 report fields of
	// the input as undefined inside the templates' definitions.
	inVal, err := inputValue(e.ctx, input)
	if err != nil {
		return nil, fmt.Errorf("render %s: encode input: %w", name, err)
	}
	filled := tmpl.Unify(inVal)
	if err := filled.LookupPath(fieldPath(fieldInput)).Err(); err != nil {
		return nil, &InputError{Object: name, Errors: cueFieldErrors(err, 1, "")}
	}
	objects := filled.LookupPath(fieldPath(fieldObjects))
	var values []cue.Value
	var keys []string
	it, err := objects.Fields()
	if err != nil {
		return nil, fmt.Errorf("render %s: template %s: %s", name, strings.ToLower(d.kind), cueerrors.Details(err, nil))
	}
	for it.Next() {
		values = append(values, it.Value())
		keys = append(keys, it.Selector().Unquoted())
	}
	sync := filled.LookupPath(fieldPath(fieldSync))

	b := &Bundle{
		Dir:        fmt.Sprintf("%s/%s/%s", ns, strings.ToLower(d.kind), nm),
		Source:     scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: d.kind, Namespace: ns, Name: nm},
		Generation: d.typed.GetGeneration(),
	}
	rendered := map[string][]byte{}
	byKey := make(map[string]scribev1.ObjectIdentity, len(values))
	for i, val := range values {
		// CUE cannot be interrupted; between objects the render can, so
		// that a cancelled reconcile (a manager stopping) is not held
		// for the rest of a large Experiment.
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		c, err := e.checkObject(name, d.obj, val)
		if err != nil {
			return nil, err
		}
		id, data := c.id, c.data
		if id.Namespace != ns && !d.elsewhere.allows(id.APIVersion, id.Kind, id.Namespace) {
			also := ""
			if d.elsewhere != nil {
				also = fmt.Sprintf(" (and only its %s into %q)", d.elsewhere.why, d.elsewhere.namespace)
			}
			return nil, fmt.Errorf("render %s: %s %s is in namespace %q: a CR renders only into its own namespace%s", name, id.Kind, id.Name, id.Namespace, also)
		}
		file := strings.ToLower(id.Kind) + "-" + id.Name + ".yaml"
		if _, dup := rendered[file]; dup {
			return nil, fmt.Errorf("render %s: two objects would be written to %s", name, file)
		}
		rendered[file] = data
		b.Objects = append(b.Objects, id)
		byKey[keys[i]] = id
	}
	syncObj, err := e.checkObject(name, d.obj, sync)
	if err != nil {
		return nil, err
	}
	syncID, syncData := syncObj.id, syncObj.data
	b.Sync = syncID
	if b.SyncFile, err = filled.LookupPath(fieldPath(fieldSyncFile)).String(); err != nil {
		return nil, fmt.Errorf("render %s: template %s: %s: %s", name, strings.ToLower(d.kind), fieldSyncFile, cueerrors.Details(err, nil))
	}
	if src := filled.LookupPath(fieldPath(fieldSyncSource)); src.Exists() {
		srcObj, err := e.checkObject(name, d.obj, src)
		if err != nil {
			return nil, err
		}
		srcID := srcObj.id
		// An Argo CD Application's AppProject lives in Argo CD's
		// namespace, the Application in the custom resource's.
		argoProject := srcID.Kind == "AppProject" && syncID.Kind == "Application" && syncID.Namespace == ns
		if srcID.Namespace != syncID.Namespace && !argoProject {
			return nil, fmt.Errorf("render %s: template %s: sync source %s/%s is not in the namespace of its %s", name, strings.ToLower(d.kind), srcID.Namespace, srcID.Name, syncID.Kind)
		}
		b.SyncSource = &srcID
		// One file, the source first: the root applier creates both.
		if syncData, err = yamlStream(srcObj.obj, syncObj.obj); err != nil {
			return nil, fmt.Errorf("render %s: %s.sync.yaml: %w", name, b.Dir, err)
		}
	}
	if b.ReadBack, err = readBackOf(filled, b.Sync, byKey); err != nil {
		return nil, fmt.Errorf("render %s: template %s: %w", name, strings.ToLower(d.kind), err)
	}
	fileNames := make([]string, 0, len(rendered))
	for f := range rendered {
		fileNames = append(fileNames, f)
	}
	sort.Strings(fileNames)
	sort.Slice(b.Objects, func(i, j int) bool {
		return strings.ToLower(b.Objects[i].Kind)+"-"+b.Objects[i].Name < strings.ToLower(b.Objects[j].Kind)+"-"+b.Objects[j].Name
	})
	kustomization, err := kustomizationOf(fileNames)
	if err != nil {
		return nil, fmt.Errorf("render %s: kustomization.yaml: %w", name, err)
	}
	for _, f := range fileNames {
		b.Files = append(b.Files, File{Path: b.Dir + "/" + f, Data: rendered[f]})
	}
	b.Files = append(b.Files, File{Path: b.Dir + "/kustomization.yaml", Data: kustomization})
	b.Files = append(b.Files, File{Path: b.Dir + ".sync.yaml", Data: syncData})
	for _, f := range d.extra {
		b.Files = append(b.Files, File{Path: b.Dir + "/" + f.Path, Data: f.Data})
	}

	h := sha256.New()
	sortFiles(b.Files)
	for _, f := range b.Files {
		_, _ = fmt.Fprintf(h, "%s\x00%d\x00", f.Path, len(f.Data)) // hash.Hash never fails
		h.Write(f.Data)
	}
	b.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	prov, err := json.MarshalIndent(Provenance{
		APIVersion:      scribev1.GroupVersion.String(),
		Kind:            "Provenance",
		Source:          b.Source,
		TemplateVersion: e.templateVersion,
		Digest:          b.Digest,
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render %s: provenance: %w", name, err)
	}
	b.Files = append(b.Files, File{Path: b.Dir + "/.scribe.json", Data: append(prov, '\n')})
	sortFiles(b.Files)
	return b, nil
}

// kustomizationOf is the kustomization.yaml of a directory whose
// resources are files, in that order.
func kustomizationOf(files []string) ([]byte, error) {
	resources := make([]any, len(files))
	for i, f := range files {
		resources[i] = f
	}
	return yamlStream(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  resources,
	})
}

func sortFiles(files []File) {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
}

// checked is a rendered object that passed checkObject.
type checked struct {
	id   scribev1.ObjectIdentity
	obj  map[string]any // the object as JSON data (numbers as json.Number)
	data []byte         // its YAML, keys sorted
}

// checkObject validates one rendered object against the closed schema of its
// kind and the kube-apiserver's rules for it (apirules.go), and returns its
// identity, data and YAML with sorted keys. src is the custom resource's
// JSON, to name the field a refused value came from (nil when there is
// none).
func (e *Engine) checkObject(owner string, src map[string]any, val cue.Value) (checked, error) {
	// The object's data, and its identity read from it; an object whose
	// data does not name its apiVersion and kind is looked up field by
	// field, for errors that say what is missing. The checks and their
	// order are the same either way.
	raw, marshalErr := val.MarshalJSON()
	var m map[string]any
	var decodeErr error
	if marshalErr == nil {
		m, decodeErr = decodeObject(raw)
	}
	id, ok := identityOf(m)
	if !ok {
		var err error
		if id.APIVersion, err = val.LookupPath(fieldPath("apiVersion")).String(); err != nil {
			return checked{id: id}, fmt.Errorf("render %s: object without apiVersion: %s", owner, cueerrors.Details(err, nil))
		}
		if id.Kind, err = val.LookupPath(fieldPath("kind")).String(); err != nil {
			return checked{id: id}, fmt.Errorf("render %s: object without kind: %s", owner, cueerrors.Details(err, nil))
		}
		id.Name, _ = val.LookupPath(fieldPath("metadata", "name")).String()
		id.Namespace, _ = val.LookupPath(fieldPath("metadata", "namespace")).String()
	}
	if id.Kind == "Secret" {
		return checked{id: id}, fmt.Errorf("render %s: refusing to render Secret %s: Scribe never writes Secret data to Git", owner, id.Name)
	}
	key := id.APIVersion + "/" + id.Kind
	cs, ok, err := e.schemaCheck(key)
	if err != nil {
		return checked{id: id}, fmt.Errorf("render %s: schema of %s %s: %w", owner, id.APIVersion, id.Kind, err)
	}
	if !ok {
		return checked{id: id}, fmt.Errorf("render %s: no schema for %s %s: every rendered kind must be in templates/registry", owner, id.APIVersion, id.Kind)
	}
	if marshalErr != nil {
		return checked{id: id}, fmt.Errorf("render %s: template produced an incomplete %s %s: %s", owner, id.Kind, id.Name, cueerrors.Details(marshalErr, nil))
	}
	if decodeErr != nil {
		return checked{id: id}, fmt.Errorf("render %s: decode %s %s: %w", owner, id.Kind, id.Name, decodeErr)
	}
	// Check the object as plain data against the compiled schema of its
	// kind (schemacheck.go); CUE's own check stays for tests.
	var errs []FieldError
	if e.cueCheck {
		reg, err := e.registrySchemas()
		if err != nil {
			return checked{id: id}, fmt.Errorf("render %s: %w", owner, err)
		}
		errs = e.checkWithCUE(reg[key], raw)
	} else {
		errs = cs.check(m)
	}
	if len(errs) > 0 {
		msgs := make([]string, 0, len(errs))
		for _, fe := range errs {
			msgs = append(msgs, fe.Error())
		}
		return checked{id: id}, fmt.Errorf("render %s: rendered %s %s/%s does not match its schema:\n  %s", owner, id.Kind, id.Namespace, id.Name, strings.Join(msgs, "\n  "))
	}
	if vs := apiRules(id.APIVersion, id.Kind, m, len(raw)); len(vs) > 0 {
		return checked{id: id}, apiRulesError(owner, src, id, vs)
	}
	data, err := yamlStream(m)
	if err != nil {
		return checked{id: id}, fmt.Errorf("render %s: YAML of %s %s: %w", owner, id.Kind, id.Name, err)
	}
	return checked{id: id, obj: m, data: data}, nil
}

// identityOf reads apiVersion, kind, metadata.name and metadata.namespace
// from an object's data; ok is false without a string apiVersion and kind.
func identityOf(m map[string]any) (id scribev1.ObjectIdentity, ok bool) {
	var okV, okK bool
	id.APIVersion, okV = m["apiVersion"].(string)
	id.Kind, okK = m["kind"].(string)
	if !okV || !okK {
		return scribev1.ObjectIdentity{}, false
	}
	md, _ := m["metadata"].(map[string]any)
	id.Name, _ = md["name"].(string)
	id.Namespace, _ = md["namespace"].(string)
	return id, true
}

// apiRulesError reports what the apiserver would refuse in a rendered
// object as an error of the custom resource: each line names the CR field
// the refused value came from, where it is found in the CR, then the
// rendered object and its field.
func apiRulesError(owner string, src map[string]any, id scribev1.ObjectIdentity, vs []apiViolation) error {
	errs := make([]FieldError, 0, len(vs))
	obj := id.Kind + " " + plainOrQuoted(id.Namespace) + "/" + plainOrQuoted(id.Name)
	if id.Namespace == "" {
		obj = id.Kind + " " + plainOrQuoted(id.Name)
	}
	for _, v := range vs {
		by := v.refusedBy
		if by == "" {
			by = "the kube-apiserver refuses it"
		}
		msg := "rendered " + obj + " " + v.err.Error() + ": " + by
		if v.err.Field == "<object>" {
			msg = "rendered " + obj + ": " + v.err.ErrorBody()
		}
		errs = append(errs, FieldError{Path: locateInCR(src, v.trace, v.prefix), Message: msg})
	}
	return &InputError{Object: owner, Errors: errs}
}

// checkWithCUE is the check the compiled schemas replace: the object's
// data unified with the closed CUE definition of its kind. Tests keep it
// as the reference (Engine.cueCheck).
func (e *Engine) checkWithCUE(schema cue.Value, raw []byte) []FieldError {
	err := schema.Unify(dataValue(e.ctx, raw)).Validate(cue.Concrete(true))
	if err == nil {
		return nil
	}
	errs := cueFieldErrors(err, 0, "")
	// Paths start at the registry entry: kinds."<apiVersion>/<Kind>"... or #<Kind>....
	for i := range errs {
		errs[i].Path = trimSchemaPrefix(errs[i].Path)
	}
	return errs
}

// trimSchemaPrefix drops the registry's part of a CUE error path.
func trimSchemaPrefix(p string) string {
	if rest, ok := strings.CutPrefix(p, "kinds."); ok {
		// kinds.<apiVersion>/<Kind>.<field path>: the key has a slash.
		if i := strings.LastIndex(rest, "/"); i >= 0 {
			if j := strings.IndexAny(rest[i:], ".["); j >= 0 {
				return strings.TrimPrefix(rest[i+j:], ".")
			}
			return ""
		}
	}
	return p
}

// inputValue is the CUE value {input: v}, v as encoding/json encodes it,
// every object's keys sorted, so the order of fields in the Go types never
// shows in what the templates produce (CUE keeps the input's field order,
// for example in json.Marshal). The value is built from a syntax tree of
// the JSON data, the tree encoding/json/Extract parses from its text,
// without printing and parsing that text.
func inputValue(ctx *cue.Context, v any) (cue.Value, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return cue.Value{}, err
	}
	generic, err := decodeObject(raw)
	if err != nil {
		return cue.Value{}, err
	}
	x, err := jsonExpr(generic)
	if err != nil {
		return cue.Value{}, err
	}
	val := ctx.BuildExpr(&ast.StructLit{Elts: []ast.Decl{&ast.Field{Label: ast.NewString(fieldInput), Value: x}}})
	return val, val.Err()
}

// jsonExpr is the CUE expression of JSON data decoded with json.Number:
// what the CUE parser makes of its JSON text, object keys sorted.
func jsonExpr(v any) (ast.Expr, error) {
	switch t := v.(type) {
	case nil:
		return ast.NewNull(), nil
	case bool:
		return ast.NewBool(t), nil
	case string:
		return ast.NewString(t), nil
	case json.Number:
		s := string(t)
		neg := strings.HasPrefix(s, "-")
		kind := token.INT
		if strings.ContainsAny(s, ".eE") {
			kind = token.FLOAT
		}
		lit := &ast.BasicLit{Kind: kind, Value: strings.TrimPrefix(s, "-")}
		if neg {
			return &ast.UnaryExpr{Op: token.SUB, X: lit}, nil
		}
		return lit, nil
	case []any:
		elts := make([]ast.Expr, len(t))
		for i, e := range t {
			x, err := jsonExpr(e)
			if err != nil {
				return nil, err
			}
			elts[i] = x
		}
		return &ast.ListLit{Elts: elts}, nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		decls := make([]ast.Decl, len(keys))
		for i, k := range keys {
			x, err := jsonExpr(t[k])
			if err != nil {
				return nil, err
			}
			decls[i] = &ast.Field{Label: ast.NewString(k), Value: x}
		}
		return &ast.StructLit{Elts: decls}, nil
	}
	return nil, fmt.Errorf("unexpected %T in JSON data", v)
}

// readBackOf decodes the template's readBack section and fills in the
// identity of every object it names by key; a key the render has no
// object under is a template error.
func readBackOf(filled cue.Value, sync scribev1.ObjectIdentity, byKey map[string]scribev1.ObjectIdentity) (contract.ReadBack, error) {
	var rb contract.ReadBack
	raw, err := filled.LookupPath(fieldPath(fieldReadBack)).MarshalJSON()
	if err != nil {
		return rb, fmt.Errorf("readBack: %s", cueerrors.Details(err, nil))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rb); err != nil {
		return rb, fmt.Errorf("decode readBack: %w", err)
	}
	rb.Sync = contract.ObjectRef{Key: "sync", APIVersion: sync.APIVersion, Kind: sync.Kind, Namespace: sync.Namespace, Name: sync.Name}
	var errs []error
	fill := func(field string, r *contract.ObjectRef) {
		if r == nil {
			return
		}
		id, ok := byKey[r.Key]
		if !ok {
			errs = append(errs, fmt.Errorf("%s names %q, which is not among the rendered objects", field, r.Key))
			return
		}
		r.APIVersion, r.Kind, r.Namespace, r.Name = id.APIVersion, id.Kind, id.Namespace, id.Name
	}
	for i := range rb.Deployments {
		fill(fmt.Sprintf("readBack.deployments[%d]", i), &rb.Deployments[i].Deployment)
	}
	for i := range rb.Targets {
		fill(fmt.Sprintf("readBack.targets[%d].cluster", i), rb.Targets[i].Cluster)
		for j := range rb.Targets[i].Components {
			fill(fmt.Sprintf("readBack.targets[%d].components[%d].delivery", i, j), rb.Targets[i].Components[j].Delivery)
		}
	}
	fill("readBack.workflow", rb.Workflow)
	for i := range rb.Templates {
		fill(fmt.Sprintf("readBack.templates[%d].delivery", i), rb.Templates[i].Delivery)
	}
	for i := range rb.Runs {
		fill(fmt.Sprintf("readBack.runs[%d].workflow", i), &rb.Runs[i].Workflow)
	}
	return rb, errors.Join(errs...)
}

// SyncObject names the applier object (Flux Kustomization or Argo CD
// Application) the template of src's kind writes for src under pub,
// without rendering the rest: for a controller that must find it when
// nothing else of the render is at hand (a CR deleted before its first
// render was recorded).
func (e *Engine) SyncObject(src scribev1.ObjectIdentity, pub Publish) (scribev1.ObjectIdentity, error) {
	tmpl, ok := e.templates[src.Kind]
	if !ok {
		return scribev1.ObjectIdentity{}, fmt.Errorf("sync object of %s/%s: no template for %q", src.Namespace, src.Name, src.Kind)
	}
	if errs := checkPublish(pub); len(errs) > 0 {
		return scribev1.ObjectIdentity{}, &InputError{Object: src.Kind + "/" + src.Namespace + "/" + src.Name, Errors: errs}
	}
	in, err := inputValue(e.ctx, map[string]any{
		"metadata": contract.Metadata{Name: src.Name, Namespace: src.Namespace},
		"publish":  pub,
	})
	if err != nil {
		return scribev1.ObjectIdentity{}, fmt.Errorf("sync object of %s/%s: %w", src.Namespace, src.Name, err)
	}
	sync := tmpl.Unify(in).LookupPath(fieldPath(fieldSync))
	c, err := e.checkObject(src.Kind+"/"+src.Namespace+"/"+src.Name, nil, sync)
	return c.id, err
}

// dataValue is the CUE value of JSON data. It is built as an expression,
// not compiled as a file: cue.Context.CompileBytes registers every file it
// compiles in the context for good, so a shared engine would keep every
// input it ever rendered (~64 KiB per render).
func dataValue(ctx *cue.Context, data []byte) cue.Value {
	expr, err := cuejson.Extract("input.json", data)
	if err != nil {
		return ctx.CompileBytes(data) // reports the syntax error
	}
	return ctx.BuildExpr(expr)
}

// yamlStream encodes JSON objects (decoded with json.Number) as one YAML
// stream, `---` between documents, each document byte for byte what
// sigs.k8s.io/yaml.Marshal writes: the same encoder (go.yaml.in/yaml/v2,
// map keys sorted) given the values its JSON-to-YAML step would have
// parsed, without the JSON text and its parse in between. appendYAML
// writes the documents whose every scalar it is certain of; the rest go
// through the encoder.
func yamlStream(objs ...map[string]any) ([]byte, error) {
	var out []byte
	for i, o := range objs {
		if i > 0 {
			if len(o) == 0 {
				out = nil
				break
			}
			out = append(out, "---\n"...)
		}
		var ok bool
		if out, ok = appendYAML(out, o); !ok {
			out = nil
			break
		}
	}
	if out != nil {
		return out, nil
	}
	return encodeYAMLStream(objs...)
}

// encodeYAMLStream is yamlStream through go.yaml.in/yaml/v2's encoder.
func encodeYAMLStream(objs ...map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yamlv2.NewEncoder(&buf)
	for i, o := range objs {
		doc, err := yamlValue(o)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if err := enc.Encode(doc); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// yamlValue is v as go.yaml.in/yaml/v2 decodes its JSON: a number is an
// int when it is a whole number in int64 range, else a uint64, else a
// float64; everything else is as encoding/json decodes it.
func yamlValue(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			c, err := yamlValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			c, err := yamlValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case json.Number:
		s := string(t)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return int(i), nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", s, err)
		}
		return f, nil
	case float64, string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected %T in JSON data", v)
}

// The fields of a kind's template (templates/<kind>/*.cue) that the
// engine fills and reads.
const (
	// fieldInput is filled with the render.Input of the CR.
	fieldInput = "input"
	// fieldObjects holds the rendered objects, by key.
	fieldObjects = "objects"
	// fieldSync is the per-CR applier object (Flux Kustomization, Argo CD
	// Application).
	fieldSync = "sync"
	// fieldSyncSource is the applier's source object, when the template
	// renders one.
	fieldSyncSource = "syncSource"
	// fieldSyncFile is the repository path of the file holding the
	// applier object (and its source).
	fieldSyncFile = "syncFile"
	// fieldReadBack says which rendered objects the controller reads back.
	fieldReadBack = "readBack"
)

// fieldPath is the CUE path of regular fields: cue.ParsePath parses its
// argument as a CUE expression on every call, a few percent of a render.
func fieldPath(names ...string) cue.Path {
	sels := make([]cue.Selector, len(names))
	for i, n := range names {
		sels[i] = cue.Str(n)
	}
	return cue.MakePath(sels...)
}
