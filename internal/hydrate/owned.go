package hydrate

import (
	"fmt"
	"strings"

	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The objects of a catalog component are named per owner (Request's
// NameSuffix) so that two Experiments never deliver one object, and the
// applier's pruning of one never deletes what the other uses. The
// cluster-scoped objects kustomize never renames (its nameSuffix skips
// them) cannot be: an Experiment's components need that one Namespace, and
// a CRD has the name its group and kind give it. They stay shared: Build
// marks them never to be pruned or deleted by either applier
// (neverPruned), so deleting one Experiment leaves them for the others, and
// removing them is the platform team's.

// SharedKind reports whether kustomize's nameSuffix leaves an object of
// kind (in API group group) unrenamed: a Namespace, a
// CustomResourceDefinition or an APIService. Build keeps such objects
// shared and never pruned.
func SharedKind(group, kind string) bool {
	switch {
	case group == "" && kind == "Namespace":
		return true
	case group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition":
		return true
	case group == "apiregistration.k8s.io" && kind == "APIService":
		return true
	}
	return false
}

// The annotations that keep a shared object when the delivery that applied
// it goes: Flux's Kustomization garbage collection skips an object with
// fluxPrune disabled; Argo CD neither prunes (Prune=false) nor deletes with
// its Application (Delete=false) one with these sync options.
const (
	fluxPruneKey     = "kustomize.toolkit.fluxcd.io/prune"
	fluxPruneOff     = "disabled"
	argoSyncOptsKey  = "argocd.argoproj.io/sync-options"
	argoNeverPruned1 = "Prune=false"
	argoNeverPruned2 = "Delete=false"
)

// OwnerLabel is the label Build gives every object named with a suffix
// (but shared ones), in its metadata, its selectors and its pod templates:
// its value (OwnerLabelValue) tells one owner's pods from another's.
const OwnerLabel = "scribe.dev/owned-by"

// OwnerLabelValue is OwnerLabel's value for an owner's name suffix: the
// suffix without its leading dash.
func OwnerLabelValue(suffix string) string { return strings.TrimPrefix(suffix, "-") }

// PruneGuard reports whether annotation key is one of those Build sets on
// a shared object only to keep the appliers from pruning or deleting it
// (neverPruned), or the catalog's own copy of Flux's.
func PruneGuard(key string) bool { return key == fluxPruneKey || key == argoSyncOptsKey }

// maxOwnedName is the longest name a suffixed object may have: a DNS label,
// what a Service's name must be (the strictest of the kinds a catalog
// delivers; a Pod's hostname, a label value naming it).
const maxOwnedName = 63

// argoReferences tells kustomize where Argo Workflows objects name other
// objects of the component, so nameSuffix rewrites them as it does a
// RoleBinding's: a WorkflowTemplate's (or Workflow's, CronWorkflow's)
// service accounts, the ConfigMaps and Secrets its volumes mount, and the
// WorkflowTemplates its steps and tasks reference.
const argoReferences = `nameReference:
- kind: ServiceAccount
  version: v1
  fieldSpecs:
  - {group: argoproj.io, kind: WorkflowTemplate, path: spec/serviceAccountName}
  - {group: argoproj.io, kind: WorkflowTemplate, path: spec/templates/serviceAccountName}
  - {group: argoproj.io, kind: Workflow, path: spec/serviceAccountName}
  - {group: argoproj.io, kind: Workflow, path: spec/templates/serviceAccountName}
  - {group: argoproj.io, kind: CronWorkflow, path: spec/workflowSpec/serviceAccountName}
- kind: ConfigMap
  version: v1
  fieldSpecs:
  - {group: argoproj.io, kind: WorkflowTemplate, path: spec/volumes/configMap/name}
  - {group: argoproj.io, kind: Workflow, path: spec/volumes/configMap/name}
- kind: Secret
  version: v1
  fieldSpecs:
  - {group: argoproj.io, kind: WorkflowTemplate, path: spec/volumes/secret/secretName}
  - {group: argoproj.io, kind: Workflow, path: spec/volumes/secret/secretName}
- kind: WorkflowTemplate
  group: argoproj.io
  fieldSpecs:
  - {group: argoproj.io, kind: WorkflowTemplate, path: spec/templates/dag/tasks/templateRef/name}
  - {group: argoproj.io, kind: WorkflowTemplate, path: spec/templates/steps/templateRef/name}
  - {group: argoproj.io, kind: Workflow, path: spec/workflowTemplateRef/name}
  - {group: argoproj.io, kind: CronWorkflow, path: spec/workflowSpec/workflowTemplateRef/name}
`

// writeOverlay writes the kustomization Build builds: the entry's, with
// req's namespace and name suffix (and argoReferences for the suffix).
func writeOverlay(mem filesys.FileSystem, req Request) error {
	overlay := kustypes.Kustomization{
		TypeMeta:   kustypes.TypeMeta{APIVersion: kustypes.KustomizationVersion, Kind: kustypes.KustomizationKind},
		Namespace:  req.Namespace,
		NameSuffix: req.NameSuffix,
		Resources:  []string{"../entry"},
	}
	if req.NameSuffix != "" {
		// The owner's label joins every selector, so that a Service or
		// a Deployment of one owner never selects the pods of
		// another's in a shared namespace (nameSuffix renames objects,
		// not the labels selectors match).
		overlay.Labels = []kustypes.Label{{Pairs: map[string]string{OwnerLabel: OwnerLabelValue(req.NameSuffix)}, IncludeSelectors: true}}
		overlay.Configurations = []string{"argo-references.yaml"}
		if err := mem.WriteFile(overlayRoot+"/argo-references.yaml", []byte(argoReferences)); err != nil {
			return fmt.Errorf("name overlay: %w", err)
		}
	}
	data, err := yaml.Marshal(overlay)
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	if err := mem.WriteFile(overlayRoot+"/kustomization.yaml", data); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	return nil
}

// checkOwned checks a built object named with suffix: its name fits
// maxOwnedName; a shared one (SharedKind) loses OwnerLabel (two owners
// applying one Namespace would fight over its value) and gets the
// annotations that keep either applier from pruning it (neverPruned).
// Without a suffix it does nothing.
func checkOwned(obj map[string]any, suffix string) error {
	if suffix == "" {
		return nil
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	group := ""
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		group = apiVersion[:i]
	}
	if SharedKind(group, kind) {
		if labels, _ := md["labels"].(map[string]any); labels != nil {
			delete(labels, OwnerLabel)
			if len(labels) == 0 {
				delete(md, "labels")
			}
		}
		neverPruned(obj)
		return nil
	}
	if len(name) > maxOwnedName {
		return fmt.Errorf("%s/%s: its name with the owner's suffix %q is %d characters, more than %d: shorten the name in the catalog to at most %d characters",
			kind, name, suffix, len(name), maxOwnedName, maxOwnedName-len(suffix))
	}
	return nil
}

// neverPruned sets the annotations of a shared object (see fluxPruneKey),
// keeping any other Argo CD sync option it has.
func neverPruned(obj map[string]any) {
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[fluxPruneKey] = fluxPruneOff
	var opts []string
	if s, _ := ann[argoSyncOptsKey].(string); s != "" {
		for _, o := range strings.Split(s, ",") {
			o = strings.TrimSpace(o)
			if k, _, _ := strings.Cut(o, "="); k != "Prune" && k != "Delete" && o != "" {
				opts = append(opts, o)
			}
		}
	}
	ann[argoSyncOptsKey] = strings.Join(append(opts, argoNeverPruned1, argoNeverPruned2), ",")
}
