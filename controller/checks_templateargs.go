package controller

import (
	"fmt"
	"strings"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// The args of an Argo Rollouts template are filled from three places: the
// Workload's spec.rollout.analysis.args, Scribe's own (version, namespace,
// workload) and the template's defaults. A ClusterAnalysisTemplate is the
// platform's, and its query often scopes by {{args.namespace}} (a tenant
// header, a label matcher): a Workload that could give namespace would
// read another tenant's metrics through it. So a Workload never gives
// namespace or workload (they are its own, or the template's default),
// and a template pins any other arg with the
// annotation scribe.dev/pinned-args; a Workload that gives a pinned or
// reserved arg fails the round naming the field, rather than having its
// value silently dropped.

// reservedArgs are the args Scribe always fills from the Workload itself.
var reservedArgs = []string{"namespace", "workload"}

// pinnedArgs reads a template's scribe.dev/pinned-args annotation: arg
// names separated by commas, spaces or new lines.
func pinnedArgs(annotations map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, n := range strings.FieldsFunc(annotations[scribev1.PinnedArgsAnnotation], func(r rune) bool {
		return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r'
	}) {
		out[n] = true
	}
	return out
}

// ReservedArgError says why arg i of a Workload's analysis (named name)
// cannot be given, or nil. The CRD refuses the reserved names too; this
// guards objects stored before it.
func ReservedArgError(i int, name string) error {
	for _, r := range reservedArgs {
		if name == r {
			return fmt.Errorf("spec.rollout.analysis.args[%d]: arg %s is always the Workload's own %s and cannot be given", i, name, name)
		}
	}
	return nil
}

// templateArgs are the values of a template's declared args: the
// Workload's spec.rollout.analysis.args (never namespace or workload, nor
// an arg the template pins: those are an error naming the field); else
// the template's default; else version, namespace and workload for args
// of those names. pinned are the args the template pins (pinnedArgs).
func templateArgs(w *scribev1.Workload, declared []argoArg, pinned map[string]bool, version string) (map[string]string, error) {
	given := map[string]string{}
	for i, a := range w.Spec.Rollout.Analysis.Args {
		if err := ReservedArgError(i, a.Name); err != nil {
			return nil, err
		}
		if pinned[a.Name] {
			return nil, fmt.Errorf("spec.rollout.analysis.args[%d]: arg %s is pinned by the template (annotation %s) and cannot be given", i, a.Name, scribev1.PinnedArgsAnnotation)
		}
		given[a.Name] = a.Value
	}
	builtin := map[string]string{"version": version, "namespace": w.Namespace, "workload": w.Name}
	values := map[string]string{}
	for _, a := range declared {
		if v, ok := given[a.Name]; ok {
			values[a.Name] = v
			continue
		}
		if len(a.ValueFrom) > 0 && string(a.ValueFrom) != "null" {
			return nil, fmt.Errorf("arg %s: valueFrom is not supported; give its value in spec.rollout.analysis.args", a.Name)
		}
		switch v, ok := builtin[a.Name]; {
		case a.Value != nil:
			values[a.Name] = *a.Value
		case ok:
			values[a.Name] = v
		case pinned[a.Name]:
			return nil, fmt.Errorf("arg %s is pinned by the template (annotation %s) but has no value there", a.Name, scribev1.PinnedArgsAnnotation)
		default:
			return nil, fmt.Errorf("arg %s has no value: give it in spec.rollout.analysis.args", a.Name)
		}
	}
	return values, nil
}
