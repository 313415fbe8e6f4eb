package main

import (
	"fmt"
	"strconv"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// defaultRepository is the Repository a Workload or Experiment without
// spec.repositoryRef publishes through, in its own namespace.
const defaultRepository = "default"

// repoRef is one reference of a custom resource to a Repository of its
// namespace: the field that holds it and the name it gives.
type repoRef struct {
	field string
	name  string
	// implicit: the field is unset and the default Repository is meant.
	implicit bool
}

// repoRefs lists the Repository references of a custom resource's JSON
// shape: a Workload's or Experiment's spec.repositoryRef (unset: the
// Repository "default"), each stage's of a Pipeline. Other kinds name none.
func repoRefs(obj map[string]any) []repoRef {
	kind, _ := obj["kind"].(string)
	spec, _ := obj["spec"].(map[string]any)
	refName := func(v any) string {
		ref, _ := v.(map[string]any)
		name, _ := ref["name"].(string)
		return name
	}
	switch kind {
	case scribev1.WorkloadKind, scribev1.ExperimentKind:
		if name := refName(spec["repositoryRef"]); name != "" {
			return []repoRef{{field: "spec.repositoryRef.name", name: name}}
		}
		return []repoRef{{field: "spec.repositoryRef", name: defaultRepository, implicit: true}}
	case scribev1.PipelineKind:
		stages, _ := spec["stages"].([]any)
		var out []repoRef
		for i, st := range stages {
			stage, _ := st.(map[string]any)
			if name := refName(stage["repositoryRef"]); name != "" {
				out = append(out, repoRef{field: fmt.Sprintf("spec.stages[%d].repositoryRef.name", i), name: name})
			}
		}
		return out
	}
	return nil
}

// namespaceOf is the namespace of a namespaced custom resource's JSON
// shape, "default" when it has none (as the apiserver and render take it).
func namespaceOf(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	if ns, _ := md["namespace"].(string); ns != "" {
		return ns
	}
	return "default"
}

// danglingRefs says, one line each sorted as objs, which references of
// objs name a Repository that no object of objs defines in the
// referring object's namespace.
func danglingRefs(objs []map[string]any) []string {
	defined := map[string]bool{}
	for _, o := range objs {
		if kind, _ := o["kind"].(string); kind == scribev1.RepositoryKind {
			md, _ := o["metadata"].(map[string]any)
			name, _ := md["name"].(string)
			defined[namespaceOf(o)+"/"+name] = true
		}
	}
	var out []string
	for _, o := range objs {
		ns := namespaceOf(o)
		for _, r := range repoRefs(o) {
			if defined[ns+"/"+r.name] {
				continue
			}
			kind, _ := o["kind"].(string)
			md, _ := o["metadata"].(map[string]any)
			name, _ := md["name"].(string)
			what := fmt.Sprintf("Repository %s", strconv.Quote(r.name))
			if r.implicit {
				what = fmt.Sprintf("unset, so the Repository %s", strconv.Quote(r.name))
			}
			out = append(out, fmt.Sprintf("%s %s/%s: %s: %s of namespace %s is not defined in the input", kind, ns, name, r.field, what, ns))
		}
	}
	return out
}
