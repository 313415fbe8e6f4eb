package render

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// validateCRMetadata runs the kube-apiserver's metadata validation of a
// custom resource on md (namespaced: it needs a namespace): the name as a DNS-1123 subdomain (the
// rule the apiserver applies to every custom resource), the namespace as a
// DNS-1123 label, labels, annotations, owner references and finalizers.
// The CRD's schema says nothing about metadata, so without this a name
// carrying a newline, `---` or `../` would reach the templates and the
// paths of the bundle.
func validateCRMetadata(md map[string]any, namespaced bool) []FieldError {
	var om metav1.ObjectMeta
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &om); err != nil {
		return []FieldError{{Path: "metadata", Message: fmt.Sprintf("Invalid value: %v", err)}}
	}
	errs := fieldErrors(apimachineryvalidation.ValidateObjectMetaAccessor(&om, namespaced, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata")))
	// Labels and annotations are validated in map order.
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

// validateListSetsAndMaps is the apiserver's check that the items of
// x-kubernetes-list-type set and map lists are unique. A duplicate item of a
// map list with one key is reported at the key field with the key's value
// (`spec.versions[2].name: Duplicate value: "v1"`), not as the apiserver's
// map literal.
func (v *crValidator) validateListSetsAndMaps(obj map[string]any) []FieldError {
	errs := listtype.ValidateListSetsAndMaps(nil, v.structural, obj)
	for i, e := range errs {
		if e.Type != field.ErrorTypeDuplicate {
			continue
		}
		if key, ok := e.BadValue.(map[string]any); ok && len(key) == 1 {
			for k, val := range key {
				errs[i] = field.Duplicate(field.NewPath(e.Field).Child(k), val)
			}
		}
	}
	return fieldErrors(errs)
}

// fieldErrors converts apimachinery field errors.
func fieldErrors(errs field.ErrorList) []FieldError {
	if len(errs) == 0 {
		return nil
	}
	out := make([]FieldError, 0, len(errs))
	for _, e := range errs {
		out = append(out, FieldError{Path: e.Field, Message: e.ErrorBody()})
	}
	return out
}

// dependsCycles reports every cycle among an Experiment's targets through
// spec.targets[].depends: Flux would wait on such targets forever. The
// CRD's CEL rule already refuses a target that depends on itself or on a
// target that does not exist.
func dependsCycles(x *scribev1.Experiment) []FieldError {
	deps := make(map[string][]string, len(x.Spec.Targets))
	var order []string
	for _, t := range x.Spec.Targets {
		if _, seen := deps[t.Name]; !seen {
			order = append(order, t.Name)
		}
		deps[t.Name] = append(deps[t.Name], t.Depends...)
	}
	const (
		unvisited = iota
		onStack
		done
	)
	state := make(map[string]int, len(deps))
	var stack []string
	var cycles []string
	seen := map[string]bool{}
	var visit func(n string)
	visit = func(n string) {
		state[n] = onStack
		stack = append(stack, n)
		for _, d := range deps[n] {
			if _, known := deps[d]; !known {
				continue
			}
			switch state[d] {
			case unvisited:
				visit(d)
			case onStack:
				i := len(stack) - 1
				for stack[i] != d {
					i--
				}
				cycle := append(append([]string{}, stack[i:]...), d)
				if key := canonicalCycle(cycle); !seen[key] {
					seen[key] = true
					cycles = append(cycles, strings.Join(cycle, " -> "))
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, n := range order {
		if state[n] == unvisited {
			visit(n)
		}
	}
	out := make([]FieldError, 0, len(cycles))
	for _, c := range cycles {
		out = append(out, FieldError{Path: "spec.targets", Message: "depends cycle " + c})
	}
	return out
}

// duplicateComponents reports a component named twice in one target
// (spec.targets[].components is an atomic list, so the CRD cannot): the
// template would merge the two into one delivery, or fail on a conflict
// between their params at a template line.
func duplicateComponents(x *scribev1.Experiment) []FieldError {
	var out []FieldError
	for i, t := range x.Spec.Targets {
		seen := map[string]bool{}
		for j, c := range t.Components {
			kind, name := componentRef(c)
			key := string(kind) + "/" + name
			if seen[key] {
				p := field.NewPath("spec", "targets").Index(i).Child("components").Index(j).Child(string(kind))
				out = append(out, fieldErrors(field.ErrorList{field.Duplicate(p, name)})...)
			}
			seen[key] = true
		}
	}
	return out
}

// canonicalCycle names a cycle (first node repeated at the end)
// independently of where it was entered.
func canonicalCycle(cycle []string) string {
	nodes := append([]string{}, cycle[:len(cycle)-1]...)
	sort.Strings(nodes)
	return strings.Join(nodes, "\x00")
}
