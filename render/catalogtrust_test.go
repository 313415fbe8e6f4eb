package render_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// The attack: a tenant points its Repository's spec.catalog at a source of
// its own namespace whose apps/demo-services/ holds a ClusterRoleBinding
// to cluster-admin, a RoleBinding and a Pod. The built-in demo-services
// entry installs into its built-in namespace (demo), which the tenant was
// never granted, and would build whatever the tenant's files hold there.
// From a catalog the tenant chose, the built-in entry is built from the
// catalog shipped in the binary; the tenant's own entries deliver only
// into their namespace, and cluster-scoped kinds only when the
// TenantPolicy grants them.
func TestTenantCatalogCannotMakeABuiltinEntryDeliverItsFiles(t *testing.T) {
	const userCatalog = `package catalog
entries: {
	mine: {kind: "app", source: {type: "catalog", path: "./apps/mine"}, #Params: {}}
}`
	e, err := render.New(render.WithCatalog("./tenant", fstest.MapFS{"entries.cue": {Data: []byte(userCatalog)}}))
	if err != nil {
		t.Fatal(err)
	}
	hostile := "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: pwn}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: default, namespace: lab}]\n---\n" +
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: pwn}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}\nsubjects: [{kind: ServiceAccount, name: default, namespace: lab}]\n---\n" +
		"apiVersion: v1\nkind: Pod\nmetadata: {name: pwn}\nspec: {containers: [{name: x, image: evil.example.com/x}]}\n"
	namespaced := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\ndata: {a: b}\n"
	files := fstest.MapFS{
		"apps/demo-services/kustomization.yaml": {Data: []byte("resources: [pwn.yaml]\n")},
		"apps/demo-services/pwn.yaml":           {Data: []byte(hostile)},
		"apps/mine/kustomization.yaml":          {Data: []byte("resources: [pwn.yaml]\n")},
		"apps/mine/pwn.yaml":                    {Data: []byte(hostile)},
		"apps/fine/kustomization.yaml":          {Data: []byte("resources: [cm.yaml]\n")},
		"apps/fine/cm.yaml":                     {Data: []byte(namespaced)},
	}
	source := func(tenant bool) *render.CatalogSource {
		return &render.CatalogSource{Kind: "GitRepository", Namespace: "lab", Name: "mine", Path: ".", Files: files, Tenant: tenant}
	}
	for _, tt := range []struct {
		name     string
		app      string
		catalog  *render.CatalogSource
		granted  []scribev1.GroupKind
		want     []string // parts of the hydrated files
		wantNot  []string
		wantErr  []string
		platform bool
	}{
		{name: "a built-in entry from a tenant's catalog builds the binary's manifests, not the tenant's", app: "demo-services", catalog: source(true),
			want: []string{"namespace: demo", "kind: Deployment"}, wantNot: []string{"pwn", "cluster-admin", "evil.example.com"}},
		{name: "a platform-granted catalog still provides the built-in entry's manifests", app: "demo-services", catalog: source(false), platform: true,
			want: []string{"ClusterRoleBinding", "namespace: demo"}},
		{name: "a tenant's entry may not deliver a ClusterRoleBinding", app: "mine", catalog: source(true),
			wantErr: []string{"spec.targets[0].components[0].app", "ClusterRoleBinding.rbac.authorization.k8s.io pwn", "cluster-scoped", "spec.clusterResources", "spec.catalog"}},
		{name: "a tenant's entry delivers cluster-scoped kinds the policy grants", app: "mine", catalog: source(true),
			granted: []scribev1.GroupKind{{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}},
			want:    []string{"kind: ClusterRoleBinding", "kind: RoleBinding", "kind: Pod", "namespace: lab"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pub := render.DefaultPublish()
			pub.ClusterResources = tt.granted
			b, err := e.Render(context.Background(), render.Input{Object: hubExperiment(tt.app), Publish: pub, Resolved: render.Resolved{Catalog: tt.catalog}})
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("rendered; want an error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var hydrated strings.Builder
			for _, f := range b.Files {
				if strings.Contains(f.Path, "/components/") {
					hydrated.Write(f.Data)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(hydrated.String(), w) {
					t.Errorf("the hydrated objects lack %q:\n%s", w, hydrated.String())
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(hydrated.String(), w) {
					t.Errorf("the hydrated objects hold %q from the tenant's files:\n%s", w, hydrated.String())
				}
			}
		})
	}
}

// TestConfineTenantObjects: the objects a tenant's catalog entry builds
// stay in the entry's namespace; a cluster-scoped one (left without a
// namespace by the overlay) passes only if its kind is granted, "*"
// matching any group or kind.
func TestConfineTenantObjects(t *testing.T) {
	obj := func(apiVersion, kind, ns string) map[string]any {
		md := map[string]any{"name": "x"}
		if ns != "" {
			md["namespace"] = ns
		}
		return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}
	}
	for _, tt := range []struct {
		name    string
		obj     map[string]any
		granted []scribev1.GroupKind
		wantErr string
	}{
		{name: "a namespaced object in the entry's namespace", obj: obj("v1", "ConfigMap", "lab")},
		{name: "a RoleBinding in the entry's namespace", obj: obj("rbac.authorization.k8s.io/v1", "RoleBinding", "lab")},
		{name: "an object in another namespace", obj: obj("v1", "Pod", "kube-system"), wantErr: `namespace "kube-system"`},
		{name: "a ClusterRoleBinding without a grant", obj: obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", ""), wantErr: "cluster-scoped"},
		{name: "a Namespace without a grant", obj: obj("v1", "Namespace", ""), wantErr: "Namespace x is cluster-scoped"},
		{name: "a granted kind", obj: obj("rbac.authorization.k8s.io/v1", "ClusterRole", ""), granted: []scribev1.GroupKind{{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}}},
		{name: "a grant of another kind of the group", obj: obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", ""), granted: []scribev1.GroupKind{{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}}, wantErr: "cluster-scoped"},
		{name: "a wildcard grant", obj: obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", ""), granted: []scribev1.GroupKind{{Group: "*", Kind: "*"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := render.ConfineTenantObjects([]map[string]any{tt.obj}, "lab", tt.granted)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

// TestBuiltinOverridesNamesTheEntriesThatReplaceBuiltinOnes: what the
// controller refuses in a catalog the tenant chose.
func TestBuiltinOverridesNamesTheEntriesThatReplaceBuiltinOnes(t *testing.T) {
	const userCatalog = `package catalog
entries: {
	"demo-services": {kind: "app", namespace: "demo", override: true, source: {type: "catalog", path: "./apps/demo-services"}, #Params: {}}
	mine: {kind: "app", source: {type: "catalog", path: "./apps/mine"}, #Params: {}}
}`
	e, err := render.New(render.WithCatalog("./tenant", fstest.MapFS{"entries.cue": {Data: []byte(userCatalog)}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.BuiltinOverrides(), ","); got != "demo-services" {
		t.Fatalf("BuiltinOverrides = %q, want demo-services", got)
	}
	builtin, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	if got := builtin.BuiltinOverrides(); len(got) != 0 {
		t.Fatalf("the built-in engine overrides %v", got)
	}
}
