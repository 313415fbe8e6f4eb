package main

import (
	"strings"
	"testing"
)

func TestDanglingRefsNameEveryRepositoryTheInputDoesNotDefine(t *testing.T) {
	obj := func(kind, ns, name string, spec map[string]any) map[string]any {
		md := map[string]any{"name": name}
		if ns != "" {
			md["namespace"] = ns
		}
		return map[string]any{"kind": kind, "metadata": md, "spec": spec}
	}
	ref := func(name string) map[string]any { return map[string]any{"name": name} }
	repo := func(ns, name string) map[string]any { return obj("Repository", ns, name, nil) }
	tests := []struct {
		name string
		objs []map[string]any
		want []string
	}{
		{
			name: "a named Repository of the same namespace is found",
			objs: []map[string]any{obj("Workload", "shop", "checkout", map[string]any{"repositoryRef": ref("git")}), repo("shop", "git")},
		},
		{
			name: "a Workload without repositoryRef needs the Repository default",
			objs: []map[string]any{obj("Workload", "shop", "checkout", map[string]any{}), repo("shop", "git")},
			want: []string{`Workload shop/checkout: spec.repositoryRef: unset, so the Repository "default" of namespace shop is not defined in the input`},
		},
		{
			name: "a Repository of another namespace does not count",
			objs: []map[string]any{obj("Experiment", "lab", "tutorial", map[string]any{"repositoryRef": ref("git")}), repo("shop", "git")},
			want: []string{`Experiment lab/tutorial: spec.repositoryRef.name: Repository "git" of namespace lab is not defined in the input`},
		},
		{
			name: "no namespace is the namespace default, for the reference and the Repository",
			objs: []map[string]any{obj("Workload", "", "checkout", nil), repo("", "default")},
		},
		{
			name: "each stage of a Pipeline is checked",
			objs: []map[string]any{obj("Pipeline", "shop", "web", map[string]any{"stages": []any{
				map[string]any{"name": "dev", "repositoryRef": ref("dev")},
				map[string]any{"name": "prod", "repositoryRef": ref("prod")},
			}}), repo("shop", "dev")},
			want: []string{`Pipeline shop/web: spec.stages[1].repositoryRef.name: Repository "prod" of namespace shop is not defined in the input`},
		},
		{
			name: "Repositories and TenantPolicies reference no Repository",
			objs: []map[string]any{repo("shop", "dev"), obj("TenantPolicy", "", "team-a", map[string]any{})},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := danglingRefs(tt.objs)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("danglingRefs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
