package controller_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// This file enforces DESIGN.md's "one invariant": Scribe writes only to
// Git/OCI, its own resources (status, finalizers), Events, its Lease, and
// the reconcile-request annotation on Flux sources and Kustomizations and
// Argo CD Applications. (The Argo CD cluster Secrets of Experiments'
// remote targets are written only when the chart's argocdClusters.register
// grants a Role in Argo CD's namespace: not part of config/rbac.) It checks both config/rbac (what is deployed) and every
// +kubebuilder:rbac marker under controller/ (what `make manifests` will
// deploy next), so a new marker cannot widen the role silently.

const rbacDir = "../config/rbac"

// readVerbs may be granted on any named resource.
var readVerbs = []string{"get", "list", "watch"}

// allowedWrites lists, per group/resource, every verb beyond readVerbs that
// any rule may grant. Nothing else may be written.
var allowedWrites = map[string][]string{
	// Scribe's own resources: finalizers and metadata, status.
	// A Pipeline owns one Workload per stage: it creates them, changes
	// their versions and deletes a removed stage's (Scribe's own kind;
	// what the Workload renders stays read-only, below).
	"scribe.dev/workloads":               {"create", "update", "patch", "delete"},
	"scribe.dev/pipelines":               {"update", "patch"},
	"scribe.dev/pipelines/status":        {"update", "patch"},
	"scribe.dev/experiments":             {"update", "patch"},
	"scribe.dev/repositories":            {"update", "patch"},
	"scribe.dev/workloads/status":        {"update", "patch"},
	"scribe.dev/experiments/status":      {"update", "patch"},
	"scribe.dev/repositories/status":     {"update", "patch"},
	"scribe.dev/workloads/finalizers":    {"update", "patch"},
	"scribe.dev/experiments/finalizers":  {"update", "patch"},
	"scribe.dev/repositories/finalizers": {"update", "patch"},
	// Events.
	"/events":              {"create", "patch"},
	"events.k8s.io/events": {"create", "patch"},
	// Its Lease (leader election).
	"coordination.k8s.io/leases": {"create", "update", "patch", "delete"},
	// The reconcile-request annotation, patch only.
	"source.toolkit.fluxcd.io/gitrepositories": {"patch"},
	"source.toolkit.fluxcd.io/ocirepositories": {"patch"},
	"argoproj.io/applications":                 {"patch"},
	// An Experiment's component Kustomizations, asked to retry when their
	// target cluster answers again.
	"kustomize.toolkit.fluxcd.io/kustomizations": {"patch"},
	// --metrics-secure authenticates and authorizes scrapes; these reviews
	// are queries that store nothing.
	"authentication.k8s.io/tokenreviews":        {"create"},
	"authorization.k8s.io/subjectaccessreviews": {"create"},
}

// renderedKinds are group/resource patterns ("group/*" for a whole group)
// of kinds Scribe renders into Git and must never write in a cluster. The
// kinds of fixtures/golden are added to these by renderedFromGolden.
var renderedKinds = []string{
	"apps/deployments",
	"/services",
	"/configmaps",
	"autoscaling/horizontalpodautoscalers",
	"keda.sh/scaledobjects",
	"gateway.networking.k8s.io/httproutes",
	"argoproj.io/workflows",
	"testworkflows.testkube.io/*",
	"cluster.x-k8s.io/clusters",
	"infrastructure.cluster.x-k8s.io/*",
	"controlplane.cluster.x-k8s.io/*",
	"bootstrap.cluster.x-k8s.io/*",
	"kustomize.toolkit.fluxcd.io/kustomizations",
}

// reconcileRequest are the rendered kinds on which patch is allowed: the
// applier sources that take the reconcile-request annotation.
var reconcileRequest = []string{
	"source.toolkit.fluxcd.io/gitrepositories",
	"source.toolkit.fluxcd.io/ocirepositories",
	"argoproj.io/applications",
	"kustomize.toolkit.fluxcd.io/kustomizations",
}

// rule is one PolicyRule and where it came from, for messages.
type rule struct {
	where string
	rbacv1.PolicyRule
}

func (r rule) String() string {
	return fmt.Sprintf("%s: apiGroups=%q resources=%q verbs=%q nonResourceURLs=%q", r.where, r.APIGroups, r.Resources, r.Verbs, r.NonResourceURLs)
}

func TestRBACNeverWritesRenderedKinds(t *testing.T) {
	rendered := append(slices.Clone(renderedKinds), renderedFromGolden(t)...)
	rules := append(rulesFromConfig(t), rulesFromMarkers(t)...)
	if len(rules) == 0 {
		t.Fatal("no RBAC rules found")
	}
	for _, r := range rules {
		for _, msg := range violations(r, rendered) {
			t.Errorf("%s\n    %s", msg, r)
		}
	}
}

// TestRBACPolicyCatchesWrites proves the check itself: rules that break
// the invariant are reported.
func TestRBACPolicyCatchesWrites(t *testing.T) {
	rendered := append(slices.Clone(renderedKinds), "helm.toolkit.fluxcd.io/helmreleases")
	bad := []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"*"}},
		{APIGroups: []string{"*"}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"list"}},
		{APIGroups: []string{"infrastructure.cluster.x-k8s.io"}, Resources: []string{"gcpclusters"}, Verbs: []string{"delete"}},
		{APIGroups: []string{"kustomize.toolkit.fluxcd.io"}, Resources: []string{"kustomizations"}, Verbs: []string{"create"}},
		{APIGroups: []string{"helm.toolkit.fluxcd.io"}, Resources: []string{"helmreleases"}, Verbs: []string{"update"}},
		{APIGroups: []string{"source.toolkit.fluxcd.io"}, Resources: []string{"gitrepositories"}, Verbs: []string{"update"}},
		{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"}, Verbs: []string{"delete"}},
		{APIGroups: []string{"scribe.dev"}, Resources: []string{"repositories"}, Verbs: []string{"delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"deletecollection"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"post"}},
	}
	for _, p := range bad {
		if len(violations(rule{where: "test", PolicyRule: p}, rendered)) == 0 {
			t.Errorf("not reported: %s", rule{where: "test", PolicyRule: p})
		}
	}
	good := []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"source.toolkit.fluxcd.io"}, Resources: []string{"gitrepositories", "ocirepositories"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{"scribe.dev"}, Resources: []string{"workloads/status", "experiments/finalizers"}, Verbs: []string{"update", "patch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
	}
	for _, p := range good {
		r := rule{where: "test", PolicyRule: p}
		if v := violations(r, rendered); len(v) != 0 {
			t.Errorf("wrongly reported %s: %v", r, v)
		}
	}
}

// TestRBACRoleMatchesMarkers fails when a marker grants something
// config/rbac/role.yaml does not: `make manifests` was not run.
func TestRBACRoleMatchesMarkers(t *testing.T) {
	granted := map[string]bool{}
	for _, r := range rulesFromFile(t, filepath.Join(rbacDir, "role.yaml")) {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					granted[g+"/"+res+":"+v] = true
				}
			}
		}
	}
	for _, r := range rulesFromMarkers(t) {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if !granted[g+"/"+res+":"+v] {
						t.Errorf("config/rbac/role.yaml does not grant %s on %s/%s (run make manifests)\n    %s", v, g, res, r)
					}
				}
			}
		}
	}
	for _, need := range []string{"coordination.k8s.io/leases:create", "coordination.k8s.io/leases:update", "coordination.k8s.io/leases:get", "/events:create"} {
		if !granted[need] {
			t.Errorf("config/rbac/role.yaml lacks %s, which the manager needs", need)
		}
	}
}

// TestRBACKustomizationBindsTheRole builds config/rbac with kustomize and
// checks the ServiceAccount is bound to scribe-manager.
func TestRBACKustomizationBindsTheRole(t *testing.T) {
	abs, err := filepath.Abs(rbacDir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build config/rbac: %v", err)
	}
	have := map[string]bool{}
	userRoles := map[string]bool{}
	var bindings []rbacv1.ClusterRoleBinding
	bound := false
	for _, r := range res.Resources() {
		have[r.GetKind()+"/"+r.GetNamespace()+"/"+r.GetName()] = true
		if r.GetKind() == "ClusterRole" && forUsers(r.GetLabels()) {
			userRoles[r.GetName()] = true
		}
		if r.GetKind() == "RoleBinding" {
			t.Errorf("config/rbac has RoleBinding %s/%s; Scribe's grants are ClusterRoleBindings", r.GetNamespace(), r.GetName())
		}
		if r.GetKind() != "ClusterRoleBinding" {
			continue
		}
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var b rbacv1.ClusterRoleBinding
		if err := yaml.UnmarshalStrict(data, &b); err != nil {
			t.Fatalf("%s: %v", r.GetName(), err)
		}
		if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "scribe-manager" &&
			slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
				return s.Kind == "ServiceAccount" && s.Name == "scribe-controller" && s.Namespace == "scribe-system"
			}) {
			bound = true
		}
		bindings = append(bindings, b)
	}
	// The user-facing roles, which the invariant does not cover, are
	// bound to no one here: the API server aggregates them.
	for _, b := range bindings {
		if userRoles[b.RoleRef.Name] {
			t.Errorf("ClusterRoleBinding %s binds %s, a role aggregated into the built-in user roles", b.Name, b.RoleRef.Name)
		}
	}
	for _, want := range []string{"ClusterRole//scribe-manager", "ServiceAccount/scribe-system/scribe-controller", "ClusterRole//scribe-metrics-auth", "ClusterRole//scribe-edit", "ClusterRole//scribe-view"} {
		if !have[want] {
			t.Errorf("kustomize build config/rbac has no %s; it has %v", want, sortedKeys(have))
		}
	}
	if !bound {
		t.Error("no ClusterRoleBinding binds ClusterRole scribe-manager to ServiceAccount scribe-system/scribe-controller")
	}
}

// violations reports every way r breaks the invariant.
func violations(r rule, rendered []string) []string {
	var out []string
	if len(r.NonResourceURLs) > 0 {
		for _, v := range r.Verbs {
			if v != "get" {
				out = append(out, fmt.Sprintf("verb %q on non-resource URLs is outside the allow-list (get)", v))
			}
		}
		for _, u := range r.NonResourceURLs {
			if u != "/metrics" {
				out = append(out, fmt.Sprintf("non-resource URL %q is outside the allow-list (/metrics)", u))
			}
		}
		if len(r.Resources) == 0 {
			return out
		}
	}
	for _, g := range r.APIGroups {
		if g == "*" {
			out = append(out, `apiGroups "*" grants every group`)
		}
	}
	for _, res := range r.Resources {
		if res == "*" || strings.HasSuffix(res, "/*") {
			out = append(out, fmt.Sprintf("resources %q grants every resource", res))
		}
	}
	if len(r.ResourceNames) > 0 && len(r.Resources) == 0 {
		out = append(out, "resourceNames without resources")
	}
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			key := g + "/" + res
			for _, v := range r.Verbs {
				if slices.Contains(readVerbs, v) {
					continue
				}
				switch {
				case v == "*":
					out = append(out, fmt.Sprintf(`verb "*" on %s grants every write`, key))
				case matchesAny(key, rendered) && (v != "patch" || !slices.Contains(reconcileRequest, key)):
					out = append(out, fmt.Sprintf("Scribe renders %s: it must not %s it in a cluster", key, v))
				case !slices.Contains(allowedWrites[key], v):
					out = append(out, fmt.Sprintf("verb %q on %s is outside the allow-list %q", v, key, allowedWrites[key]))
				}
			}
		}
	}
	return out
}

// matchesAny reports whether group/resource key (subresources included)
// matches one of patterns ("group/resource" or "group/*").
func matchesAny(key string, patterns []string) bool {
	group, res, _ := strings.Cut(key, "/")
	res, _, _ = strings.Cut(res, "/")
	for _, p := range patterns {
		pg, pr, _ := strings.Cut(p, "/")
		if pg == group && (pr == "*" || pr == res) {
			return true
		}
	}
	return false
}

// rulesFromConfig reads every Role and ClusterRole in config/rbac.
func rulesFromConfig(t *testing.T) []rule {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(rbacDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, filepath.Join(rbacDir, "role.yaml")) {
		t.Fatalf("%s/role.yaml is missing (run make manifests)", rbacDir)
	}
	var out []rule
	for _, f := range files {
		out = append(out, rulesFromFile(t, f)...)
	}
	return out
}

// rulesFromFile decodes the rules of every Role and ClusterRole in file.
func rulesFromFile(t *testing.T, file string) []rule {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []rule
	for i, doc := range bytes.Split(data, []byte("\n---")) {
		doc = bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---"))
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s document %d: %v", file, i, err)
		}
		if meta.Kind != "ClusterRole" && meta.Kind != "Role" {
			continue
		}
		var role rbacv1.ClusterRole // a Role has the same fields but aggregationRule
		if err := yaml.UnmarshalStrict(doc, &role); err != nil {
			t.Fatalf("%s document %d: %v", file, i, err)
		}
		where := fmt.Sprintf("%s: %s %s", filepath.Base(file), meta.Kind, role.Name)
		if forUsers(role.Labels) {
			// Granted to namespace users through the built-in roles, never
			// to Scribe: TestRBACKustomizationBindsTheRole checks that no
			// binding names it.
			continue
		}
		if role.AggregationRule != nil {
			t.Errorf("%s aggregates other roles; its rules could widen without a change here", where)
		}
		for _, p := range role.Rules {
			out = append(out, rule{where: where, PolicyRule: p})
		}
	}
	return out
}

// forUsers reports whether a ClusterRole's labels aggregate it into a
// built-in user-facing role (edit, admin, view): such a role grants users,
// not Scribe, so the invariant does not apply to it.
func forUsers(labels map[string]string) bool {
	for k := range labels {
		if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
			return true
		}
	}
	return false
}

var markerRE = regexp.MustCompile(`^\s*//\s*\+kubebuilder:rbac:(.*)$`)

// rulesFromMarkers parses every +kubebuilder:rbac marker under controller/.
func rulesFromMarkers(t *testing.T) []rule {
	t.Helper()
	var out []rule
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".go" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for n, line := range strings.Split(string(data), "\n") {
			m := markerRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			r := rule{where: fmt.Sprintf("controller/%s:%d", filepath.ToSlash(path), n+1)}
			for _, arg := range strings.Split(m[1], ",") {
				k, v, ok := strings.Cut(strings.TrimSpace(arg), "=")
				if !ok {
					t.Errorf("%s: cannot parse marker argument %q", r.where, arg)
					continue
				}
				var vals []string
				for _, s := range strings.Split(v, ";") {
					s = strings.Trim(strings.TrimSpace(s), `"`)
					if k == "groups" && s == "core" {
						s = ""
					}
					vals = append(vals, s)
				}
				switch k {
				case "groups":
					r.APIGroups = vals
				case "resources":
					r.Resources = vals
				case "verbs":
					r.Verbs = vals
				case "urls":
					r.NonResourceURLs = vals
				case "resourceNames":
					r.ResourceNames = vals
				}
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no +kubebuilder:rbac markers under controller/")
	}
	return out
}

// renderedFromGolden returns group/resource of every kind in
// fixtures/golden, Scribe's rendered output.
func renderedFromGolden(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir("../fixtures/golden", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			var tm struct{ APIVersion, Kind string }
			if yaml.Unmarshal(doc, &tm) != nil || tm.Kind == "" {
				continue
			}
			group, _, ok := strings.Cut(tm.APIVersion, "/")
			if !ok {
				group = ""
			}
			if group == "kustomize.config.k8s.io" { // a file for kustomize, not an API object
				continue
			}
			seen[group+"/"+plural(tm.Kind)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 {
		t.Fatal("no rendered kinds in fixtures/golden")
	}
	return sortedKeys(seen)
}

// plural is the resource name of kind, as the API's default pluralisation.
func plural(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(k, "y") && !strings.HasSuffix(k, "ay") && !strings.HasSuffix(k, "ey"):
		return strings.TrimSuffix(k, "y") + "ies"
	case strings.HasSuffix(k, "s"):
		return k + "es"
	}
	return k + "s"
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
