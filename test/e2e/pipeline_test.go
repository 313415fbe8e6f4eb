package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// promo is a Pipeline "web" promoted dev -> staging (pull requests on
// Gitea) -> prod, each stage a path of the Gitea repository applied by its
// own root Flux Kustomization.
type promo struct {
	t  *testing.T
	s  *Stack
	g  *Gitea
	ns string
	// merged are the pull requests the test merged, by number.
	merged map[int]string
}

func (p *promo) pipeline() *scribev1.Pipeline {
	got := &scribev1.Pipeline{}
	_ = p.s.Client.Get(context.Background(), types.NamespacedName{Namespace: p.ns, Name: "web"}, got)
	return got
}

func (p *promo) workload(stage string) *scribev1.Workload {
	got := &scribev1.Workload{}
	_ = p.s.Client.Get(context.Background(), types.NamespacedName{Namespace: p.ns, Name: "web-" + stage}, got)
	return got
}

func (p *promo) describe() string {
	pl := p.pipeline()
	ready := ""
	if c := apimeta.FindStatusCondition(pl.Status.Conditions, scribev1.ReadyCondition); c != nil {
		ready = fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline %q ready=%s", pl.Status.Summary, ready)
	for _, s := range []string{"dev", "staging", "prod"} {
		fmt.Fprintf(&b, "\n  %s: %s", s, describe(p.workload(s)))
	}
	return b.String()
}

// walk waits for cond, merging through Gitea's API every pull request
// staging's Workload opens on the way (as a reviewer pressing "Merge").
func (p *promo) walk(limit time.Duration, what string, cond func(pl *scribev1.Pipeline) bool) {
	p.t.Helper()
	ctx := context.Background()
	poll(p.t, limit, what, func() (bool, string) {
		if cond(p.pipeline()) {
			return true, ""
		}
		if pr := p.workload("staging").Status.PullRequest; pr != nil && pr.State == "open" && p.merged[pr.Number] == "" {
			sha, err := p.g.Merge(ctx, pr.Number)
			if err != nil {
				return false, fmt.Sprintf("merge #%d: %v", pr.Number, err)
			}
			p.merged[pr.Number] = sha
			p.t.Logf("merged staging's pull request #%d as %.12s", pr.Number, sha)
		}
		return false, p.describe()
	})
}

// applied checks that Flux applied exactly the commit each stage's
// Workload records, and that the stage's HTTPRoute routes want (a
// backend=weight pair among its backends).
func (p *promo) applied(stage, want string) {
	p.t.Helper()
	ctx := context.Background()
	poll(p.t, 2*time.Minute, "Flux to apply "+stage+"'s commit", func() (bool, string) {
		w := p.workload(stage)
		rev, err := p.s.AppliedRevision(ctx, "workload", p.ns, w.Name)
		if err != nil {
			return false, err.Error()
		}
		r := routeWeights(ctx, p.s, p.ns, w.Name)
		return rev == w.Status.Revision && rev != "" && strings.Contains(","+r+",", ","+want+","), fmt.Sprintf("applied %.12s, recorded %.12s, routes %s", rev, w.Status.Revision, r)
	})
}

func (p *promo) addVersion(v scribev1.Version) {
	p.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pl := p.pipeline()
		pl.Spec.Template.Versions = append(pl.Spec.Template.Versions, v)
		return p.s.Client.Update(context.Background(), pl)
	})
	if err != nil {
		p.t.Fatal(err)
	}
}

func stableEverywhere(version string) func(pl *scribev1.Pipeline) bool {
	return func(pl *scribev1.Pipeline) bool {
		return pl.Status.ObservedGeneration == pl.Generation && apimeta.IsStatusConditionTrue(pl.Status.Conditions, scribev1.ReadyCondition) && pl.Status.Version == version
	}
}

// refuseInStaging is staging's admission policy: no pod of staging's
// Workload may run image, so a version with it never becomes available
// there (as a cluster whose policy refuses an image dev accepts).
func refuseInStaging(t *testing.T, s *Stack, image string) {
	t.Helper()
	ctx := context.Background()
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "staging-images"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf(`!(has(object.metadata.labels) && object.metadata.labels[?'%s'].orValue('') == 'web-staging' && object.spec.containers.exists(c, c.image == '%s'))`, controller.WorkloadLabel, image),
				Message:    "staging does not admit " + image,
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "staging-images"},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "staging-images", ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	if err := s.Client.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
}

// TestLoopPipelinePromotesThroughStagesWithFluxAndGitea walks versions
// through dev -> staging -> prod: each stage a path of the Gitea
// repository with its own root Kustomization, staging reviewed by pull
// requests the test merges through Gitea's API. v1 and v2 reach prod,
// each stage applied by Flux at the commit its Workload records; v3, which
// staging's admission policy refuses, is rolled back in staging and stops
// there, prod keeping v2 at the same commit.
func TestLoopPipelinePromotesThroughStagesWithFluxAndGitea(t *testing.T) {
	t.Parallel()
	skipWithoutLoop(t)
	s := Start(t)
	g := s.StartGitea(t)
	ns := "promo"
	newGiteaNamespace(t, s, g, ns)
	ctx := context.Background()
	stages := []string{"dev", "staging", "prod"}
	for _, st := range stages {
		repo := &scribev1.Repository{
			ObjectMeta: metav1.ObjectMeta{Name: st, Namespace: ns},
			Spec: scribev1.RepositorySpec{
				Git: &scribev1.GitRepositorySpec{URL: g.RepoURL, Branch: "main", Path: "clusters/" + st,
					SecretRef: &scribev1.LocalObjectReference{Name: "gitea-git"}},
				Applier: scribev1.ApplierSpec{Kind: "Flux", Namespace: "flux-system", Name: g.FluxSource},
			},
		}
		if st == "staging" {
			repo.Spec.Git.PullRequest = &scribev1.PullRequestSpec{Provider: "gitea", SecretRef: scribev1.LocalObjectReference{Name: "gitea-api"}}
		}
		if err := s.Client.Create(ctx, repo); err != nil {
			t.Fatal(err)
		}
		if st == "dev" {
			continue // SyncPath: the stack's root Kustomization applies it
		}
		root := &kustomizev1.Kustomization{
			ObjectMeta: metav1.ObjectMeta{Name: g.FluxSource + "-root-" + st, Namespace: "flux-system"},
			Spec: kustomizev1.KustomizationSpec{
				Interval: metav1.Duration{Duration: time.Minute}, Path: "./clusters/" + st, Prune: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: g.FluxSource},
			},
		}
		if err := s.Client.Create(ctx, root); err != nil {
			t.Fatal(err)
		}
	}
	v3 := scribev1.Version{Name: "v3", Image: "ghcr.io/example/web:3"}
	refuseInStaging(t, s, v3.Image)
	startScribe(t, s)

	tmpl := canaryWorkload(ns).Spec
	tmpl.Rollout.Steps = []scribev1.RolloutStep{{Weight: 50}, {Weight: 100}}
	tmpl.Rollout.Analysis = &scribev1.Analysis{Interval: &metav1.Duration{Duration: time.Second}, Threshold: 3,
		Checks: []scribev1.Check{{Name: "available", Type: "availability"}}}
	pl := &scribev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: scribev1.PipelineSpec{
		Template: tmpl,
		Stages: []scribev1.PipelineStage{
			{Name: "dev", RepositoryRef: scribev1.LocalObjectReference{Name: "dev"}, Soak: &metav1.Duration{Duration: 2 * time.Second}},
			{Name: "staging", RepositoryRef: scribev1.LocalObjectReference{Name: "staging"}, Review: scribev1.PromotionPullRequest},
			{Name: "prod", RepositoryRef: scribev1.LocalObjectReference{Name: "prod"}},
		},
	}}
	if err := s.Client.Create(ctx, pl); err != nil {
		t.Fatal(err)
	}
	p := &promo{t: t, s: s, g: g, ns: ns, merged: map[int]string{}}
	start := time.Now()

	// v1 walks every stage.
	p.walk(5*time.Minute, "v1 stable in every stage", stableEverywhere("v1"))
	for _, st := range stages {
		p.applied(st, "web-"+st+"-v1=100")
	}
	t.Logf("v1 through three stages in %s", time.Since(start).Round(time.Second))

	// v2: dev, then staging by pull request carrying dev's evidence, then prod.
	start = time.Now()
	p.addVersion(webV2())
	poll(t, 3*time.Minute, "v2 proposed to staging", func() (bool, string) {
		w := p.workload("staging")
		return w.Status.CanaryVersion == "v2" && w.Status.PullRequest != nil && w.Status.PullRequest.State == "open", p.describe()
	})
	if prod := p.workload("prod"); prod.Status.StableVersion != "v1" || prod.Status.CanaryVersion != "" {
		t.Fatalf("prod moved before staging: %s", describe(prod))
	}
	pr, err := g.Pull(ctx, p.workload("staging").Status.PullRequest.Number)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Rolling out **v2** (canary): deployed at weight 0 until it is available; step 1 of 2", "Promoted from the previous stage: v2 was stable and healthy in stage dev (Workload web-dev, commit ", "a soak of 2s"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("staging's first pull request for v2 lacks %q:\n%s", want, pr.Body)
		}
	}
	p.walk(5*time.Minute, "v2 stable in every stage", stableEverywhere("v2"))
	for _, st := range stages {
		p.applied(st, "web-"+st+"-v2=100")
	}
	if got := p.pipeline().Status.Summary; got != "dev=v2 staging=v2 prod=v2" {
		t.Errorf("summary %q", got)
	}
	t.Logf("v2 through three stages in %s, %d pull requests merged in staging", time.Since(start).Round(time.Second), len(p.merged))

	// v3 fails in staging: rolled back there, prod untouched.
	prod := p.workload("prod")
	prodRevision := prod.Status.Revision
	p.addVersion(v3)
	p.walk(5*time.Minute, "v3 rolled back in staging", func(pl *scribev1.Pipeline) bool {
		for _, s := range pl.Status.Stages {
			if s.Name == "staging" {
				return s.Failed == "v3"
			}
		}
		return false
	})
	got := p.pipeline()
	if c := apimeta.FindStatusCondition(got.Status.Conditions, scribev1.ReadyCondition); c == nil || c.Reason != controller.ReasonStageRolledBack {
		t.Errorf("Ready = %+v, want %s", c, controller.ReasonStageRolledBack)
	}
	poll(t, 2*time.Minute, "staging's rollback applied", func() (bool, string) {
		w := p.workload("staging")
		rev, _ := s.AppliedRevision(ctx, "workload", ns, w.Name)
		r := routeWeights(ctx, s, ns, "web-staging")
		return w.Status.Phase == scribev1.WorkloadRolledBack && rev == w.Status.Revision && strings.Contains(r, "web-staging-v2=100") && strings.Contains(r, "web-staging-v3=0"),
			fmt.Sprintf("applied %.12s; routes %s; %s", rev, r, describe(w))
	})
	prod = p.workload("prod")
	if prod.Status.Revision != prodRevision || prod.Status.StableVersion != "v2" || len(prod.Spec.Versions) != 2 {
		t.Errorf("prod moved: %s, %d versions (was at %.12s)", describe(prod), len(prod.Spec.Versions), prodRevision)
	}
	if rev, _ := s.AppliedRevision(ctx, "workload", ns, "web-prod"); rev != prodRevision {
		t.Errorf("Flux applied %.12s in prod, want %.12s", rev, prodRevision)
	}
	if r := routeWeights(ctx, s, ns, "web-prod"); !strings.Contains(r, "web-prod-v2=100") || strings.Contains(r, "v3") {
		t.Errorf("prod routes %q", r)
	}
	if !strings.Contains(got.Status.Summary, "staging=v2!v3") || !strings.Contains(got.Status.Summary, "prod=v2") {
		t.Errorf("summary %q", got.Status.Summary)
	}
}
