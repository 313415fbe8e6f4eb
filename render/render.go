package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
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
	// Dir/.scribe.json and Dir + ".sync.yaml".
	Files []File
	// Digest is sha256 over every file but .scribe.json (which records it).
	Digest string
	// Objects rendered into Dir, in file order.
	Objects []scribev1.ObjectIdentity
	// Sync identifies the applier object written to Dir + ".sync.yaml".
	Sync scribev1.ObjectIdentity
	// Source is the custom resource the bundle was rendered from.
	Source scribev1.ObjectIdentity
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

// Render validates and renders one custom resource.
func (e *Engine) Render(ctx context.Context, in Input) (*Bundle, error) {
	obj := deepCopyJSON(in.Object).(map[string]any)
	name := objectName(obj)
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion != scribev1.GroupVersion.String() {
		return nil, &InputError{Object: name, Errors: []FieldError{{Path: "apiVersion", Message: fmt.Sprintf("must be %s, not %q", scribev1.GroupVersion, apiVersion)}}}
	}
	tmpl, ok := e.templates[kind]
	if !ok {
		return nil, &InputError{Object: name, Errors: []FieldError{{Path: "kind", Message: fmt.Sprintf("Scribe renders Workload and Experiment, not %q", kind)}}}
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	if ns, _ := md["namespace"].(string); ns == "" {
		md["namespace"] = "default"
	}
	if n, _ := md["name"].(string); n == "" {
		return nil, &InputError{Object: name, Errors: []FieldError{{Path: "metadata.name", Message: "Required value"}}}
	}
	name = objectName(obj)

	v := e.validators[scribev1.GroupVersion.Group+"/"+scribev1.GroupVersion.Version+"/"+kind]
	if errs := v.validate(ctx, obj); len(errs) > 0 {
		return nil, &InputError{Object: name, Errors: errs}
	}

	cueInput := map[string]any{
		"metadata": map[string]any{"name": md["name"], "namespace": md["namespace"]},
		"spec":     obj["spec"],
		"publish":  in.Publish,
	}
	if labels, ok := md["labels"]; ok {
		cueInput["metadata"].(map[string]any)["labels"] = labels
	}
	var errs []FieldError
	switch kind {
	case scribev1.WorkloadKind:
		errs = workloadInput(obj, cueInput)
	case scribev1.ExperimentKind:
		errs = e.experimentInput(obj, in.Resolved, cueInput)
	}
	if len(errs) > 0 {
		return nil, &InputError{Object: name, Errors: errs}
	}

	// The input goes in as compiled JSON: cue.Context.Encode of nested Go
	// maps made CUE v0.17 report fields of the input as undefined inside the
	// templates' definitions.
	inJSON, err := json.Marshal(map[string]any{"input": cueInput})
	if err != nil {
		return nil, fmt.Errorf("render %s: encode input: %w", name, err)
	}
	filled := tmpl.Unify(e.ctx.CompileBytes(inJSON))
	if err := filled.LookupPath(cue.ParsePath("input")).Err(); err != nil {
		return nil, &InputError{Object: name, Errors: cueFieldErrors(err, 1, "")}
	}
	objects := filled.LookupPath(cue.ParsePath("objects"))
	var values []cue.Value
	it, err := objects.Fields()
	if err != nil {
		return nil, fmt.Errorf("render %s: template %s: %s", name, strings.ToLower(kind), cueerrors.Details(err, nil))
	}
	for it.Next() {
		values = append(values, it.Value())
	}
	sync := filled.LookupPath(cue.ParsePath("sync"))

	b := &Bundle{
		Dir:        fmt.Sprintf("%s/%s/%s", md["namespace"], strings.ToLower(kind), md["name"]),
		Source:     scribev1.ObjectIdentity{APIVersion: apiVersion, Kind: kind, Namespace: md["namespace"].(string), Name: md["name"].(string)},
		Generation: generation(md),
	}
	rendered := map[string][]byte{}
	for _, val := range values {
		id, data, err := e.checkObject(name, val)
		if err != nil {
			return nil, err
		}
		if id.Namespace != md["namespace"] {
			return nil, fmt.Errorf("render %s: %s %s is in namespace %q: a CR renders only into its own namespace", name, id.Kind, id.Name, id.Namespace)
		}
		file := strings.ToLower(id.Kind) + "-" + id.Name + ".yaml"
		if _, dup := rendered[file]; dup {
			return nil, fmt.Errorf("render %s: two objects would be written to %s", name, file)
		}
		rendered[file] = data
		b.Objects = append(b.Objects, id)
	}
	syncID, syncData, err := e.checkObject(name, sync)
	if err != nil {
		return nil, err
	}
	b.Sync = syncID

	fileNames := make([]string, 0, len(rendered))
	for f := range rendered {
		fileNames = append(fileNames, f)
	}
	sort.Strings(fileNames)
	sort.Slice(b.Objects, func(i, j int) bool {
		return strings.ToLower(b.Objects[i].Kind)+"-"+b.Objects[i].Name < strings.ToLower(b.Objects[j].Kind)+"-"+b.Objects[j].Name
	})
	kustomization, err := yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  fileNames,
	})
	if err != nil {
		return nil, fmt.Errorf("render %s: kustomization.yaml: %w", name, err)
	}
	for _, f := range fileNames {
		b.Files = append(b.Files, File{Path: b.Dir + "/" + f, Data: rendered[f]})
	}
	b.Files = append(b.Files, File{Path: b.Dir + "/kustomization.yaml", Data: kustomization})
	b.Files = append(b.Files, File{Path: b.Dir + ".sync.yaml", Data: syncData})

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

func sortFiles(files []File) {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
}

// checkObject validates one rendered object against the closed schema of its
// kind and returns its identity and YAML with sorted keys.
func (e *Engine) checkObject(owner string, val cue.Value) (scribev1.ObjectIdentity, []byte, error) {
	var id scribev1.ObjectIdentity
	var err error
	if id.APIVersion, err = val.LookupPath(cue.ParsePath("apiVersion")).String(); err != nil {
		return id, nil, fmt.Errorf("render %s: object without apiVersion: %s", owner, cueerrors.Details(err, nil))
	}
	if id.Kind, err = val.LookupPath(cue.ParsePath("kind")).String(); err != nil {
		return id, nil, fmt.Errorf("render %s: object without kind: %s", owner, cueerrors.Details(err, nil))
	}
	id.Name, _ = val.LookupPath(cue.ParsePath("metadata.name")).String()
	id.Namespace, _ = val.LookupPath(cue.ParsePath("metadata.namespace")).String()
	if id.Kind == "Secret" {
		return id, nil, fmt.Errorf("render %s: refusing to render Secret %s: Scribe never writes Secret data to Git", owner, id.Name)
	}
	schema, ok := e.schemas[id.APIVersion+"/"+id.Kind]
	if !ok {
		return id, nil, fmt.Errorf("render %s: no schema for %s %s: every rendered kind must be in templates/registry", owner, id.APIVersion, id.Kind)
	}
	raw, err := val.MarshalJSON()
	if err != nil {
		return id, nil, fmt.Errorf("render %s: template produced an incomplete %s %s: %s", owner, id.Kind, id.Name, cueerrors.Details(err, nil))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return id, nil, fmt.Errorf("render %s: decode %s %s: %w", owner, id.Kind, id.Name, err)
	}
	// Check the object as plain data: unifying the template's value itself
	// would re-evaluate its expressions inside the schema. Most of a
	// render's time is this check, and a controller re-renders unchanged
	// objects on every reconcile: data already found valid against the
	// same schema is not checked again.
	sum := sha256.Sum256(append([]byte(id.APIVersion+"/"+id.Kind+"\x00"), raw...))
	if !e.valid.seen(sum) {
		if err := schema.Unify(e.ctx.CompileBytes(raw)).Validate(cue.Concrete(true)); err != nil {
			var msgs []string
			for _, fe := range cueFieldErrors(err, 0, "") {
				msgs = append(msgs, fe.Error())
			}
			return id, nil, fmt.Errorf("render %s: rendered %s %s/%s does not match its schema:\n  %s", owner, id.Kind, id.Namespace, id.Name, strings.Join(msgs, "\n  "))
		}
		e.valid.add(sum)
	}
	data, err := yaml.Marshal(m)
	if err != nil {
		return id, nil, fmt.Errorf("render %s: YAML of %s %s: %w", owner, id.Kind, id.Name, err)
	}
	return id, data, nil
}

// generation reads metadata.generation, which JSON decoding may have made an
// int64 or a float64.
func generation(md map[string]any) int64 {
	switch g := md["generation"].(type) {
	case int64:
		return g
	case float64:
		return int64(g)
	case int:
		return int64(g)
	}
	return 0
}
