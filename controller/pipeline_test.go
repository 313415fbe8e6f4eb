package controller_test

// Longer than 500 lines on purpose: the Pipeline's envtest scenarios,
// one per promotion path, on one fixture.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/publish/forge/forgetest"
)

// startPipelineRepositories creates one Repository per stage on the
// fixture's git server (clusters/<stage>), edits applied to each, starts
// the controller and waits for them to be Ready; stop stops the controller.
func (f *fixture) startPipelineRepositories(t *testing.T, stages []string, edit func(stage string, r *scribev1.Repository)) (stop func()) {
	t.Helper()
	f.createPipelineRepositories(t, stages, edit)
	stop = startController(t, f.e, f.ns)
	f.waitRepositoriesReady(t, stages)
	return stop
}

// createPipelineRepositories creates one Repository per stage on the
// fixture's git server (clusters/<stage>), edits applied to each.
func (f *fixture) createPipelineRepositories(t *testing.T, stages []string, edit func(stage string, r *scribev1.Repository)) {
	t.Helper()
	for _, s := range stages {
		r := f.repo.DeepCopy()
		r.Name = s
		r.Spec.Git.Path = "clusters/" + s
		if edit != nil {
			edit(s, r)
		}
		if err := f.e.c.Create(f.ctx(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// waitRepositoriesReady waits for the stages' Repositories to be Ready.
func (f *fixture) waitRepositoriesReady(t *testing.T, stages []string) {
	t.Helper()
	for _, s := range stages {
		waitFor(t, "Repository "+s+" Ready", func() (bool, string) {
			r := &scribev1.Repository{}
			if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: s}, r); err != nil {
				return false, err.Error()
			}
			c := apimeta.FindStatusCondition(r.Status.Conditions, scribev1.ReadyCondition)
			return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprint(c)
		})
	}
}

// webPipeline is a Pipeline "web" over versions whose template canaries
// at 50% then 100% behind an HTTPRoute, through the stages, no soak.
func webPipeline(ns string, versions []string, stages ...string) *scribev1.Pipeline {
	p := &scribev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	p.Spec.Template = workload(ns, versions...).Spec
	p.Spec.Template.Rollout.Steps = []scribev1.RolloutStep{{Weight: 50}, {Weight: 100}}
	for _, s := range stages {
		p.Spec.Stages = append(p.Spec.Stages, scribev1.PipelineStage{Name: s, RepositoryRef: scribev1.LocalObjectReference{Name: s}})
	}
	return p
}

func (f *fixture) pipeline(t *testing.T) *scribev1.Pipeline {
	t.Helper()
	p := &scribev1.Pipeline{}
	if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func describePipeline(p *scribev1.Pipeline) string {
	var b strings.Builder
	fmt.Fprintf(&b, "summary=%q", p.Status.Summary)
	for _, s := range p.Status.Stages {
		fmt.Fprintf(&b, " [%s admitted=%s verified=%s failed=%s: %s]", s.Name, s.Admitted, s.Verified, s.Failed, s.Message)
	}
	if c := apimeta.FindStatusCondition(p.Status.Conditions, scribev1.ReadyCondition); c != nil {
		fmt.Fprintf(&b, " ready=%s/%s: %s", c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func (f *fixture) waitPipeline(t *testing.T, what string, cond func(p *scribev1.Pipeline) bool) *scribev1.Pipeline {
	t.Helper()
	var last *scribev1.Pipeline
	waitFor(t, what, func() (bool, string) {
		p := &scribev1.Pipeline{}
		if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web"}, p); err != nil {
			return false, err.Error()
		}
		last = p
		return cond(p), describePipeline(p)
	})
	return last
}

func stageOf(p *scribev1.Pipeline, name string) scribev1.PipelineStageStatus {
	for _, s := range p.Status.Stages {
		if s.Name == name {
			return s
		}
	}
	return scribev1.PipelineStageStatus{}
}

func pipelineReady(p *scribev1.Pipeline) bool {
	return apimeta.IsStatusConditionTrue(p.Status.Conditions, scribev1.ReadyCondition) && p.Status.ObservedGeneration == p.Generation
}

// stage plays the cluster of one stage: Flux applies every commit its
// Workload records, the Deployments of its versions become available
// (those in failing never do), and with gh every pull request it opens is
// merged; until cond holds.
type stage struct {
	f       *fixture
	name    string
	gh      *forgetest.GitHub
	failing map[string]bool
}

func (s stage) workload() string { return "web-" + s.name }

func (s stage) drive(t *testing.T, what string, cond func(w *scribev1.Workload) bool) *scribev1.Workload {
	t.Helper()
	f := s.f
	ks := kustomizationName("Workload", f.ns, s.workload())
	played, merged := "", 0
	var last *scribev1.Workload
	waitFor(t, s.name+": "+what, func() (bool, string) {
		w := &scribev1.Workload{}
		if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: s.workload()}, w); err != nil {
			return false, err.Error()
		}
		last = w
		if cond(w) {
			return true, describe(w)
		}
		if pr := w.Status.PullRequest; s.gh != nil && pr != nil && pr.State == "open" && pr.Number != merged && w.Status.Revision == "" {
			f.mergePR(t, s.gh, pr.Number, "scribe/"+f.ns+"/workload/"+s.workload())
			merged = pr.Number
		}
		if rev := w.Status.Revision; rev != "" && rev != played {
			for _, v := range w.Spec.Versions {
				f.deploymentReady(t, s.workload()+"-"+v.Name, !s.failing[v.Name])
			}
			f.playFlux(t, ks, rev, true, "", "")
			played = rev
		}
		return false, describe(w)
	})
	return last
}

// stableAt drives the stage until version is its stable version, healthy.
func (s stage) stableAt(t *testing.T, version string) *scribev1.Workload {
	t.Helper()
	return s.drive(t, version+" stable", func(w *scribev1.Workload) bool {
		return w.Status.Phase == scribev1.WorkloadHealthy && w.Status.StableVersion == version && w.Status.CanaryVersion == ""
	})
}

func (f *fixture) stageWorkload(t *testing.T, name string) *scribev1.Workload {
	t.Helper()
	w := &scribev1.Workload{}
	if err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web-" + name}, w); err != nil {
		t.Fatal(err)
	}
	return w
}

func versionNames(w *scribev1.Workload) string {
	var names []string
	for _, v := range w.Spec.Versions {
		names = append(names, v.Name)
	}
	return strings.Join(names, ",")
}

// addPipelineVersion appends a version to the Pipeline's template.
func (f *fixture) addPipelineVersion(t *testing.T, v string) {
	t.Helper()
	f.editPipeline(t, func(p *scribev1.Pipeline) { p.Spec.Template.Versions = append(p.Spec.Template.Versions, version(v)) })
}

// editPipeline changes the Pipeline's spec, again on a conflict with the
// controller's status writes.
func (f *fixture) editPipeline(t *testing.T, edit func(p *scribev1.Pipeline)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := f.pipeline(t)
		edit(p)
		return f.e.c.Update(f.ctx(), p)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// weightedVersions are the versions a stage's HTTPRoute gave traffic in
// any of the commits of the stage's Workload.
func (f *fixture) weightedVersions(t *testing.T, stage string) []string {
	t.Helper()
	name := "web-" + stage
	backend := regexp.MustCompile(`name: ` + name + `-(v\d+)\n\s+port: \d+\n\s+weight: (\d+)`)
	var out []string
	for _, c := range f.scribeCommits(t, "Workload/"+f.ns+"/"+name) {
		route := f.fileAt(t, c, "clusters/"+stage+"/"+f.ns+"/workload/"+name+"/httproute-"+name+".yaml")
		for _, m := range backend.FindAllStringSubmatch(route, -1) {
			if m[2] != "0" && !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

func TestPipelineNewerVersionArrivingMidPipelineOvertakesThePreviousOneStageByStage(t *testing.T) {
	f := newFixture(t)
	stages := []string{"dev", "staging", "prod"}
	f.startPipelineRepositories(t, stages, nil)
	p := webPipeline(f.ns, []string{"v1"}, stages...)
	p.Spec.Stages[0].Soak = &metav1.Duration{Duration: time.Second}
	if err := f.e.c.Create(f.ctx(), p); err != nil {
		t.Fatal(err)
	}
	dev, staging, prod := stage{f: f, name: "dev"}, stage{f: f, name: "staging"}, stage{f: f, name: "prod"}

	// v1 enters dev only; staging waits for dev's soak.
	dev.stableAt(t, "v1")
	got := f.waitPipeline(t, "v1 verified in dev", func(p *scribev1.Pipeline) bool { return stageOf(p, "dev").Verified == "v1" })
	if s := stageOf(got, "dev"); s.HealthySince == nil || !strings.Contains(s.Evidence, "a soak of 1s") {
		t.Errorf("dev's verification lacks its soak: %+v", s)
	}
	staging.stableAt(t, "v1")
	prod.stableAt(t, "v1")
	got = f.waitPipeline(t, "v1 everywhere", pipelineReady)
	if got.Status.Summary != "dev=v1 staging=v1 prod=v1" || got.Status.Version != "v1" {
		t.Fatalf("summary %q version %q", got.Status.Summary, got.Status.Version)
	}

	// v2 walks into staging and is held there mid-canary (staging's
	// cluster applies nothing more).
	f.addPipelineVersion(t, "v2")
	dev.stableAt(t, "v2")
	staging.drive(t, "v2 at its first step", func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.Revision != "" && canaryWeight(w) > 0
	})
	f.waitPipeline(t, "v2 in flight in staging", func(p *scribev1.Pipeline) bool {
		return stageOf(p, "staging").InFlight == "v2" && strings.Contains(p.Status.Summary, "staging=v1>v2(1/2)")
	})

	// v3 arrives: it enters dev at once, staging goes on with v2.
	f.addPipelineVersion(t, "v3")
	f.waitPipeline(t, "v3 admitted to dev", func(p *scribev1.Pipeline) bool { return stageOf(p, "dev").Admitted == "v3" })
	if v := versionNames(f.stageWorkload(t, "staging")); v != "v1,v2" {
		t.Fatalf("staging's Workload carries %s before dev verified v3", v)
	}
	if v := versionNames(f.stageWorkload(t, "prod")); v != "v1" {
		t.Fatalf("prod's Workload carries %s", v)
	}
	dev.stableAt(t, "v3")
	// Verified in dev (after its soak), v3 overtakes v2 in staging, which
	// never became stable there, and prod goes from v1 straight to v3.
	// Staging's cluster applies again only once its Workload carries v3:
	// applying v2's held step before would let v2 finish there first, and
	// a v2 verified in staging rightly goes on to prod.
	waitFor(t, "v3 handed to staging", func() (bool, string) {
		v := versionNames(f.stageWorkload(t, "staging"))
		return strings.HasSuffix(v, ",v3"), "staging's Workload carries " + v
	})
	staging.stableAt(t, "v3")
	prod.stableAt(t, "v3")
	got = f.waitPipeline(t, "v3 everywhere", pipelineReady)
	if got.Status.Summary != "dev=v3 staging=v3 prod=v3" {
		t.Errorf("summary %q", got.Status.Summary)
	}
	if v := f.weightedVersions(t, "prod"); slices.Contains(v, "v2") {
		t.Errorf("prod's commits gave v2 traffic: %v", v)
	}
	if v := f.weightedVersions(t, "staging"); !slices.Contains(v, "v2") || !slices.Contains(v, "v3") {
		t.Errorf("staging's commits gave traffic to %v, want v2 (held) and v3", v)
	}
}

func TestPipelineStageRemovedFromSpecIsDeletedAndTheNextStageIsFedByTheOneBefore(t *testing.T) {
	f := newFixture(t)
	stages := []string{"dev", "staging", "prod"}
	f.startPipelineRepositories(t, stages, nil)
	if err := f.e.c.Create(f.ctx(), webPipeline(f.ns, []string{"v1"}, stages...)); err != nil {
		t.Fatal(err)
	}
	dev, staging, prod := stage{f: f, name: "dev"}, stage{f: f, name: "staging"}, stage{f: f, name: "prod"}
	dev.stableAt(t, "v1")
	staging.stableAt(t, "v1")
	prod.stableAt(t, "v1")
	f.waitPipeline(t, "v1 everywhere", pipelineReady)

	f.editPipeline(t, func(p *scribev1.Pipeline) {
		p.Spec.Stages = slices.DeleteFunc(p.Spec.Stages, func(s scribev1.PipelineStage) bool { return s.Name == "staging" })
	})
	// Its Workload is deleted: its finalizer commits the removal, and
	// Flux prunes it.
	waitFor(t, "staging's Workload deleting", func() (bool, string) {
		w := &scribev1.Workload{}
		err := f.e.c.Get(f.ctx(), types.NamespacedName{Namespace: f.ns, Name: "web-staging"}, w)
		if apierrors.IsNotFound(err) {
			return true, "gone"
		}
		if err != nil {
			return false, err.Error()
		}
		if w.DeletionTimestamp != nil && w.Status.Phase == scribev1.WorkloadDeleting {
			f.deleteKustomization(t, kustomizationName("Workload", f.ns, "web-staging"))
		}
		return false, describe(w)
	})
	got := f.waitPipeline(t, "two stages", func(p *scribev1.Pipeline) bool {
		return len(p.Status.Stages) == 2 && p.Status.ObservedGeneration == p.Generation
	})
	if got.Status.Summary != "dev=v1 prod=v1" {
		t.Errorf("summary %q", got.Status.Summary)
	}

	// The next version goes from dev straight to prod.
	f.addPipelineVersion(t, "v2")
	dev.stableAt(t, "v2")
	f.waitPipeline(t, "v2 admitted to prod", func(p *scribev1.Pipeline) bool { return stageOf(p, "prod").Admitted == "v2" })
	w := prod.stableAt(t, "v2")
	if w.Annotations[controller.PromotedVersionAnnotation] != "v2" || !strings.Contains(w.Annotations[controller.PromotionEvidenceAnnotation], "in stage dev") {
		t.Errorf("prod's Workload annotations %v do not carry dev's evidence", w.Annotations)
	}
	f.waitPipeline(t, "v2 everywhere", pipelineReady)
}

func TestPipelineFailingVersionStopsWhereItRolledBackAndLaterStagesKeepTheirs(t *testing.T) {
	f := newFixture(t)
	stages := []string{"dev", "staging", "prod"}
	f.startPipelineRepositories(t, stages, nil)
	if err := f.e.c.Create(f.ctx(), webPipeline(f.ns, []string{"v1"}, stages...)); err != nil {
		t.Fatal(err)
	}
	dev, prod := stage{f: f, name: "dev"}, stage{f: f, name: "prod"}
	staging := stage{f: f, name: "staging", failing: map[string]bool{"v2": true}}
	dev.stableAt(t, "v1")
	staging.stableAt(t, "v1")
	prod.stableAt(t, "v1")
	f.waitPipeline(t, "v1 everywhere", pipelineReady)
	prodRevision := f.stageWorkload(t, "prod").Status.Revision

	f.addPipelineVersion(t, "v2")
	dev.stableAt(t, "v2")
	staging.drive(t, "v2 rolled back", func(w *scribev1.Workload) bool {
		return w.Status.Phase == scribev1.WorkloadRolledBack && w.Status.RolledBackVersion == "v2" && w.Status.Revision != ""
	})
	got := f.waitPipeline(t, "staging failed", func(p *scribev1.Pipeline) bool { return stageOf(p, "staging").Failed == "v2" })
	if c := apimeta.FindStatusCondition(got.Status.Conditions, scribev1.ReadyCondition); c == nil || c.Reason != controller.ReasonStageRolledBack {
		t.Errorf("Ready = %+v, want %s", c, controller.ReasonStageRolledBack)
	}
	if !strings.Contains(got.Status.Summary, "staging=v1!v2") {
		t.Errorf("summary %q", got.Status.Summary)
	}
	time.Sleep(2 * time.Second) // nothing may move prod meanwhile
	w := f.stageWorkload(t, "prod")
	if versionNames(w) != "v1" || w.Status.Revision != prodRevision || stageOf(f.pipeline(t), "prod").Admitted != "v1" {
		t.Errorf("prod moved: versions %s revision %s (was %s)", versionNames(w), w.Status.Revision, prodRevision)
	}
}

func TestPipelinePullRequestClosedWithoutMergeHoldsTheStageAndLaterStages(t *testing.T) {
	f := newFixture(t)
	gh, prs := f.githubForPullRequests(t)
	stages := []string{"dev", "staging", "prod"}
	f.startPipelineRepositories(t, stages, func(s string, r *scribev1.Repository) {
		if s == "staging" {
			r.Spec.Git.PullRequest = prs
		}
	})
	p := webPipeline(f.ns, []string{"v1"}, stages...)
	p.Spec.Stages[1].Review = scribev1.PromotionPullRequest
	if err := f.e.c.Create(f.ctx(), p); err != nil {
		t.Fatal(err)
	}
	dev, staging, prod := stage{f: f, name: "dev"}, stage{f: f, name: "staging", gh: gh}, stage{f: f, name: "prod"}
	dev.stableAt(t, "v1")
	staging.stableAt(t, "v1")
	prod.stableAt(t, "v1")
	f.waitPipeline(t, "v1 everywhere", pipelineReady)

	f.addPipelineVersion(t, "v2")
	dev.stableAt(t, "v2")
	// The first pull request deploys v2 at weight 0 (the warm-up).
	w := f.waitWorkloadNamed(t, "web-staging", "v2's warm-up proposed", func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.PullRequest != nil && w.Status.PullRequest.State == "open"
	})
	number := w.Status.PullRequest.Number
	var body string
	for _, pr := range gh.PullRequests() {
		if pr.Number == number {
			body = pr.Body
		}
	}
	for _, want := range []string{"Promoted from the previous stage: v2 was stable and healthy in stage dev (Workload web-dev, commit ", "Rolling out **v2** (canary): deployed at weight 0 until it is available; step 1 of 2 (weight 50) follows."} {
		if !strings.Contains(body, want) {
			t.Errorf("staging's pull request lacks %q:\n%s", want, body)
		}
	}
	f.waitPipeline(t, "the pull request in staging's status", func(p *scribev1.Pipeline) bool {
		s := stageOf(p, "staging")
		return s.PullRequest != nil && s.PullRequest.Number == number && strings.Contains(p.Status.Summary, fmt.Sprintf("staging=v1>v2(1/2,#%d)", number))
	})

	gh.Close(number)
	got := f.waitPipeline(t, "the closed pull request stalls the pipeline", func(p *scribev1.Pipeline) bool {
		// Conditions and the rest of status are two patches: both are waited for.
		c := apimeta.FindStatusCondition(p.Status.Conditions, scribev1.StalledCondition)
		pr := stageOf(p, "staging").PullRequest
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == controller.ReasonStageStalled && pr != nil && pr.State == "closed"
	})
	if !strings.Contains(describePipeline(got), "closed without merging") {
		t.Errorf("the pipeline does not say why: %s", describePipeline(got))
	}
	if s := stageOf(got, "staging"); s.Stable != "v1" || s.InFlight != "v2" || s.PullRequest.Number != number {
		t.Errorf("staging = %+v", s)
	}
	if s := stageOf(got, "prod"); s.Admitted != "v1" || s.Stable != "v1" {
		t.Errorf("prod = %+v", s)
	}
	if v := versionNames(f.stageWorkload(t, "prod")); v != "v1" {
		t.Errorf("prod's Workload carries %s", v)
	}
}

func TestPipelineAPIRefusesBadSpecsNamingTheField(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		edit func(p *scribev1.Pipeline)
		want string
	}{
		{"a template with its own repositoryRef", func(p *scribev1.Pipeline) {
			p.Spec.Template.RepositoryRef = &scribev1.LocalObjectReference{Name: "dev"}
		}, "spec.template.repositoryRef cannot be set: each stage names its Repository in spec.stages[].repositoryRef"},
		{"two stages of one name", func(p *scribev1.Pipeline) {
			p.Spec.Stages = append(p.Spec.Stages, p.Spec.Stages[0])
		}, `spec.stages[2]: Duplicate value: {"name":"dev"}`},
		{"no stage", func(p *scribev1.Pipeline) { p.Spec.Stages = nil }, "spec.stages: Required value"},
		{"a stage name that is not a DNS label", func(p *scribev1.Pipeline) { p.Spec.Stages[0].Name = "Dev" }, "spec.stages[0].name: Invalid value"},
		{"an unknown review", func(p *scribev1.Pipeline) { p.Spec.Stages[1].Review = "email" }, `spec.stages[1].review: Unsupported value: "email"`},
		{"a name too long for its stage Workloads", func(p *scribev1.Pipeline) { p.Name = strings.Repeat("w", 31) }, "metadata.name must be at most 30 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := webPipeline(f.ns, []string{"v1"}, "dev", "staging")
			tc.edit(p)
			err := f.e.c.Create(f.ctx(), p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestPipelineControllerRestartedMidSoakKeepsTheSoakItSavedAndPromotesOnce(t *testing.T) {
	f := newFixture(t)
	stages := []string{"dev", "staging"}
	stop := f.startPipelineRepositories(t, stages, nil)
	p := webPipeline(f.ns, []string{"v1"}, stages...)
	p.Spec.Stages[0].Soak = &metav1.Duration{Duration: 3 * time.Second}
	if err := f.e.c.Create(f.ctx(), p); err != nil {
		t.Fatal(err)
	}
	dev, staging := stage{f: f, name: "dev"}, stage{f: f, name: "staging"}
	dev.stableAt(t, "v1")
	staging.stableAt(t, "v1")
	f.waitPipeline(t, "v1 everywhere", pipelineReady)

	f.addPipelineVersion(t, "v2")
	dev.stableAt(t, "v2")
	got := f.waitPipeline(t, "v2 soaking in dev", func(p *scribev1.Pipeline) bool {
		s := stageOf(p, "dev")
		return s.Admitted == "v2" && s.HealthySince != nil
	})
	since := stageOf(got, "dev").HealthySince.Time
	// The controller goes down mid-soak (a fresh manager with a fresh
	// cache comes up later), and the soak ends while it is down.
	stop()
	time.Sleep(4 * time.Second)
	if s := stageOf(f.pipeline(t), "staging"); s.Admitted != "v1" {
		t.Fatalf("staging admitted %s while the controller was down", s.Admitted)
	}
	startController(t, f.e, f.ns)
	got = f.waitPipeline(t, "v2 admitted to staging after the restart", func(p *scribev1.Pipeline) bool { return stageOf(p, "staging").Admitted == "v2" })
	d := stageOf(got, "dev")
	if !d.HealthySince.Time.Equal(since) || !strings.Contains(d.Evidence, "from "+since.UTC().Format(time.RFC3339)) {
		t.Errorf("the soak restarted: healthySince %s (saved %s), evidence %q", d.HealthySince, since, d.Evidence)
	}
	staging.stableAt(t, "v2")
	f.waitPipeline(t, "v2 everywhere", pipelineReady)
	// One rollout of v2 in staging: its warm-up at weight 0, its first
	// step, its second, the promotion.
	var stagingV2 int
	for _, c := range f.scribeCommits(t, "Workload/"+f.ns+"/web-staging") {
		if strings.Contains(f.fileAt(t, c, "clusters/staging/"+f.ns+"/workload/web-staging/httproute-web-staging.yaml"), "web-staging-v2") {
			stagingV2++
		}
	}
	if stagingV2 != 4 {
		t.Errorf("staging has %d commits naming v2, want 4 (warm-up, step 1, step 2, promotion)", stagingV2)
	}
}
