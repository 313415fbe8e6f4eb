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
		{"per-CR artifacts", func(p *render.Publish) {
			p.Applier.FluxArtifact = &render.FluxArtifactSource{URL: "oci://127.0.0.1:5000/scribe/artifacts"}
		}, ""},
		{"per-CR artifacts with a tag", func(p *render.Publish) {
			p.Applier.FluxArtifact = &render.FluxArtifactSource{URL: "oci://reg.example/scribe:v1"}
		}, `publish.applier.fluxArtifact.url: "oci://reg.example/scribe:v1": the prefix carries no tag or digest (each artifact is <prefix>/<name>:latest)`},
		{"per-CR artifacts in upper case", func(p *render.Publish) {
			p.Applier.FluxArtifact = &render.FluxArtifactSource{URL: "oci://reg.example/Scribe"}
		}, `publish.applier.fluxArtifact.url: "oci://reg.example/Scribe" is not an OCI repository prefix: repository can only contain the characters ` + "`abcdefghijklmnopqrstuvwxyz0123456789_-./`" + `: Scribe/x`},
		{"per-CR artifacts with credentials", func(p *render.Publish) {
			p.Applier.FluxArtifact = &render.FluxArtifactSource{URL: "oci://user:pw@reg.example/scribe"}
		}, `publish.applier.fluxArtifact.url: the URL carries credentials in its user info (oci://reg.example/scribe)`},
		{"per-CR artifacts without a path", func(p *render.Publish) {
			p.Applier.FluxArtifact = &render.FluxArtifactSource{URL: "oci://reg.example"}
		}, `publish.applier.fluxArtifact.url: "oci://reg.example" must name a registry host and a repository path: oci://host/path`},
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
