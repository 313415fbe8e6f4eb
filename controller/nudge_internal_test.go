package controller

import (
	"context"
	"fmt"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

// recordingApplier records the reconcile requests it is asked for.
type recordingApplier struct{ nudges []string }

func (a *recordingApplier) Kind() scribev1.ApplierKind  { return scribev1.ApplierFlux }
func (a *recordingApplier) RenderInput() render.Applier { return render.Applier{} }
func (a *recordingApplier) Nudge(_ context.Context, sync scribev1.ObjectIdentity, syncChanged bool) error {
	a.nudges = append(a.nudges, fmt.Sprintf("%s root=%v", sync.Name, syncChanged))
	return nil
}
func (a *recordingApplier) Applied(context.Context, scribev1.ObjectIdentity, scribev1.ObjectIdentity, string, string, health.Ancestry) (health.Verdict, error) {
	return health.Verdict{}, nil
}
func (a *recordingApplier) Gone(context.Context, scribev1.ObjectIdentity) (bool, error) {
	return false, nil
}

func TestNudgeAsksTheRootApplierObjectOncePerCommit(t *testing.T) {
	type push struct {
		cr, commit  string
		syncChanged bool
	}
	for _, tc := range []struct {
		name    string
		applier render.Applier
		pushes  []push
		want    []string
	}{
		{name: "one source for the repository: asked once per commit, whatever the CRs in it",
			applier: render.Applier{Kind: scribev1.ApplierFlux},
			pushes:  []push{{"a", "c1", true}, {"b", "c1", true}, {"c", "c1", false}, {"d", "c2", false}, {"e", "c2", true}},
			want:    []string{"a root=true", "d root=true"}},
		{name: "a source per CR: each CR's own source every time, the root once per commit and only for a changed sync file",
			applier: render.Applier{Kind: scribev1.ApplierFlux, FluxSource: &render.FluxGitSource{URL: "https://git.example/x.git"}},
			pushes:  []push{{"a", "c1", false}, {"b", "c1", true}, {"c", "c1", true}, {"d", "c2", true}},
			want:    []string{"a root=false", "b root=true", "c root=false", "d root=true"}},
		{name: "Argo CD: each CR's Application every time, the root Application once per commit",
			applier: render.Applier{Kind: scribev1.ApplierArgoCD},
			pushes:  []push{{"a", "c1", true}, {"b", "c1", true}, {"c", "c2", false}},
			want:    []string{"a root=true", "b root=false", "c root=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &recordingApplier{}
			p := &Publisher{}
			tg := &Target{Repo: &scribev1.Repository{}, Applier: a, Input: render.Publish{Applier: tc.applier}}
			tg.Repo.Namespace, tg.Repo.Name = "team", "default"
			for _, ps := range tc.pushes {
				p.nudgeAfterPush(context.Background(), tg, scribev1.ObjectIdentity{Name: ps.cr}, publish.Result{Commit: ps.commit, Changed: true, SyncChanged: ps.syncChanged})
			}
			if fmt.Sprint(a.nudges) != fmt.Sprint(tc.want) {
				t.Errorf("nudges %v, want %v", a.nudges, tc.want)
			}
		})
	}
}
