package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// DefaultGCPProject is the GCP project of gke and talos clusters when the
// controller or CLI does not name one.
const DefaultGCPProject = "scribe-experiments"

// experimentInput resolves every component the Experiment names through the
// catalogs, checks its params against the entry's schema, and adds the
// resolved entries and cluster facts to the CUE input.
func (e *Engine) experimentInput(obj map[string]any, res Resolved, in map[string]any) []FieldError {
	spec, _ := obj["spec"].(map[string]any)
	md, _ := obj["metadata"].(map[string]any)
	var errs []FieldError

	targets, _ := spec["targets"].([]any)
	var components, observability []any
	for i, t := range targets {
		tm, _ := t.(map[string]any)
		clusterType, _ := tm["cluster"].(map[string]any)["type"].(string)
		resolved := []any{}
		comps, _ := tm["components"].([]any)
		for j, c := range comps {
			cm, _ := c.(map[string]any)
			kind, name := "", ""
			for _, k := range []string{"app", "workflow", "config"} {
				if n, ok := cm[k].(string); ok {
					kind, name = k, n
				}
			}
			at := fmt.Sprintf("spec.targets[%d].components[%d]", i, j)
			if kind == "workflow" && clusterType != "hub" {
				errs = append(errs, FieldError{Path: at + ".workflow", Message: fmt.Sprintf("workflow components run on the hub; target %q is a %s cluster", tm["name"], clusterType)})
				continue
			}
			r, ferrs := e.resolveComponent(kind, name, cm["params"], at+"."+kind, at+".params")
			errs = append(errs, ferrs...)
			resolved = append(resolved, r)
		}
		components = append(components, resolved)

		var obs any
		if o, ok := tm["observability"].(map[string]any); ok && o["enabled"] == true {
			tenant, _ := o["tenant"].(string)
			if tenant == "" {
				tenant, _ = md["namespace"].(string)
			}
			endpoint := res.OTELEndpoint
			if endpoint == "" {
				endpoint = "http://otel-collector.observability.svc.cluster.local:4317"
			}
			r, ferrs := e.resolveComponent("config", "otel-collector", map[string]any{"tenant": tenant, "transport": o["transport"], "endpoint": endpoint}, fmt.Sprintf("spec.targets[%d].observability", i), fmt.Sprintf("spec.targets[%d].observability", i))
			errs = append(errs, ferrs...)
			obs = r
		}
		observability = append(observability, obs)
	}
	in["components"] = components
	in["observability"] = observability

	var workflow any
	if wf, ok := spec["workflow"].(map[string]any); ok {
		switch wf["engine"] {
		case "testkube":
			r, ferrs := e.resolveComponent("workflow", "agent-eval", nil, "spec.workflow", "spec.workflow.params")
			errs = append(errs, ferrs...)
			workflow = r
		default:
			name, _ := wf["template"].(string)
			r, ferrs := e.resolveComponent("workflow", name, wf["params"], "spec.workflow.template", "spec.workflow.params")
			errs = append(errs, ferrs...)
			workflow = r
		}
		if tk, ok := wf["testkube"].(map[string]any); ok {
			agentURL := res.AgentURL
			if agentURL == "" {
				ref, _ := tk["agentRef"].(map[string]any)
				ns, _ := ref["namespace"].(string)
				if ns == "" {
					ns, _ = md["namespace"].(string)
				}
				agentURL = fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", ref["name"], ns, toInt(ref["port"]))
			}
			in["agentURL"] = agentURL
		}
	}
	in["workflow"] = workflow
	in["project"] = res.GCPProject
	if res.GCPProject == "" {
		in["project"] = DefaultGCPProject
	}
	if res.OTELEndpoint != "" {
		in["otelEndpoint"] = res.OTELEndpoint
	}
	specJSON, _ := json.Marshal(spec)
	sum := sha256.Sum256(specJSON)
	in["specHash"] = hex.EncodeToString(sum[:])[:8]
	return errs
}

// resolveComponent looks a component up in the catalogs and checks its params.
func (e *Engine) resolveComponent(kind, name string, params any, namePath, paramsPath string) (map[string]any, []FieldError) {
	var entry cue.Value
	found := false
	for _, c := range e.catalogs {
		v := c.LookupPath(cue.MakePath(cue.Str(name)))
		if v.Exists() {
			entry, found = v, true
			break
		}
	}
	if !found {
		return nil, []FieldError{{Path: namePath, Message: fmt.Sprintf("unknown component %q: the catalog has %s components %s", name, kind, strings.Join(e.catalogNames(kind), ", "))}}
	}
	if k, _ := entry.LookupPath(cue.ParsePath("kind")).String(); k != kind {
		return nil, []FieldError{{Path: namePath, Message: fmt.Sprintf("component %q is a %s, not a %s", name, k, kind)}}
	}
	if params == nil {
		params = map[string]any{}
	}
	schema := entry.LookupPath(cue.MakePath(cue.Def("#Params")))
	var unknown []FieldError
	if pm, ok := params.(map[string]any); ok {
		known := map[string]any{}
		keys := make([]string, 0, len(pm))
		for k := range pm {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !schema.Allows(cue.Str(k)) {
				unknown = append(unknown, FieldError{Path: paramsPath + "." + k, Message: fmt.Sprintf("component %q has no parameter %q; it takes %s", name, k, strings.Join(paramNames(schema), ", "))})
				continue
			}
			known[k] = pm[k]
		}
		params = known
	}
	p := schema.Unify(e.ctx.Encode(params))
	if err := p.Validate(cue.Concrete(true)); err != nil {
		errs := cueFieldErrors(err, 0, paramsPath)
		for i := range errs {
			errs[i].Message = fmt.Sprintf("component %q: %s", name, errs[i].Message)
		}
		return nil, append(unknown, errs...)
	}
	if len(unknown) > 0 {
		return nil, unknown
	}
	var resolved map[string]any
	raw, err := p.MarshalJSON()
	if err == nil {
		err = utiljson.Unmarshal(raw, &resolved)
	}
	if err != nil {
		return nil, []FieldError{{Path: paramsPath, Message: fmt.Sprintf("component %q: %v", name, err)}}
	}
	// Through #Entry, so a user catalog's entries get the schema's defaults
	// (an OCI source's path) as the built-in ones do.
	var entryMap map[string]any
	raw, err = e.entrySchema.Unify(entry).MarshalJSON()
	if err == nil {
		err = utiljson.Unmarshal(raw, &entryMap)
	}
	if err != nil {
		return nil, []FieldError{{Path: namePath, Message: fmt.Sprintf("catalog entry %q: %v", name, err)}}
	}
	return map[string]any{"name": name, "kind": kind, "entry": entryMap, "params": resolved}, nil
}

// catalogNames lists the component names of one kind across all catalogs.
func (e *Engine) catalogNames(kind string) []string {
	seen := map[string]bool{}
	for _, c := range e.catalogs {
		it, err := c.Fields()
		if err != nil {
			continue
		}
		for it.Next() {
			if k, _ := it.Value().LookupPath(cue.ParsePath("kind")).String(); k == kind {
				seen[it.Selector().Unquoted()] = true
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CatalogEntries lists the components the engine's catalogs offer, as
// kind/name sorted: the user catalogs' entries and the built-in ones, an
// overridden entry once, with the kind of the entry that wins.
func (e *Engine) CatalogEntries() []string {
	kinds := map[string]string{}
	for _, c := range e.catalogs { // highest precedence first
		it, err := c.Fields()
		if err != nil {
			continue
		}
		for it.Next() {
			name := it.Selector().Unquoted()
			if _, ok := kinds[name]; !ok {
				kinds[name], _ = it.Value().LookupPath(cue.ParsePath("kind")).String()
			}
		}
	}
	out := make([]string, 0, len(kinds))
	for name, kind := range kinds {
		out = append(out, kind+"/"+name)
	}
	sort.Strings(out)
	return out
}

// paramNames lists the parameters a #Params schema declares.
func paramNames(schema cue.Value) []string {
	var names []string
	it, err := schema.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	for it.Next() {
		names = append(names, it.Selector().Unquoted())
	}
	if len(names) == 0 {
		return []string{"none"}
	}
	return names
}
