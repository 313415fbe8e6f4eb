package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// pipeline is a Pipeline named web over the versions, with the stages
// "dev,staging,prod" and a soak of soak on each.
func pipeline(versions, stages string, soak time.Duration, status ...scribev1.PipelineStageStatus) *scribev1.Pipeline {
	p := &scribev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Generation: 1}}
	p.Spec.Template = *web(versions)
	for _, s := range strings.Split(stages, ",") {
		p.Spec.Stages = append(p.Spec.Stages, scribev1.PipelineStage{Name: s, RepositoryRef: scribev1.LocalObjectReference{Name: s}, Soak: &metav1.Duration{Duration: soak}})
	}
	p.Status.Stages = status
	return p
}

// stageWL is a stage Workload as the WorkloadReconciler leaves it.
type stageWL struct {
	stable, canary string
	step           int32
	phase          scribev1.WorkloadPhase
	ready          bool
	rolledBack     string
	stalled        string // Stalled=True with this message
	unobserved     bool   // its spec changed since it last reconciled
	foreign        bool   // not the Pipeline's (no label, no owner reference)
	failedCheck    bool
}

func (s stageWL) workload(stage string) *scribev1.Workload {
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "web-" + stage, Namespace: "apps", Generation: 2,
		Labels: map[string]string{PipelineLabel: "web", StageLabel: stage}}}
	controller := true
	w.OwnerReferences = []metav1.OwnerReference{{APIVersion: scribev1.GroupVersion.String(), Kind: scribev1.PipelineKind, Name: "web", Controller: &controller}}
	w.Spec = *web("v1")
	if s.foreign {
		w.Labels, w.OwnerReferences = nil, nil
	}
	w.Status.ObservedGeneration = 2
	if s.unobserved {
		w.Status.ObservedGeneration = 1
	}
	w.Status.StableVersion, w.Status.CanaryVersion, w.Status.Step, w.Status.Phase = s.stable, s.canary, s.step, s.phase
	w.Status.RolledBackVersion, w.Status.Revision = s.rolledBack, "0123456789abcdef"
	ready := metav1.ConditionFalse
	if s.ready {
		ready = metav1.ConditionTrue
	}
	w.Status.Conditions = []metav1.Condition{{Type: scribev1.ReadyCondition, Status: ready, Reason: "X", Message: "workload says so"}}
	if s.stalled != "" {
		w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: scribev1.StalledCondition, Status: metav1.ConditionTrue, Reason: "PullRequestClosed", Message: s.stalled})
	}
	if s.rolledBack != "" {
		w.Status.Message = "rollback of " + s.rolledBack + ": step 1 failed"
	}
	w.Status.Checks = []scribev1.CheckResult{{Name: "restarts", Passed: !s.failedCheck, Message: "0 restarts"}}
	return w
}

var (
	stableIn = func(v string) stageWL {
		return stageWL{stable: v, step: -1, phase: scribev1.WorkloadHealthy, ready: true}
	}
	rolling = func(stable, canary string, step int32) stageWL {
		return stageWL{stable: stable, canary: canary, step: step, phase: scribev1.WorkloadProgressing}
	}
)

func admitted(name, version string) scribev1.PipelineStageStatus {
	return scribev1.PipelineStageStatus{Name: name, Admitted: version}
}

func verified(name, version string) scribev1.PipelineStageStatus {
	return scribev1.PipelineStageStatus{Name: name, Admitted: version, Verified: version, Evidence: version + " was fine in " + name}
}

func soaking(name, version string, since time.Duration) scribev1.PipelineStageStatus {
	at := metav1.NewTime(t0.Add(-since))
	return scribev1.PipelineStageStatus{Name: name, Admitted: version, HealthySince: &at}
}

// describeStages is a stage per line: "dev admitted=v2 verified=v1 failed= healthySince=true".
func describeStages(st scribev1.PipelineStatus) string {
	var b strings.Builder
	for _, s := range st.Stages {
		fmt.Fprintf(&b, "%s admitted=%s verified=%s failed=%s healthySince=%t\n", s.Name, s.Admitted, s.Verified, s.Failed, s.HealthySince != nil)
	}
	return b.String()
}

func TestDecidePipelineAdmitsAVersionToTheNextStageOnlyOnceItHasSoaked(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        *scribev1.Pipeline
		stages   map[string]stageWL
		want     string // describeStages
		ready    string // the Ready mark's prefix
		summary  string
		requeue  time.Duration
		eventHas string
	}{
		{
			name:  "a new pipeline admits the newest version to the first stage only",
			p:     pipeline("v1,v2", "dev,staging,prod", time.Minute),
			want:  "dev admitted=v2 verified= failed= healthySince=false\nstaging admitted= verified= failed= healthySince=false\nprod admitted= verified= failed= healthySince=false\n",
			ready: "Ready=False/Progressing: stage dev: ", summary: "dev=- staging=- prod=-",
		},
		{
			name:   "a stable healthy version starts its soak and the controller comes back when it ends",
			p:      pipeline("v1", "dev,staging", time.Minute, admitted("dev", "v1")),
			stages: map[string]stageWL{"dev": stableIn("v1")},
			want:   "dev admitted=v1 verified= failed= healthySince=true\nstaging admitted= verified= failed= healthySince=false\n",
			ready:  "Ready=False/Progressing: stage dev: v1 stable and healthy; soaking for 1m0s more", summary: "dev=v1 staging=-", requeue: time.Minute,
		},
		{
			name:   "a soaked version is verified and admitted to the next stage in the same decision",
			p:      pipeline("v1", "dev,staging", time.Minute, soaking("dev", "v1", 2*time.Minute)),
			stages: map[string]stageWL{"dev": stableIn("v1")},
			want:   "dev admitted=v1 verified=v1 failed= healthySince=true\nstaging admitted=v1 verified= failed= healthySince=false\n",
			ready:  "Ready=False/Progressing: stage staging: ", eventHas: "Promoted: v1 admitted to stage staging, verified in stage dev",
		},
		{
			name:   "a version that stops being healthy during its soak starts it again",
			p:      pipeline("v1", "dev,staging", time.Minute, soaking("dev", "v1", 30*time.Second)),
			stages: map[string]stageWL{"dev": {stable: "v1", step: -1, phase: scribev1.WorkloadProgressing}},
			want:   "dev admitted=v1 verified= failed= healthySince=false\nstaging admitted= verified= failed= healthySince=false\n",
			ready:  "Ready=False/Progressing: stage dev: workload says so",
		},
		{
			name:   "a failing analysis check does not count as healthy",
			p:      pipeline("v1", "dev,staging", 0, admitted("dev", "v1")),
			stages: map[string]stageWL{"dev": func() stageWL { s := stableIn("v1"); s.failedCheck = true; return s }()},
			want:   "dev admitted=v1 verified= failed= healthySince=false\nstaging admitted= verified= failed= healthySince=false\n",
			ready:  "Ready=False/Progressing",
		},
		{
			name:   "a stage Workload that has not observed its new spec is not read as healthy",
			p:      pipeline("v1", "dev,staging", 0, admitted("dev", "v1")),
			stages: map[string]stageWL{"dev": func() stageWL { s := stableIn("v1"); s.unobserved = true; return s }()},
			want:   "dev admitted=v1 verified= failed= healthySince=false\nstaging admitted= verified= failed= healthySince=false\n",
			ready:  "Ready=False/Progressing: stage dev: the stage's Workload has not observed its spec yet",
		},
		{
			name: "a rollback stops the version in its stage and later stages keep theirs",
			p: pipeline("v1,v2", "dev,staging,prod", 0, verified("dev", "v2"),
				scribev1.PipelineStageStatus{Name: "staging", Admitted: "v2", Verified: "v1"}, verified("prod", "v1")),
			stages:  map[string]stageWL{"dev": stableIn("v2"), "staging": {stable: "v1", step: -1, phase: scribev1.WorkloadRolledBack, ready: true, rolledBack: "v2"}, "prod": stableIn("v1")},
			want:    "dev admitted=v2 verified=v2 failed= healthySince=false\nstaging admitted=v2 verified=v1 failed=v2 healthySince=false\nprod admitted=v1 verified=v1 failed= healthySince=false\n",
			ready:   "Ready=False/StageRolledBack: stage staging rolled back v2; later stages keep their versions: rollback of v2: step 1 failed",
			summary: "dev=v2 staging=v1!v2 prod=v1", eventHas: "Warning StageRolledBack: stage staging rolled back v2",
		},
		{
			name: "a newer version enters the first stage while the previous one is mid-pipeline; the next stage keeps rolling out the previous one",
			p: pipeline("v1,v2,v3", "dev,staging,prod", 0, verified("dev", "v2"),
				scribev1.PipelineStageStatus{Name: "staging", Admitted: "v2", Verified: "v1"}, verified("prod", "v1")),
			stages: map[string]stageWL{"dev": stableIn("v2"), "staging": rolling("v1", "v2", 1), "prod": stableIn("v1")},
			want:   "dev admitted=v3 verified=v2 failed= healthySince=false\nstaging admitted=v2 verified=v1 failed= healthySince=false\nprod admitted=v1 verified=v1 failed= healthySince=false\n",
			ready:  "Ready=False/Progressing: stage dev: ", summary: "dev=v2 staging=v1>v2(2/3) prod=v1",
		},
		{
			name: "the newer version, once verified, overtakes the one still rolling out in the next stage",
			p: pipeline("v1,v2,v3", "dev,staging,prod", 0, admitted("dev", "v3"),
				scribev1.PipelineStageStatus{Name: "staging", Admitted: "v2", Verified: "v1"}, verified("prod", "v1")),
			stages: map[string]stageWL{"dev": stableIn("v3"), "staging": rolling("v1", "v2", 1), "prod": stableIn("v1")},
			want:   "dev admitted=v3 verified=v3 failed= healthySince=true\nstaging admitted=v3 verified=v1 failed= healthySince=false\nprod admitted=v1 verified=v1 failed= healthySince=false\n",
			ready:  "Ready=False/Progressing",
		},
		{
			name:   "a stage is never given an older version than it has",
			p:      pipeline("v1,v2", "dev,staging", 0, verified("dev", "v1"), verified("staging", "v2")),
			stages: map[string]stageWL{"dev": stableIn("v1"), "staging": stableIn("v2")},
			want:   "dev admitted=v2 verified=v1 failed= healthySince=false\nstaging admitted=v2 verified=v2 failed= healthySince=false\n",
			ready:  "Ready=False/Progressing: stage dev: ",
		},
		{
			name: "a removed stage is dropped and the stage after it is fed by the one before",
			p: func() *scribev1.Pipeline {
				p := pipeline("v1,v2", "dev,prod", 0, verified("dev", "v2"), admitted("staging", "v1"), verified("prod", "v1"))
				return p
			}(),
			stages: map[string]stageWL{"dev": stableIn("v2"), "prod": stableIn("v1")},
			want:   "dev admitted=v2 verified=v2 failed= healthySince=false\nprod admitted=v2 verified=v1 failed= healthySince=false\n",
			ready:  "Ready=False/Progressing: stage prod: ", summary: "dev=v2 prod=v1",
		},
		{
			name: "a pull request closed without merging stalls the stage and nothing moves on",
			p:    pipeline("v1,v2", "dev,staging", 0, verified("dev", "v2"), scribev1.PipelineStageStatus{Name: "staging", Admitted: "v2", Verified: "v1"}),
			stages: map[string]stageWL{"dev": stableIn("v2"), "staging": func() stageWL {
				s := rolling("v1", "v2", 0)
				s.stalled = "pull request #7 was closed without merging"
				return s
			}()},
			want:  "dev admitted=v2 verified=v2 failed= healthySince=false\nstaging admitted=v2 verified=v1 failed= healthySince=false\n",
			ready: "Ready=False/StageStalled: stage staging: pull request #7 was closed without merging",
		},
		{
			name:   "every stage on the newest version is Ready",
			p:      pipeline("v1,v2", "dev,staging", 0, verified("dev", "v2"), verified("staging", "v2")),
			stages: map[string]stageWL{"dev": stableIn("v2"), "staging": stableIn("v2")},
			want:   "dev admitted=v2 verified=v2 failed= healthySince=false\nstaging admitted=v2 verified=v2 failed= healthySince=false\n",
			ready:  "Ready=True/Succeeded: v2 is stable in every stage", summary: "dev=v2 staging=v2",
		},
		{
			name:   "a Workload of a stage's name that is not the Pipeline's stalls it",
			p:      pipeline("v1", "dev", 0),
			stages: map[string]stageWL{"dev": func() stageWL { s := stableIn("v1"); s.foreign = true; return s }()},
			want:   "dev admitted=v1 verified=v1 failed= healthySince=true\n",
			ready:  "Ready=False/StageConflict: Workload web-dev of stage dev exists and does not belong to this Pipeline",
		},
		{
			name:   "a stage running a version removed from the template stalls",
			p:      pipeline("v2,v3", "dev,staging", 0, verified("dev", "v1"), verified("staging", "v1")),
			stages: map[string]stageWL{"dev": rolling("v1", "v3", 0), "staging": stableIn("v1")},
			want:   "dev admitted=v3 verified=v1 failed= healthySince=false\nstaging admitted=v1 verified=v1 failed= healthySince=false\n",
			ready:  "Ready=False/VersionRemoved: stage staging runs v1, which spec.template.versions no longer names",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := map[string]*scribev1.Workload{}
			for name, s := range tc.stages {
				ws[name] = s.workload(name)
			}
			d := DecidePipeline(tc.p, ws, t0)
			if got := describeStages(d.Status); got != tc.want {
				t.Errorf("stages:\n%s\nwant:\n%s", got, tc.want)
			}
			var ready string
			for _, m := range d.Marks {
				if m.Type == scribev1.ReadyCondition {
					ready = m.String()
				}
			}
			if !strings.HasPrefix(ready, tc.ready) {
				t.Errorf("Ready = %q, want it to start with %q", ready, tc.ready)
			}
			if tc.summary != "" && d.Status.Summary != tc.summary {
				t.Errorf("summary = %q, want %q", d.Status.Summary, tc.summary)
			}
			if d.Requeue != tc.requeue {
				t.Errorf("requeue = %s, want %s", d.Requeue, tc.requeue)
			}
			if tc.eventHas != "" {
				var evs []string
				for _, e := range d.Events {
					evs = append(evs, e.String())
				}
				if !strings.Contains(strings.Join(evs, "\n"), tc.eventHas) {
					t.Errorf("events %q lack %q", evs, tc.eventHas)
				}
			}
		})
	}
}

func TestStageWorkloadSpecCarriesTheTemplateUpToTheAdmittedVersion(t *testing.T) {
	p := pipeline("v1,v2,v3", "dev,staging", 0)
	p.Spec.Stages[1].Review = scribev1.PromotionPullRequest
	spec, ok := StageWorkloadSpec(p, p.Spec.Stages[1], "v2")
	if !ok {
		t.Fatal("no spec for an admitted version")
	}
	var names []string
	for _, v := range spec.Versions {
		names = append(names, v.Name)
	}
	if got := strings.Join(names, ","); got != "v1,v2" {
		t.Errorf("versions = %s, want v1,v2", got)
	}
	if spec.RepositoryRef == nil || spec.RepositoryRef.Name != "staging" {
		t.Errorf("repositoryRef = %+v, want staging", spec.RepositoryRef)
	}
	if spec.Rollout.Promotion != scribev1.PromotionPullRequest {
		t.Errorf("promotion = %q, want the stage's review", spec.Rollout.Promotion)
	}
	if len(p.Spec.Template.Versions) != 3 || p.Spec.Template.Rollout.Promotion != "" {
		t.Error("the template was changed")
	}
	if _, ok := StageWorkloadSpec(p, p.Spec.Stages[0], "v9"); ok {
		t.Error("a version the template does not name gave a spec")
	}
}

func TestPromotionEvidenceGoesIntoTheFirstStepOfThePromotedVersionOnly(t *testing.T) {
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		PromotedVersionAnnotation: "v2", PromotionEvidenceAnnotation: "v2 was stable and healthy in stage dev",
	}}}
	for _, tc := range []struct {
		canary  string
		step    int32
		trusted bool
		want    string
	}{
		{"v2", 0, true, "Promoted from the previous stage: v2 was stable and healthy in stage dev\n\nstep evidence"},
		{"v2", 0, false, "step evidence"}, // not the Pipeline's annotations
		{"v2", 1, true, "step evidence"},
		{"v3", 0, true, "step evidence"},
		{"", -1, true, "step evidence"},
	} {
		w.Status.CanaryVersion, w.Status.Step = tc.canary, tc.step
		if got := promotionEvidence(w, tc.trusted, "step evidence"); got != tc.want {
			t.Errorf("canary %s step %d trusted %v: %q, want %q", tc.canary, tc.step, tc.trusted, got, tc.want)
		}
	}
}
