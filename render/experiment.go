package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/credurl"
	"github.com/scribe-gitops/scribe/render/contract"
)

// renderExperiment renders a validated Experiment.
func (e *Engine) renderExperiment(ctx context.Context, d *decoded, in ExperimentInput) (*Bundle, error) {
	x, ok := d.typed.(*scribev1.Experiment)
	if !ok {
		return nil, fmt.Errorf("render %s: not an Experiment", d.name)
	}
	stage := in.Stage
	if stage == 0 {
		stage = scribev1.StageWorkflow
	}
	input, comps, errs := e.experimentInput(x, d.obj["spec"], in.Resolved, in.Publish, stage)
	errs = append(errs, checkPublish(in.Publish)...)
	switch {
	case in.Stage == 0:
		input.Stage = scribev1.StageWorkflow
	case in.Stage < scribev1.StageClusters || in.Stage > scribev1.StageWorkflow:
		errs = append(errs, FieldError{Path: "stage", Message: fmt.Sprintf("an Experiment has commit stages %d (clusters) to %d (workflow runs), not %d", scribev1.StageClusters, scribev1.StageWorkflow, in.Stage)})
	default:
		input.Stage = in.Stage
	}
	if len(errs) > 0 {
		return nil, &InputError{Object: d.name, Errors: errs}
	}
	input.Publish = in.Publish
	// The hydrated components of the stages rendered: their files are in
	// the tree from the commit whose deliveries apply them.
	for _, c := range comps {
		if c.stage <= input.Stage {
			d.extra = append(d.extra, c.Files...)
		}
	}
	if wf := x.Spec.Workflow; wf != nil && wf.Engine == scribev1.EngineTestkube {
		d.elsewhere = &elsewhere{namespace: testkubeNamespace(wf.Testkube), kinds: testkubeKinds, why: "Testkube objects (spec.workflow.testkube.namespace)"}
	}
	b, err := e.renderBundle(ctx, d, input)
	if err != nil {
		return nil, err
	}
	for i := range b.ReadBack.Targets {
		b.ReadBack.Targets[i].Addressable = addressable(comps, b.ReadBack.Targets[i].Name)
	}
	return b, nil
}

// DefaultTestkubeWorkflow is the catalog's workflow template a Testkube
// evaluation runs when spec.workflow.template names none.
const DefaultTestkubeWorkflow = "agent-eval"

// testkubeKinds are the kinds an Experiment renders into Testkube's
// namespace (templates/experiment/testkube.cue).
var testkubeKinds = map[[2]string]bool{
	{"v1", "ConfigMap"}: true,
	{"testworkflows.testkube.io/v1", "TestWorkflow"}:          true,
	{"testworkflows.testkube.io/v1", "TestWorkflowExecution"}: true,
	{"tests.testkube.io/v1", "TestTrigger"}:                   true,
}

// testkubeNamespace is the namespace Testkube runs in, as the CRD
// defaults it.
func testkubeNamespace(tk *scribev1.TestkubeSpec) string {
	if tk == nil || tk.Namespace == "" {
		return scribev1.DefaultTestkubeNamespace
	}
	return tk.Namespace
}

// checkTestkubeNamespace refuses, naming spec.workflow.testkube.namespace,
// a Testkube namespace the tenant may not write into, and one that is not
// where the agent-eval TestWorkflowTemplates are delivered (a TestWorkflow's
// `use:` resolves templates in its own namespace, so it would never run).
// The tenant may write into its Experiment's namespace, the namespaces the
// Repository allows, and the built-in agent-eval entry's namespace, which
// Scribe's own catalog already delivers into. agentEval is the resolved
// entry of spec.workflow.template, named name (agent-eval by default).
func (e *Engine) checkTestkubeNamespace(x *scribev1.Experiment, name string, agentEval *contract.Resolved, ns namespacePolicy) *FieldError {
	const at = "spec.workflow.testkube.namespace"
	tk := testkubeNamespace(x.Spec.Workflow.Testkube)
	builtinNS := ""
	if len(e.catalogs) > 0 {
		builtinNS, _ = e.catalogs[len(e.catalogs)-1].LookupPath(cue.MakePath(cue.Str(DefaultTestkubeWorkflow), cue.Str("namespace"))).String()
	}
	if tk != ns.experiment && tk != builtinNS && !slices.Contains(ns.allowed, tk) {
		return &FieldError{Path: at, Message: fmt.Sprintf(
			"Testkube's namespace %q is neither the Experiment's namespace %q nor one the Repository allows: list %q in the Repository's spec.allowedNamespaces, or name the namespace Testkube runs in",
			tk, ns.experiment, tk)}
	}
	if agentEval == nil {
		return nil
	}
	templates, _ := agentEval.Entry["namespace"].(string)
	if templates == "" {
		templates = ns.experiment
	}
	if tk != templates {
		return &FieldError{Path: at, Message: fmt.Sprintf(
			"Testkube's namespace %q is not where the %s TestWorkflowTemplates are delivered (%q, the namespace of catalog entry %s): a TestWorkflow uses templates of its own namespace only, so the evaluation would never run; set it to %q, or override the %s entry in the Repository's catalog so it delivers into %q",
			tk, name, templates, name, templates, name, tk)}
	}
	return nil
}

// stagedComponent is a hydrated component and the commit stage whose
// deliveries apply it.
type stagedComponent struct {
	*hydrated
	stage int32
}

// experimentInput resolves every component the Experiment names through the
// catalogs, checks its params against the entry's schema, and adds the
// resolved entries and cluster facts to the template input. spec is the
// validated spec's JSON shape, hashed into run names. allowed are the
// namespaces besides the Experiment's own that user catalog entries may
// install into (pub.AllowedNamespaces). Components kept in the published
// catalog (res.Catalog) are hydrated: built by Scribe into plain objects,
// returned with the stage that delivers them.
func (e *Engine) experimentInput(x *scribev1.Experiment, spec any, res Resolved, pub Publish, stage int32) (contract.Experiment, []stagedComponent, []FieldError) {
	in := contract.Experiment{Metadata: metadataOf(x), Spec: x.Spec}
	var errs []FieldError
	var comps []stagedComponent
	ns := namespacePolicy{experiment: x.Namespace, allowed: pub.AllowedNamespaces,
		argo: pub.Applier.Kind == scribev1.ApplierArgoCD, sourceRepos: pub.SourceRepos}
	// dir is where a hydrated component's objects go in the Experiment's
	// directory, stage the commit stage that delivers them.
	resolve := func(kind contract.ComponentKind, name string, params any, namePath, paramsPath, dir string, stage int32) (*contract.Resolved, []FieldError) {
		r, ferrs := e.resolveComponent(kind, name, params, namePath, paramsPath, ns)
		if r != nil {
			if fe := checkCatalogSource(r, res.Catalog, namePath); fe != nil {
				return nil, append(ferrs, *fe)
			}
			h, fe := e.hydrateComponent(r, res.Catalog, dir, x.Namespace, OwnedSuffix(x.Namespace, x.Name), ns.argo, e.builtinEntry(name), pub.ClusterResources, namePath, paramsPath)
			if fe != nil {
				return nil, append(ferrs, *fe)
			}
			if h != nil {
				comps = append(comps, stagedComponent{hydrated: h, stage: stage})
			}
			if fe := argoParams(r, pub.Applier.Kind, paramsPath); fe != nil {
				return nil, append(ferrs, *fe)
			}
		}
		return r, ferrs
	}
	telemetry, terrs := decideTelemetry(x.Spec, x.Namespace, res)
	errs = append(errs, terrs...)
	if len(terrs) == 0 {
		ds, err := grafanaDatasources(x.Namespace, x.Name, telemetry.MetricsURL, telemetry.Tenants)
		if err != nil {
			errs = append(errs, FieldError{Path: "spec.observability", Message: err.Error()})
		}
		in.Datasources = ds
	}
	if in.Datasources == nil {
		in.Datasources = []contract.Datasource{}
	}
	targets := make(map[string]bool, len(x.Spec.Targets))
	for _, t := range x.Spec.Targets {
		targets[t.Name] = true
	}
	// Workflows are committed from stage 3 on, once every target is
	// ready: their params' target addresses must be known then.
	addressesKnown := stage >= scribev1.StageWorkflowTemplates
	for i, t := range x.Spec.Targets {
		resolved := []contract.Resolved{}
		for j, c := range t.Components {
			kind, name := componentRef(c)
			at := fmt.Sprintf("spec.targets[%d].components[%d]", i, j)
			if kind == contract.ComponentWorkflow && t.Cluster.Type != scribev1.ClusterHub {
				errs = append(errs, FieldError{Path: at + ".workflow", Message: fmt.Sprintf("workflow components run on the hub; target %q is a %s cluster", t.Name, t.Cluster.Type)})
				continue
			}
			params, err := jsonValue(c.Params)
			if err != nil {
				errs = append(errs, FieldError{Path: at + ".params", Message: err.Error()})
				continue
			}
			stage := scribev1.StageComponents
			if kind == contract.ComponentWorkflow {
				stage = scribev1.StageWorkflowTemplates
				var aerrs []FieldError
				params, aerrs = substituteAddresses(params, at+".params", targets, res.TargetAddresses, addressesKnown)
				errs = append(errs, aerrs...)
			} else {
				errs = append(errs, refusesAddresses(params, at+".params")...)
			}
			r, ferrs := resolve(kind, name, params, at+"."+string(kind), at+".params", path.Join(componentsDir, t.Name, name), stage)
			errs = append(errs, ferrs...)
			if r != nil {
				resolved = append(resolved, *r)
			}
		}

		var obs *contract.Resolved
		if tt := telemetry.Targets[i]; tt != nil {
			at := fmt.Sprintf("spec.targets[%d].observability", i)
			r, ferrs := resolve(contract.ComponentConfig, "otel-collector", tt.params(), at, at,
				path.Join(componentsDir, t.Name, "observability"), scribev1.StageComponents)
			errs = append(errs, ferrs...)
			obs = r
		}
		in.Targets = append(in.Targets, contract.TargetInput{Components: resolved, Observability: obs})
	}

	errs = append(errs, crossKindDepends(x, in.Targets, pub.Applier.Kind)...)

	if wf := x.Spec.Workflow; wf != nil {
		if wf.Engine == scribev1.EngineTestkube {
			// spec.workflow.template names the evaluation's workflow
			// template; without it, the catalog's agent-eval.
			name, at := wf.Template, "spec.workflow.template"
			if name == "" {
				name, at = DefaultTestkubeWorkflow, "spec.workflow"
			}
			r, ferrs := resolve(contract.ComponentWorkflow, name, nil, at, "spec.workflow.params", path.Join(validationDir, name), scribev1.StageWorkflowTemplates)
			errs = append(errs, ferrs...)
			if wf.Params != nil {
				errs = append(errs, FieldError{Path: "spec.workflow.params", Message: "the testkube engine takes no params: the evaluation is set by spec.workflow.testkube (dataset or scenarios, agentRef, llmAsAJudgeModel, judgeURL)"})
			}
			in.Workflow = r
			if len(ferrs) == 0 {
				if fe := e.checkTestkubeNamespace(x, name, r, ns); fe != nil {
					errs = append(errs, *fe)
				}
			}
		} else {
			params, err := jsonValue(wf.Params)
			if err != nil {
				errs = append(errs, FieldError{Path: "spec.workflow.params", Message: err.Error()})
			} else {
				var aerrs []FieldError
				params, aerrs = substituteAddresses(params, "spec.workflow.params", targets, res.TargetAddresses, addressesKnown)
				errs = append(errs, aerrs...)
				r, ferrs := resolve(contract.ComponentWorkflow, wf.Template, params, "spec.workflow.template", "spec.workflow.params", path.Join(validationDir, wf.Template), scribev1.StageWorkflowTemplates)
				errs = append(errs, ferrs...)
				in.Workflow = r
			}
		}
	}
	in.Project = res.GCPProject
	errs = append(errs, checkProjects(x, in.Project)...)
	in.OTELEndpoint = res.OTELEndpoint
	specJSON, err := json.Marshal(spec) // a map: keys sorted
	if err != nil {
		errs = append(errs, FieldError{Path: "spec", Message: err.Error()})
	}
	sum := sha256.Sum256(specJSON)
	in.SpecHash = hex.EncodeToString(sum[:])[:8]
	return in, comps, errs
}

// componentRef is the catalog kind and name a component refers to.
func componentRef(c scribev1.Component) (contract.ComponentKind, string) {
	switch {
	case c.Config != "":
		return contract.ComponentConfig, c.Config
	case c.Workflow != "":
		return contract.ComponentWorkflow, c.Workflow
	}
	return contract.ComponentApp, c.App
}

// jsonValue decodes free-form params (whole numbers as int64, as the
// apiserver does); nil stays nil.
func jsonValue(j *apiextensionsv1.JSON) (any, error) {
	if j == nil || len(j.Raw) == 0 {
		return nil, nil
	}
	var v any
	if err := utiljson.Unmarshal(j.Raw, &v); err != nil {
		return nil, fmt.Errorf("decode params: %w", err)
	}
	return deepCopyJSON(v), nil
}

// argoParams refuses, under Argo CD, a kustomize-sourced component with a
// param its catalog entry does not map (entry.argocd): Flux substitutes
// ${param} into the built manifests, Argo CD cannot, so the manifests would
// be applied with the literal ${param} in them.
func argoParams(r *contract.Resolved, applier scribev1.ApplierKind, paramsPath string) *FieldError {
	if applier != scribev1.ApplierArgoCD || r.Kind == contract.ComponentWorkflow || len(r.Params) == 0 {
		return nil
	}
	// A Helm source's params are its values; a catalog source's Scribe
	// substitutes itself (hydrateComponent).
	src, _ := r.Entry["source"].(map[string]any)
	if t, _ := src["type"].(string); t == "helm" || t == catalogSourceType {
		return nil
	}
	mapped := map[string]bool{}
	if a, ok := r.Entry["argocd"].(map[string]any); ok {
		reps, _ := a["replicas"].([]any)
		for _, rep := range reps {
			if m, ok := rep.(map[string]any); ok {
				if p, _ := m["param"].(string); p != "" {
					mapped[p] = true
				}
			}
		}
	}
	var missing []string
	for k := range r.Params {
		if !mapped[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return &FieldError{Path: paramsPath, Message: fmt.Sprintf(
		"component %q: Argo CD cannot pass param(s) %s to its kustomize source (Flux substitutes them after the build; Argo CD has no such step), and its catalog entry does not map them under argocd: add the mapping to the entry, or apply this Repository with Flux",
		r.Name, strings.Join(missing, ", "))}
}

// namespacePolicy says which namespaces a component may install into,
// and which repositories a user entry's source may come from.
type namespacePolicy struct {
	// experiment is the Experiment's namespace: always allowed.
	experiment string
	// allowed are the Repository's spec.allowedNamespaces.
	allowed []string
	// argo: Argo CD fetches the sources, with the repository credentials
	// it holds for them, so a user entry's source must be within
	// sourceRepos (the TenantPolicy's spec.sourceRepos).
	argo        bool
	sourceRepos []string
}

// checkSource refuses, under Argo CD, a user catalog entry whose source is
// fetched from a repository the platform did not grant: it would enter the
// Experiment's AppProject sourceRepos, and Argo CD fetches it with the
// credentials it holds for that URL. A built-in entry's source ships with
// Scribe; a "catalog" source is the platform's published catalog.
func (p namespacePolicy) checkSource(name string, entry cue.Value, builtin bool, from, namePath string) *FieldError {
	if !p.argo || builtin {
		return nil
	}
	typ, _ := entry.LookupPath(cue.ParsePath("source.type")).String()
	field := "url"
	switch typ {
	case "git", "oci":
	case "helm":
		field = "repository"
	default:
		return nil
	}
	url, _ := entry.LookupPath(cue.MakePath(cue.Str("source"), cue.Str(field))).String()
	for _, prefix := range p.sourceRepos {
		if ok, err := credurl.Within(prefix, url); err == nil && ok {
			return nil
		}
	}
	return &FieldError{Path: namePath, Message: fmt.Sprintf(
		"component %q is fetched from %s (source.%s of its entry in catalog %s), which the platform does not grant this namespace under Argo CD: it must be within one of its TenantPolicy's spec.sourceRepos (%s)",
		name, credurl.Redact(url), field, from, strings.Join(p.sourceRepos, ", "))}
}

// check refuses a component whose catalog entry installs it into a
// namespace neither its Experiment's nor allowed. A built-in entry's own
// namespace is allowed: Scribe ships it. A user catalog's entry, or one
// that overrides a built-in entry, may name only the Experiment's
// namespace or one the Repository lists.
// from names the entry's catalog.
func (p namespacePolicy) check(name, entryNS string, builtin bool, from, namePath string) *FieldError {
	if entryNS == "" || entryNS == p.experiment || builtin || slices.Contains(p.allowed, entryNS) {
		return nil
	}
	return &FieldError{Path: namePath, Message: fmt.Sprintf(
		"component %q installs into namespace %q (the namespace of its entry in catalog %s), which the Repository does not allow: list %q in the Repository's spec.allowedNamespaces, or remove namespace from the catalog entry so it installs into the Experiment's namespace %q",
		name, entryNS, from, entryNS, p.experiment)}
}

// resolveComponent looks a component up in the catalogs, checks its params,
// and checks the namespace its entry installs it into against ns.
func (e *Engine) resolveComponent(kind contract.ComponentKind, name string, params any, namePath, paramsPath string, ns namespacePolicy) (*contract.Resolved, []FieldError) {
	var entry cue.Value
	found, at := false, 0
	for i, c := range e.catalogs {
		v := c.LookupPath(cue.MakePath(cue.Str(name)))
		if v.Exists() {
			entry, found, at = v, true, i
			break
		}
	}
	if !found {
		return nil, []FieldError{{Path: namePath, Message: fmt.Sprintf("unknown component %q: the catalog has %s components %s", name, kind, strings.Join(e.catalogNames(string(kind)), ", "))}}
	}
	if k, _ := entry.LookupPath(cue.ParsePath("kind")).String(); k != string(kind) {
		return nil, []FieldError{{Path: namePath, Message: fmt.Sprintf("component %q is a %s, not a %s", name, k, kind)}}
	}
	entryNS, _ := entry.LookupPath(cue.ParsePath("namespace")).String()
	// The built-in catalog is the last one.
	if fe := ns.check(name, entryNS, at == len(e.catalogs)-1, e.catalogFrom[at], namePath); fe != nil {
		return nil, []FieldError{*fe}
	}
	if fe := ns.checkSource(name, entry, at == len(e.catalogs)-1, e.catalogFrom[at], namePath); fe != nil {
		return nil, []FieldError{*fe}
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
	entryMap, err := e.entryData(at, name, entry)
	if err != nil {
		return nil, []FieldError{{Path: namePath, Message: fmt.Sprintf("catalog entry %q: %v", name, err)}}
	}
	return &contract.Resolved{Name: name, Kind: kind, Entry: entryMap, Params: resolved}, nil
}

// entryData is catalog at's entry name as JSON data, through #Entry, so a
// user catalog's entries get the schema's defaults (an OCI source's path)
// as the built-in ones do. It depends on the engine's catalogs only: each
// entry is evaluated once per engine and shared, read-only, by renders.
func (e *Engine) entryData(at int, name string, entry cue.Value) (map[string]any, error) {
	type result struct {
		m   map[string]any
		err error
	}
	key := strconv.Itoa(at) + "/" + name
	if r, ok := e.entries.Load(key); ok {
		return r.(result).m, r.(result).err
	}
	var r result
	raw, err := e.entrySchema.Unify(entry).MarshalJSON()
	if err == nil {
		err = utiljson.Unmarshal(raw, &r.m)
	}
	r.err = err
	got, _ := e.entries.LoadOrStore(key, r)
	return got.(result).m, got.(result).err
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

// checkProjects refuses a gke or talos target whose GCP project is set
// neither on its cluster nor for the controller (project): no cloud
// project is guessed.
func checkProjects(x *scribev1.Experiment, project string) []FieldError {
	if project != "" {
		return nil
	}
	var errs []FieldError
	for i, t := range x.Spec.Targets {
		if t.Cluster.Project != "" {
			continue
		}
		if t.Cluster.Type == scribev1.ClusterGKE || t.Cluster.Type == scribev1.ClusterTalos {
			errs = append(errs, FieldError{Path: fmt.Sprintf("spec.targets[%d].cluster.project", i), Message: fmt.Sprintf(
				"a %s cluster is created in a GCP project and none is given: set it here, or give the controller --gcp-project (chart value gcpProject; scribe render --gcp-project)", t.Cluster.Type)})
		}
	}
	return errs
}
