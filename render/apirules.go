package render

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxObjectBytes bounds a rendered object's JSON: 1.5 MiB is etcd's
// default request limit (--max-request-bytes), which the kube-apiserver
// runs into when it stores a larger object.
const maxObjectBytes = 3 << 19

// apiViolation is one thing the kube-apiserver would refuse in a rendered
// object. trace is the value to look for in the custom resource, to name
// the CR field it came from ("" when there is none).
type apiViolation struct {
	err   *field.Error
	trace string
	// prefix: the value may be built from a CR string and a suffix (an
	// object name such as <workload>-<version>).
	prefix bool
	// refusedBy says who refuses the value, when not the kube-apiserver.
	refusedBy string
}

// apiRules checks a rendered object for what the kube-apiserver's own
// validation of its kind would refuse, with the validation functions the
// apiserver uses: the name per kind, namespace, labels and annotations;
// ConfigMap keys and size; in pod templates container, port and volume
// names, environment variable names and nodeSelector keys; Service port
// names; and the size of the whole object. The closed schemas
// (schemacheck.go) check shapes and types; these are the rules the OpenAPI
// schemas cannot express. size is the length of the object's JSON.
func apiRules(apiVersion, kind string, obj map[string]any, size int) []apiViolation {
	var out []apiViolation
	add := func(trace string, errs ...*field.Error) {
		for _, e := range errs {
			out = append(out, apiViolation{err: e, trace: trace})
		}
	}
	if size > maxObjectBytes {
		e := field.TooLong(field.NewPath("<object>"), "", maxObjectBytes)
		e.Detail = fmt.Sprintf("the object is %d bytes as JSON, over the %d bytes the apiserver stores", size, maxObjectBytes)
		add("", e)
	}

	md, _ := obj["metadata"].(map[string]any)
	mdPath := field.NewPath("metadata")
	name, _ := md["name"].(string)
	if name == "" {
		add("", field.Required(mdPath.Child("name"), ""))
	} else {
		for _, msg := range nameRule(apiVersion, kind)(name, false) {
			out = append(out, apiViolation{err: field.Invalid(mdPath.Child("name"), name, msg), trace: name, prefix: true})
		}
		// Not the apiserver's rule but the kind's controller's: it labels
		// what it creates for the object with the object's name.
		if l := labelledBy(apiVersion, kind); l.why != "" {
			for _, msg := range utilvalidation.IsValidLabelValue(name) {
				e := field.Invalid(mdPath.Child("name"), name, msg+" (a label value: "+l.why+")")
				out = append(out, apiViolation{err: e, trace: name, prefix: true, refusedBy: l.then})
			}
		}
	}
	if ns, _ := md["namespace"].(string); ns != "" {
		for _, msg := range apimachineryvalidation.ValidateNamespaceName(ns, false) {
			add(ns, field.Invalid(mdPath.Child("namespace"), ns, msg))
		}
	}
	out = append(out, metadataRules(md, mdPath)...)

	switch {
	case apiVersion == "v1" && kind == "ConfigMap":
		out = append(out, configMapRules(obj)...)
	case apiVersion == "v1" && kind == "Service":
		spec, _ := obj["spec"].(map[string]any)
		ports, _ := spec["ports"].([]any)
		p := field.NewPath("spec", "ports")
		for i, port := range ports {
			pm, _ := port.(map[string]any)
			if n, _ := pm["name"].(string); n != "" {
				for _, msg := range utilvalidation.IsDNS1123Label(n) {
					add(n, field.Invalid(p.Index(i).Child("name"), n, msg))
				}
			}
		}
	}
	if tmpl, at := podTemplate(apiVersion, kind, obj); tmpl != nil {
		if at != nil { // a Pod's own metadata is checked above
			tmd, _ := tmpl["metadata"].(map[string]any)
			out = append(out, metadataRules(tmd, at.Child("metadata"))...)
		}
		spec, _ := tmpl["spec"].(map[string]any)
		specPath := field.NewPath("spec")
		if at != nil {
			specPath = at.Child("spec")
		}
		out = append(out, podSpecRules(spec, specPath)...)
	}
	return out
}

// labelledBy says, for a kind whose controller labels what it creates for
// an object with the object's name, why the name must be a label value and
// what a longer one does; both are empty for any other kind. The kinds:
// kustomize-controller labels every object a Kustomization applies
// (kustomize.toolkit.fluxcd.io/name, fluxcd/flux2#2004), helm-controller
// every object of a HelmRelease's release (helm.toolkit.fluxcd.io/name),
// Argo Workflows every pod of a Workflow (workflows.argoproj.io/workflow,
// argoproj/argo-workflows#1324), Cluster API every object of a Cluster
// (cluster.x-k8s.io/cluster-name, which its Machine and MachineSet
// selectors match).
func labelledBy(apiVersion, kind string) (l struct{ why, then string }) {
	group, _, _ := strings.Cut(apiVersion, "/")
	switch {
	case group == "kustomize.toolkit.fluxcd.io" && kind == "Kustomization":
		l.why, l.then = "Flux labels every object a Kustomization applies with its name", "kustomize-controller would apply nothing"
	case group == "helm.toolkit.fluxcd.io" && kind == "HelmRelease":
		l.why, l.then = "Flux labels every object a HelmRelease applies with its name", "helm-controller would apply nothing"
	case group == "argoproj.io" && kind == "Workflow":
		l.why, l.then = "Argo Workflows labels every pod of a Workflow with its name", "Argo Workflows would start no pod"
	case group == "cluster.x-k8s.io" && kind == "Cluster":
		l.why, l.then = "Cluster API labels every object of a Cluster with its name", "Cluster API would create no machine"
	}
	return l
}

// nameRule is the apiserver's name validation of a kind: Services are
// DNS-1035 labels (what every apiserver release accepts; 1.36 relaxes it
// to DNS-1123 labels behind a beta gate), Namespaces DNS-1123 labels, RBAC
// objects path segments, everything else (custom resources included)
// DNS-1123 subdomains.
func nameRule(apiVersion, kind string) apimachineryvalidation.ValidateNameFunc {
	switch {
	case apiVersion == "v1" && kind == "Service":
		return apimachineryvalidation.NameIsDNS1035Label
	case apiVersion == "v1" && kind == "Namespace":
		return apimachineryvalidation.ValidateNamespaceName
	case apiVersion == "rbac.authorization.k8s.io/v1":
		return pathSegmentName
	}
	return apimachineryvalidation.NameIsDNSSubdomain
}

// pathSegmentName is the apiserver's name rule for RBAC objects: a name
// that can be a URL path segment (a prefix for generateName).
func pathSegmentName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// metadataRules checks labels and annotations as ObjectMeta validation does.
func metadataRules(md map[string]any, at *field.Path) []apiViolation {
	var out []apiViolation
	if labels := stringMap(md["labels"]); len(labels) > 0 {
		out = append(out, traced(metav1validation.ValidateLabels(labels, at.Child("labels")))...)
	}
	if annotations := stringMap(md["annotations"]); len(annotations) > 0 {
		out = append(out, traced(apimachineryvalidation.ValidateAnnotations(annotations, at.Child("annotations")))...)
	}
	return out
}

// configMapRules is the apiserver's ValidateConfigMap: keys, a key in both
// data and binaryData, and at most 1 MiB of data in all.
func configMapRules(obj map[string]any) []apiViolation {
	var out []apiViolation
	data, _ := obj["data"].(map[string]any)
	binary, _ := obj["binaryData"].(map[string]any)
	total, biggest, biggestLen := 0, "", -1
	for _, k := range sortedKeys(data) {
		for _, msg := range utilvalidation.IsConfigMapKey(k) {
			out = append(out, apiViolation{err: field.Invalid(field.NewPath("data").Key(k), k, msg), trace: k})
		}
		if _, dup := binary[k]; dup {
			out = append(out, apiViolation{err: field.Invalid(field.NewPath("data").Key(k), k, "duplicate of key present in binaryData"), trace: k})
		}
		s, _ := data[k].(string)
		total += len(s)
		if len(s) > biggestLen {
			biggest, biggestLen = k, len(s)
		}
	}
	for _, k := range sortedKeys(binary) {
		for _, msg := range utilvalidation.IsConfigMapKey(k) {
			out = append(out, apiViolation{err: field.Invalid(field.NewPath("binaryData").Key(k), k, msg), trace: k})
		}
		s, _ := binary[k].(string) // base64 in JSON
		n := base64.StdEncoding.DecodedLen(len(s))
		if len(s) >= 2 && s[len(s)-1] == '=' {
			n--
			if s[len(s)-2] == '=' {
				n--
			}
		}
		total += n
		if n > biggestLen {
			biggest, biggestLen = k, n
		}
	}
	if total > corev1.MaxSecretSize {
		out = append(out, apiViolation{
			err:   field.TooLong(field.NewPath("data"), "", corev1.MaxSecretSize),
			trace: biggest,
		})
		out[len(out)-1].err.Detail = fmt.Sprintf("data and binaryData hold %d bytes, over the %d bytes of a ConfigMap (the largest entry is %q)", total, corev1.MaxSecretSize, biggest)
	}
	return out
}

// podTemplate finds the pod template of the built-in workload kinds and
// its path; a Pod is its own template (path nil).
func podTemplate(apiVersion, kind string, obj map[string]any) (map[string]any, *field.Path) {
	var at []string
	switch {
	case apiVersion == "v1" && kind == "Pod":
		return obj, nil
	case apiVersion == "apps/v1" && (kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" || kind == "ReplicaSet"),
		apiVersion == "batch/v1" && kind == "Job",
		apiVersion == "v1" && kind == "ReplicationController":
		at = []string{"spec", "template"}
	case apiVersion == "batch/v1" && kind == "CronJob":
		at = []string{"spec", "jobTemplate", "spec", "template"}
	default:
		return nil, nil
	}
	cur := obj
	for _, k := range at {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, nil
		}
		cur = next
	}
	return cur, field.NewPath(at[0], at[1:]...)
}

// podSpecRules checks what ValidatePodSpec checks of the names a template
// can carry from a custom resource.
func podSpecRules(spec map[string]any, at *field.Path) []apiViolation {
	var out []apiViolation
	add := func(trace string, errs ...*field.Error) {
		for _, e := range errs {
			out = append(out, apiViolation{err: e, trace: trace})
		}
	}
	if sel := stringMap(spec["nodeSelector"]); len(sel) > 0 {
		out = append(out, traced(metav1validation.ValidateLabels(sel, at.Child("nodeSelector")))...)
	}
	volumes, _ := spec["volumes"].([]any)
	for i, v := range volumes {
		vm, _ := v.(map[string]any)
		n, _ := vm["name"].(string)
		for _, msg := range utilvalidation.IsDNS1123Label(n) {
			add(n, field.Invalid(at.Child("volumes").Index(i).Child("name"), n, msg))
		}
	}
	names := map[string]bool{}
	for _, list := range []string{"initContainers", "containers", "ephemeralContainers"} {
		containers, _ := spec[list].([]any)
		for i, c := range containers {
			cm, _ := c.(map[string]any)
			cp := at.Child(list).Index(i)
			n, _ := cm["name"].(string)
			for _, msg := range utilvalidation.IsDNS1123Label(n) {
				add(n, field.Invalid(cp.Child("name"), n, msg))
			}
			if names[n] {
				add(n, field.Duplicate(cp.Child("name"), n))
			}
			names[n] = true
			env, _ := cm["env"].([]any)
			for j, ev := range env {
				em, _ := ev.(map[string]any)
				en, _ := em["name"].(string)
				for _, msg := range utilvalidation.IsRelaxedEnvVarName(en) {
					add(en, field.Invalid(cp.Child("env").Index(j).Child("name"), en, msg))
				}
			}
			envFrom, _ := cm["envFrom"].([]any)
			for j, ef := range envFrom {
				em, _ := ef.(map[string]any)
				if p, _ := em["prefix"].(string); p != "" {
					for _, msg := range utilvalidation.IsRelaxedEnvVarName(p) {
						add(p, field.Invalid(cp.Child("envFrom").Index(j).Child("prefix"), p, msg))
					}
				}
			}
			ports, _ := cm["ports"].([]any)
			for j, port := range ports {
				pm, _ := port.(map[string]any)
				if pn, _ := pm["name"].(string); pn != "" {
					for _, msg := range utilvalidation.IsValidPortName(pn) {
						add(pn, field.Invalid(cp.Child("ports").Index(j).Child("name"), pn, msg))
					}
				}
			}
		}
	}
	return out
}

// traced turns the errors of a map validation (labels, annotations,
// nodeSelector) into violations, each traced by the invalid key or value
// it names, sorted (the validation walks the map in random order).
func traced(errs field.ErrorList) []apiViolation {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	out := make([]apiViolation, 0, len(errs))
	for _, e := range errs {
		trace, _ := e.BadValue.(string)
		out = append(out, apiViolation{err: e, trace: trace})
	}
	return out
}

// stringMap is the string entries of a JSON object (others are the
// schema check's to report).
func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		if s, ok := e.(string); ok {
			out[k] = s
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// locateInCR finds where a value of a rendered object came from: the path
// of the first map key or string in the custom resource equal to value,
// searching spec, then metadata, then status, and maps in key order. An
// empty value is looked for among map keys only (an empty string is too
// common to say where it came from). With prefix, a value not found is
// traced to the longest CR string it starts with followed by '-'. It is ""
// when nothing is found.
func locateInCR(cr map[string]any, value string, prefix bool) string {
	if cr == nil {
		return ""
	}
	tops := []string{"spec", "metadata", "status"}
	for _, top := range tops {
		if p := locate(cr[top], value, field.NewPath(top)); p != nil {
			return p.String()
		}
	}
	if !prefix {
		return ""
	}
	best, bestLen := "", 0
	for _, top := range tops {
		walkStrings(cr[top], field.NewPath(top), func(s string, at *field.Path) {
			if len(s) > bestLen && len(value) > len(s) && value[len(s)] == '-' && value[:len(s)] == s {
				best, bestLen = at.String(), len(s)
			}
		})
	}
	return best
}

func locate(v any, value string, at *field.Path) *field.Path {
	switch t := v.(type) {
	case string:
		if t == value && value != "" {
			return at
		}
	case map[string]any:
		keys := sortedKeys(t)
		for _, k := range keys {
			if k == value {
				return at.Key(k)
			}
		}
		for _, k := range keys {
			if p := locate(t[k], value, child(at, k)); p != nil {
				return p
			}
		}
	case []any:
		for i, e := range t {
			if p := locate(e, value, at.Index(i)); p != nil {
				return p
			}
		}
	}
	return nil
}

// walkStrings calls f with every string of v and its path, maps in key order.
func walkStrings(v any, at *field.Path, f func(string, *field.Path)) {
	switch t := v.(type) {
	case string:
		f(t, at)
	case map[string]any:
		for _, k := range sortedKeys(t) {
			walkStrings(t[k], child(at, k), f)
		}
	case []any:
		for i, e := range t {
			walkStrings(e, at.Index(i), f)
		}
	}
}

// child is the path of a map entry: .k for a field name, [k] for any other
// key (a label such as kubernetes.io/arch).
func child(at *field.Path, k string) *field.Path {
	for i, r := range k {
		identChar := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9'
		if !identChar {
			return at.Key(k)
		}
	}
	if k == "" {
		return at.Key(k)
	}
	return at.Child(k)
}
