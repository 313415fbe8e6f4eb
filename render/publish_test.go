package render_test

import (
	"context"
	"errors"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/scribe-gitops/scribe/render"
)

// TestPublishKindsAreChecked: an applier or source kind the templates do
// not know is an input error naming the publish field, for both kinds.
func TestPublishKindsAreChecked(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mutate func(*render.Publish)
		want   string // "" means the render succeeds
	}{
		{"default", func(*render.Publish) {}, ""},
		{"Argo CD", func(p *render.Publish) {
			p.Applier.Kind = "ArgoCD"
			p.Applier.RepoURL = "https://git.example.com/r.git"
		}, ""},
		{"OCI", func(p *render.Publish) { p.Applier.SourceKind = "OCIRepository" }, ""},
		{"unknown applier", func(p *render.Publish) { p.Applier.Kind = "Fleet" }, `publish.applier.kind: must be Flux or ArgoCD, not "Fleet"`},
		{"no source kind", func(p *render.Publish) { p.Applier.SourceKind = "" }, `publish.applier.sourceKind: must be GitRepository or OCIRepository, not ""`},
	}
	for _, fixture := range []string{"workload-canary-50.yaml", "gateway-tutorial.yaml"} {
		for _, tc := range cases {
			t.Run(fixture+"/"+tc.name, func(t *testing.T) {
				pub := render.DefaultPublish()
				tc.mutate(&pub)
				obj := k8sruntime.DeepCopyJSON(loadFixture(t, fixture))
				_, err := e.Render(context.Background(), render.Input{Object: obj, Publish: pub, Resolved: testResolved})
				if tc.want == "" {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				var ie *render.InputError
				if !errors.As(err, &ie) || len(ie.Errors) != 1 || ie.Errors[0].Error() != tc.want {
					t.Fatalf("got %v, want the input error %s", err, tc.want)
				}
			})
		}
	}
}
