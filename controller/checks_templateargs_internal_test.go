package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// TestTemplateArgsKeepThePlatformsScope: a tenant's Workload cannot point
// a platform's ClusterAnalysisTemplate at another tenant's metrics by
// giving the arg the template scopes its query by (namespace, workload, or
// one the template pins); what the Workload may give it still gives.
func TestTemplateArgsKeepThePlatformsScope(t *testing.T) {
	str := func(s string) *string { return &s }
	declared := []argoArg{{Name: "namespace"}, {Name: "workload"}, {Name: "version"}, {Name: "tenant", Value: str("shop")}, {Name: "service"}}
	for _, tt := range []struct {
		name     string
		args     []scribev1.AnalysisArg
		declared []argoArg
		pinned   string
		want     map[string]string
		err      string
	}{
		{name: "the Workload's own namespace, name and version fill the built-in args",
			args: []scribev1.AnalysisArg{{Name: "service", Value: "web"}}, declared: declared,
			want: map[string]string{"namespace": "team-a", "workload": "web", "version": "v2", "tenant": "shop", "service": "web"}},
		{name: "an arg the template does not pin may replace its default",
			args: []scribev1.AnalysisArg{{Name: "service", Value: "web"}, {Name: "tenant", Value: "mine"}}, declared: declared,
			want: map[string]string{"namespace": "team-a", "workload": "web", "version": "v2", "tenant": "mine", "service": "web"}},
		{name: "attack: namespace given to query another tenant's metrics",
			args: []scribev1.AnalysisArg{{Name: "service", Value: "web"}, {Name: "namespace", Value: "team-b"}}, declared: declared,
			err: "spec.rollout.analysis.args[1]: arg namespace is always the Workload's own namespace and cannot be given"},
		{name: "attack: workload given to read another Workload's series",
			args: []scribev1.AnalysisArg{{Name: "workload", Value: "payments"}}, declared: declared,
			err: "spec.rollout.analysis.args[0]: arg workload is always the Workload's own workload"},
		{name: "attack: a reserved arg is refused even when the template does not declare it",
			args: []scribev1.AnalysisArg{{Name: "namespace", Value: "team-b"}}, declared: []argoArg{{Name: "version"}},
			err: "arg namespace is always the Workload's own namespace"},
		{name: "attack: an arg the template pins (its tenant header) given by the Workload",
			args: []scribev1.AnalysisArg{{Name: "service", Value: "web"}, {Name: "tenant", Value: "team-b"}}, declared: declared, pinned: "tenant, other",
			err: "spec.rollout.analysis.args[1]: arg tenant is pinned by the template (annotation scribe.dev/pinned-args)"},
		{name: "a pinned arg keeps the template's default",
			args: []scribev1.AnalysisArg{{Name: "service", Value: "web"}}, declared: declared, pinned: "tenant\nversion",
			want: map[string]string{"namespace": "team-a", "workload": "web", "version": "v2", "tenant": "shop", "service": "web"}},
		{name: "a pinned arg without a default is the template's mistake, said as such",
			declared: []argoArg{{Name: "tenant"}}, pinned: "tenant",
			err: "arg tenant is pinned by the template (annotation scribe.dev/pinned-args) but has no value there"},
		{name: "a template's default for namespace is the platform's to keep",
			declared: []argoArg{{Name: "namespace", Value: str("monitoring")}},
			want:     map[string]string{"namespace": "monitoring"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
			w.Spec.Rollout = &scribev1.Rollout{Analysis: &scribev1.Analysis{Args: tt.args}}
			got, err := templateArgs(w, tt.declared, pinnedArgs(map[string]string{scribev1.PinnedArgsAnnotation: tt.pinned}), "v2")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("args %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("arg %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
