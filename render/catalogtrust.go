package render

import (
	"fmt"
	"sort"
	"strings"

	"cuelang.org/go/cue"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// A catalog's trust. A Repository's spec.catalog names a Flux source: one
// the platform granted (a TenantPolicy's spec.catalogSources, such as the
// catalog it publishes in flux-system), or one the tenant chose itself (a
// source in its own namespace, which it can point anywhere). A catalog the
// tenant chose (CatalogSource.Tenant) is the tenant's own input: its
// entries may never take the name of a built-in entry (the controller
// refuses the Repository, see BuiltinOverrides), the built-in entries are
// built from the catalog shipped in this binary rather than from its
// files (a built-in entry may install into its own namespace, such as
// demo or testkube, because Scribe ships what it delivers), and the
// objects its own entries deliver are confined to the namespace the
// entry installs into (already one the tenant may use) and to the
// cluster-scoped kinds the platform grants (ConfineTenantObjects).

// BuiltinOverrides names the entries of the engine's user catalogs that
// replace a built-in entry (with `override: true`), sorted. A catalog the
// tenant chose may have none.
func (e *Engine) BuiltinOverrides() []string {
	if len(e.catalogs) < 2 {
		return nil
	}
	builtin := e.catalogs[len(e.catalogs)-1]
	seen := map[string]bool{}
	for _, c := range e.catalogs[:len(e.catalogs)-1] {
		it, err := c.Fields()
		if err != nil {
			continue
		}
		for it.Next() {
			name := it.Selector().Unquoted()
			if builtin.LookupPath(cue.MakePath(cue.Str(name))).Exists() {
				seen[name] = true
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

// builtinEntry reports whether the component name resolves to the
// built-in catalog's entry: no user catalog has an entry of that name.
func (e *Engine) builtinEntry(name string) bool {
	for i, c := range e.catalogs {
		if c.LookupPath(cue.MakePath(cue.Str(name))).Exists() {
			return i == len(e.catalogs)-1
		}
	}
	return false
}

// ConfineTenantObjects decides whether the objects a component of a
// catalog the tenant chose builds (objs, after its namespace overlay) stay
// within what the tenant may deliver: every namespaced object in
// namespace (the entry's, which the namespace policy already allowed, or
// the Experiment's), and a cluster-scoped object (one the overlay left
// without a namespace: a ClusterRole, a ClusterRoleBinding, a Namespace,
// a CRD, a webhook configuration) only of a kind the TenantPolicy's
// spec.clusterResources grants. The error names the first object refused
// and what would allow it.
func ConfineTenantObjects(objs []map[string]any, namespace string, clusterResources []scribev1.GroupKind) error {
	for _, o := range objs {
		apiVersion, _ := o["apiVersion"].(string)
		kind, _ := o["kind"].(string)
		md, _ := o["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		ns, _ := md["namespace"].(string)
		group := ""
		if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
			group = apiVersion[:i]
		}
		what := fmt.Sprintf("%s %s", kind, name)
		if group != "" {
			what = fmt.Sprintf("%s.%s %s", kind, group, name)
		}
		switch {
		case ns == "" && !grantsKind(clusterResources, group, kind):
			return fmt.Errorf("%s is cluster-scoped, and the platform grants this namespace no cluster-scoped %s (a TenantPolicy's spec.clusterResources): a catalog the tenant chose may deliver only into the namespaces the tenant may use", what, kind)
		case ns != "" && ns != namespace:
			return fmt.Errorf("%s is in namespace %q, not %q where its entry installs: a catalog the tenant chose may deliver only into the namespaces the tenant may use", what, ns, namespace)
		}
	}
	return nil
}

// grantsKind reports whether granted holds group and kind, "*" matching
// any group or kind, as in an Argo CD AppProject.
func grantsKind(granted []scribev1.GroupKind, group, kind string) bool {
	for _, gk := range granted {
		if (gk.Group == "*" || gk.Group == group) && (gk.Kind == "*" || gk.Kind == kind) {
			return true
		}
	}
	return false
}
