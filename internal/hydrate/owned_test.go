package hydrate

import (
	"sort"
	"strings"
	"testing"
)

// workflowComponent is a catalog workflow entry as the shipped ones are: a
// WorkflowTemplate running as its own ServiceAccount, bound to a Role,
// and the Namespace it needs.
var workflowComponent = map[string]string{
	"wf/kustomization.yaml": "resources: [rbac.yaml, template.yaml, ns.yaml]\n",
	"wf/ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata: {name: tools, annotations: {argocd.argoproj.io/sync-options: 'Prune=true,ServerSideApply=true'}}\n",
	"wf/rbac.yaml": `apiVersion: v1
kind: ServiceAccount
metadata: {name: load}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: load}
rules: [{apiGroups: [argoproj.io], resources: [workflowtaskresults], verbs: [create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: load}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: load}
subjects: [{kind: ServiceAccount, name: load}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: script}
data: {a: b}
`,
	"wf/template.yaml": `apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata: {name: load}
spec:
  serviceAccountName: load
  volumes: [{name: s, configMap: {name: script}}]
  templates:
    - name: main
      dag:
        tasks: [{name: a, templateRef: {name: load, template: step}}]
    - name: step
      container: {image: busybox}
`,
}

// serviceComponent is an app entry as demo-services is: a Deployment, the
// Service selecting its pods, and their Namespace.
var serviceComponent = map[string]string{
	"app/kustomization.yaml": "resources: [app.yaml]\n",
	"app/app.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: demo, labels: {team: a}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: web}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
`,
}

// byKind indexes objs by Kind/name.
func byKind(objs []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		out[o["kind"].(string)+"/"+md["name"].(string)] = o
	}
	return out
}

func dig(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := o.(map[string]any)
			o = m[k]
		case int:
			l, _ := o.([]any)
			if k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

func TestBuildNamesObjectsPerOwner(t *testing.T) {
	tests := []struct {
		name    string
		suffix  string
		files   map[string]string
		check   func(t *testing.T, objs map[string]map[string]any)
		wantErr string
	}{
		{
			name: "every namespaced object and every reference to it carry the suffix", suffix: "-exp-0123456789",
			files: workflowComponent,
			check: func(t *testing.T, objs map[string]map[string]any) {
				const n = "load-exp-0123456789"
				for _, id := range []string{"ServiceAccount/" + n, "Role/" + n, "RoleBinding/" + n, "WorkflowTemplate/" + n, "ConfigMap/script-exp-0123456789"} {
					if objs[id] == nil {
						t.Errorf("no %s among %v", id, keys(objs))
					}
				}
				rb, wt := objs["RoleBinding/"+n], objs["WorkflowTemplate/"+n]
				for what, got := range map[string]any{
					"RoleBinding roleRef.name":                        dig(rb, "roleRef", "name"),
					"RoleBinding subjects[0].name":                    dig(rb, "subjects", 0, "name"),
					"WorkflowTemplate spec.serviceAccountName":        dig(wt, "spec", "serviceAccountName"),
					"WorkflowTemplate dag task templateRef.name":      dig(wt, "spec", "templates", 0, "dag", "tasks", 0, "templateRef", "name"),
					"WorkflowTemplate spec.volumes[0].configMap.name": dig(wt, "spec", "volumes", 0, "configMap", "name"),
				} {
					want := n
					if strings.Contains(what, "configMap") {
						want = "script-exp-0123456789"
					}
					if got != want {
						t.Errorf("%s = %v, want %s", what, got, want)
					}
				}
			},
		},
		{
			name: "a Namespace stays shared, never pruned by Flux nor pruned or deleted by Argo CD, its other sync options kept", suffix: "-exp-0123456789",
			files: workflowComponent,
			check: func(t *testing.T, objs map[string]map[string]any) {
				ns := objs["Namespace/team-a"]
				if ns == nil {
					t.Fatalf("no Namespace/team-a among %v", keys(objs))
				}
				if got := dig(ns, "metadata", "annotations", fluxPruneKey); got != "disabled" {
					t.Errorf("%s = %v, want disabled", fluxPruneKey, got)
				}
				if got := dig(ns, "metadata", "annotations", argoSyncOptsKey); got != "ServerSideApply=true,Prune=false,Delete=false" {
					t.Errorf("%s = %v", argoSyncOptsKey, got)
				}
			},
		},
		{
			name: "the owner's label joins every selector and pod template, so one owner's Service never selects another's pods; the shared Namespace has none", suffix: "-exp-0123456789",
			files: serviceComponent,
			check: func(t *testing.T, objs map[string]map[string]any) {
				dep, svc := objs["Deployment/web-exp-0123456789"], objs["Service/web-exp-0123456789"]
				for what, got := range map[string]any{
					"Deployment metadata.labels":               dig(dep, "metadata", "labels", OwnerLabel),
					"Deployment spec.selector.matchLabels":     dig(dep, "spec", "selector", "matchLabels", OwnerLabel),
					"Deployment spec.template.metadata.labels": dig(dep, "spec", "template", "metadata", "labels", OwnerLabel),
					"Service spec.selector":                    dig(svc, "spec", "selector", OwnerLabel),
				} {
					if got != "exp-0123456789" {
						t.Errorf("%s[%s] = %v, want exp-0123456789", what, OwnerLabel, got)
					}
				}
				if got := dig(svc, "spec", "selector", "app"); got != "web" {
					t.Errorf("Service spec.selector lost the catalog's app label: %v", got)
				}
				// (kustomize's namespace names the Namespace too)
				if got, _ := dig(objs["Namespace/team-a"], "metadata", "labels").(map[string]any); len(got) != 1 || got["team"] != "a" {
					t.Errorf("Namespace labels = %v, want only the catalog's", got)
				}
			},
		},
		{
			name: "without a suffix the names and annotations are the catalog's", suffix: "",
			files: workflowComponent,
			check: func(t *testing.T, objs map[string]map[string]any) {
				if objs["WorkflowTemplate/load"] == nil || dig(objs["Namespace/team-a"], "metadata", "annotations", fluxPruneKey) != nil || dig(objs["WorkflowTemplate/load"], "metadata", "labels") != nil {
					t.Errorf("objects changed without a suffix: %v", objs)
				}
			},
		},
		{
			name: "a name too long with the suffix is an error naming the object and the limit", suffix: "-" + strings.Repeat("x", 60),
			files:   workflowComponent,
			wantErr: "ServiceAccount/load-xxx",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := "./wf"
			if _, ok := tt.files["app/kustomization.yaml"]; ok {
				dir = "./app"
			}
			objs, err := Build(Request{FS: files(tt.files), Dir: dir, Namespace: "team-a", NameSuffix: tt.suffix})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "more than 63") {
					t.Fatalf("err = %v, want one naming %q and the limit", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, byKind(objs))
		})
	}
}

func TestSharedKind(t *testing.T) {
	tests := []struct {
		group, kind string
		want        bool
	}{
		{"", "Namespace", true},
		{"apiextensions.k8s.io", "CustomResourceDefinition", true},
		{"apiregistration.k8s.io", "APIService", true},
		{"rbac.authorization.k8s.io", "ClusterRole", false},
		{"", "ServiceAccount", false},
		{"example.com", "Namespace", false},
	}
	for _, tt := range tests {
		if got := SharedKind(tt.group, tt.kind); got != tt.want {
			t.Errorf("SharedKind(%q, %q) = %v, want %v", tt.group, tt.kind, got, tt.want)
		}
	}
}

func TestKeyFollowsTheSuffix(t *testing.T) {
	a, err := Key(Request{FS: files(workflowComponent), Dir: "./wf", NameSuffix: "-a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Key(Request{FS: files(workflowComponent), Dir: "./wf", NameSuffix: "-b"})
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Error("two suffixes, one key: the cache would hand one owner's objects to the other")
	}
}

func keys(objs map[string]map[string]any) []string {
	out := make([]string, 0, len(objs))
	for k := range objs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
