package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"sort"
	"strings"
	"sync"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/catalog"
	"github.com/scribe-gitops/scribe/internal/hydrate"
	"github.com/scribe-gitops/scribe/render/contract"
)

// componentsDir is where, in an Experiment's directory, the hydrated
// objects of each target's catalog components are written:
// components/<target>/<component>/ (the observability wiring as component
// "observability"); the validation workflow's are in validationDir.
const (
	componentsDir = "components"
	validationDir = "validation"
)

// hydrated is a `type: "catalog"` component Scribe built itself: the plain
// objects of its kustomization, with its params substituted and its
// namespace set, written to Dir (relative to the Experiment's directory).
// Its delivery applies that directory from Scribe's own source, like the
// rest of the Experiment's tree: one kind of applier object for every
// catalog component, whatever the applier.
type hydrated struct {
	Dir   string
	Files []File // paths relative to the Experiment's directory
}

// hydrateComponent builds r, whose entry's source is `type: "catalog"`,
// from the published catalog's files (src.Files, or the catalog shipped in
// this binary when nil) into dir, setting the namespace to the entry's
// (or ns, the Experiment's, when it has none) and naming every object per
// Experiment: suffix (OwnedSuffix) appended to its name. Delivered by Argo
// CD (argo), the Namespace the objects are installed in is left to the
// Application to create (argoNamespace), its metadata in the source's
// namespaceMetadata. It rewrites r's
// entry source to {type: "catalog", dir: dir, nameSuffix: suffix} for the
// templates, which append the suffix to the names they reference (the
// WorkflowTemplate a Workflow runs, the TestWorkflowTemplates a
// TestWorkflow uses). A
// component of any other source type is left alone (nil, nil). Errors name
// namePath, or paramsPath.<param> for a ${param} nothing sets.
//
// From a catalog the tenant chose (src.Tenant), a built-in entry (builtin)
// is built from the catalog shipped in this binary, never from the
// tenant's files, and the objects of the tenant's own entries must stay
// in their namespace or be of a cluster-scoped kind clusterResources
// grants (ConfineTenantObjects).
func (e *Engine) hydrateComponent(r *contract.Resolved, src *CatalogSource, dir, ns, suffix string, argo, builtin bool, clusterResources []scribev1.GroupKind, namePath, paramsPath string) (*hydrated, *FieldError) {
	s, _ := r.Entry["source"].(map[string]any)
	if s == nil || s["type"] != catalogSourceType {
		return nil, nil
	}
	rel, _ := s["path"].(string)
	tenant := src != nil && src.Tenant
	var files fs.FS = catalog.FS
	if src != nil && src.Files != nil && (!tenant || !builtin) {
		files = src.Files
	}
	params := make(map[string]string, len(r.Params))
	for k, v := range r.Params {
		if str, ok := v.(string); ok {
			params[k] = str
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &FieldError{Path: paramsPath + "." + k, Message: fmt.Sprintf("component %q: %v", r.Name, err)}
		}
		params[k] = string(b)
	}
	target, _ := r.Entry["namespace"].(string)
	if target == "" {
		target = ns
	}
	objs, err := e.hydrations.build(hydrate.Request{FS: files, Dir: rel, Params: params, Namespace: target, NameSuffix: suffix})
	if err != nil {
		var missing *hydrate.MissingParamError
		var badName *hydrate.ParamNameError
		switch {
		case errors.As(err, &missing):
			return nil, &FieldError{Path: paramsPath + "." + missing.Param, Message: fmt.Sprintf(
				"component %q: %s (its catalog entry's manifests, %s): set the param", r.Name, missing.Error(), rel)}
		case errors.As(err, &badName):
			return nil, &FieldError{Path: paramsPath + "." + badName.Param, Message: fmt.Sprintf("component %q: %v", r.Name, err)}
		}
		return nil, &FieldError{Path: namePath, Message: fmt.Sprintf(
			"component %q: building its catalog entry's manifests (%s in the published catalog): %v", r.Name, rel, err)}
	}
	if tenant && !builtin {
		if err := ConfineTenantObjects(objs, target, clusterResources); err != nil {
			return nil, &FieldError{Path: namePath, Message: fmt.Sprintf("component %q (%s in the Repository's catalog, spec.catalog): %v", r.Name, rel, err)}
		}
	}
	var nsMetadata map[string]any
	if argo {
		objs, nsMetadata = argoNamespace(objs, target)
	}
	h, err := hydratedFiles(dir, objs)
	if err != nil {
		return nil, &FieldError{Path: namePath, Message: fmt.Sprintf("component %q: %v", r.Name, err)}
	}
	entry := maps.Clone(r.Entry)
	source := map[string]any{"type": catalogSourceType, "dir": dir, "nameSuffix": suffix}
	if nsMetadata != nil {
		source["namespaceMetadata"] = nsMetadata
	}
	entry["source"] = source
	r.Entry = entry
	return h, nil
}

// hydrationCache keeps the objects of recent hydrations by hydrate.Key
// (the entry's files, params and namespace): an Experiment is rendered at
// every stage and reconcile, and a kustomize build costs far more than
// hashing its files. The objects are shared and never changed. It is
// bounded to maxHydrations entries, the oldest dropped first.
type hydrationCache struct {
	mu    sync.Mutex
	objs  map[string][]map[string]any
	order []string
}

const maxHydrations = 256

// build is hydrate.Build, answered from the cache when it holds req's key.
func (c *hydrationCache) build(req hydrate.Request) ([]map[string]any, error) {
	key, err := hydrate.Key(req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	objs, ok := c.objs[key]
	c.mu.Unlock()
	if ok {
		return objs, nil
	}
	if objs, err = hydrate.Build(req); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.objs == nil {
		c.objs = map[string][]map[string]any{}
	}
	if _, again := c.objs[key]; !again {
		c.order = append(c.order, key)
	}
	c.objs[key] = objs
	for len(c.order) > maxHydrations {
		delete(c.objs, c.order[0])
		c.order = c.order[1:]
	}
	return objs, nil
}

// hydratedFiles writes objs into dir: one file per object,
// <kind>-<name>.yaml (with its namespace, then its API group, when that
// alone is not unique), and a kustomization.yaml listing them.
func hydratedFiles(dir string, objs []map[string]any) (*hydrated, error) {
	type named struct {
		obj                   map[string]any
		group, kind, ns, name string
	}
	all := make([]named, 0, len(objs))
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		apiVersion, _ := o["apiVersion"].(string)
		kind, _ := o["kind"].(string)
		name, _ := md["name"].(string)
		ns, _ := md["namespace"].(string)
		if apiVersion == "" || kind == "" || name == "" {
			return nil, fmt.Errorf("an object of its manifests has no apiVersion, kind or metadata.name: %.200v", o)
		}
		group := ""
		if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
			group = apiVersion[:i]
		}
		all = append(all, named{obj: o, group: group, kind: strings.ToLower(kind), ns: ns, name: name})
	}
	count := func(key func(n named) string) map[string]int {
		c := map[string]int{}
		for _, n := range all {
			c[key(n)]++
		}
		return c
	}
	short := func(n named) string { return n.kind + "-" + n.name }
	withNS := func(n named) string { return n.kind + "-" + n.ns + "-" + n.name }
	full := func(n named) string { return n.group + "-" + n.kind + "-" + n.ns + "-" + n.name }
	shortN, nsN := count(short), count(withNS)
	h := &hydrated{Dir: dir}
	seen := map[string]bool{}
	var names []string
	for _, n := range all {
		base := short(n)
		switch {
		case shortN[base] == 1:
		case nsN[withNS(n)] == 1:
			base = withNS(n)
		default:
			base = full(n)
		}
		file := strings.ReplaceAll(strings.Trim(base, "-"), "--", "-") + ".yaml"
		if seen[file] {
			return nil, fmt.Errorf("two objects of its manifests would be written to %s", file)
		}
		seen[file] = true
		data, err := yamlOf(n.obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		names = append(names, file)
		h.Files = append(h.Files, File{Path: path.Join(dir, file), Data: data})
	}
	sort.Strings(names)
	k, err := kustomizationOf(names)
	if err != nil {
		return nil, fmt.Errorf("kustomization.yaml: %w", err)
	}
	h.Files = append(h.Files, File{Path: path.Join(dir, "kustomization.yaml"), Data: k})
	return h, nil
}

// yamlOf is obj as YAML, written as the rendered objects are (numbers as
// json.Number, keys sorted).
func yamlOf(obj map[string]any) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return yamlStream(m)
}
