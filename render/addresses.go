package render

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// Target outputs wired into dependents. A workflow param (spec.workflow.params,
// or a workflow component's params) may name another target's address,
// `{{ targets.<name>.address }}`: the address the target's delivered objects
// report (a Gateway's, a LoadBalancer Service's, an Ingress's), which the
// controller reads back once the target is ready and passes in
// Resolved.TargetAddresses. Workflows are committed from stage 3 on, after
// every target is ready, so the address is known by then and the commit
// (or pull request) shows it.

// addressRef matches a reference to a target's address in a param string.
var addressRef = regexp.MustCompile(`\{\{\s*targets\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.address\s*\}\}`)

// addressPending stands for an address not known yet in renders of the
// stages before any workflow is committed (their params are only checked).
const addressPending = "address.pending.invalid"

// substituteAddresses replaces every `{{ targets.<name>.address }}` in the
// strings of params (a decoded JSON value) and returns the result. at is the
// params' field path; targets the spec's target names; known says whether
// the addresses must be known (the stage commits workflows). A target that
// the spec lacks, or whose address is not known when it must be, is an
// error naming the param.
func substituteAddresses(params any, at string, targets map[string]bool, addrs map[string]string, known bool) (any, []FieldError) {
	var errs []FieldError
	var walk func(v any, at string) any
	walk = func(v any, at string) any {
		switch x := v.(type) {
		case string:
			return addressRef.ReplaceAllStringFunc(x, func(m string) string {
				name := addressRef.FindStringSubmatch(m)[1]
				switch {
				case !targets[name]:
					errs = append(errs, FieldError{Path: at, Message: fmt.Sprintf("%s names target %q, which spec.targets lacks", m, name)})
				case addrs[name] != "":
					return addrs[name]
				case known:
					errs = append(errs, FieldError{Path: at, Message: fmt.Sprintf("%s: target %q reports no address: none of its delivered objects (a Gateway, a Service of type LoadBalancer, an Ingress) has one in its status", m, name)})
				}
				return addressPending
			})
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[k] = walk(e, at+"."+k)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = walk(e, fmt.Sprintf("%s[%d]", at, i))
			}
			return out
		}
		return v
	}
	out := walk(params, at)
	return out, errs
}

// refusesAddresses reports, for the params of a component delivered at
// stage 2 (before any target is ready), each string that names a target's
// address: it cannot be known when they are committed.
func refusesAddresses(params any, at string) []FieldError {
	var errs []FieldError
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case string:
			if m := addressRef.FindString(x); m != "" {
				errs = append(errs, FieldError{Path: at, Message: fmt.Sprintf("%s: only workflow params (spec.workflow.params, a workflow component's params) may name a target's address; this component is committed at stage 2, before any target reports one", m)})
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(x[k], at+"."+k)
			}
		case []any:
			for i, e := range x {
				walk(e, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	}
	walk(params, at)
	return errs
}

// addressKinds are the kinds whose status may carry a target's address, in
// the order the controller prefers them: a Gateway, a Service of type
// LoadBalancer, an Ingress.
var addressKinds = map[string]int{"Gateway": 0, "Service": 1, "Ingress": 2}

// addressable lists the objects of a target's hydrated components (files
// under components/<target>/) that may report its address, in preference
// order, then by path.
func addressable(comps []stagedComponent, target string) []scribev1.ObjectIdentity {
	type found struct {
		rank int
		path string
		id   scribev1.ObjectIdentity
	}
	var out []found
	prefix := path.Join(componentsDir, target) + "/"
	for _, c := range comps {
		if c.stage != scribev1.StageComponents || !strings.HasPrefix(c.Dir+"/", prefix) {
			continue
		}
		for _, f := range c.Files {
			var o struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
				Spec struct {
					Type string `json:"type"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(f.Data, &o); err != nil {
				continue
			}
			rank, ok := addressKinds[o.Kind]
			if !ok || (o.Kind == "Service" && o.Spec.Type != "LoadBalancer") {
				continue
			}
			out = append(out, found{rank: rank, path: f.Path, id: scribev1.ObjectIdentity{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Metadata.Namespace, Name: o.Metadata.Name}})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].rank != out[j].rank {
			return out[i].rank < out[j].rank
		}
		return out[i].path < out[j].path
	})
	ids := make([]scribev1.ObjectIdentity, len(out))
	for i, f := range out {
		ids[i] = f.id
	}
	return ids
}

// AddressesNamed lists the targets whose address the Experiment's workflow
// params name: the controller waits for those to report one before the
// workflows are committed.
func AddressesNamed(x *scribev1.Experiment) map[string]bool {
	out := map[string]bool{}
	add := func(raw []byte) {
		for _, m := range addressRef.FindAllSubmatch(raw, -1) {
			out[string(m[1])] = true
		}
	}
	if wf := x.Spec.Workflow; wf != nil && wf.Params != nil {
		add(wf.Params.Raw)
	}
	for _, t := range x.Spec.Targets {
		for _, c := range t.Components {
			if c.Workflow != "" && c.Params != nil {
				add(c.Params.Raw)
			}
		}
	}
	return out
}
