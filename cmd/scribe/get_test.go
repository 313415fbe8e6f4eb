package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

var getTime = metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))

// canaryWorkload is checkout rolling v2 out over v1 in three steps.
func canaryWorkload() *scribev1.Workload {
	return &scribev1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"},
		Spec: scribev1.WorkloadSpec{
			Versions: []scribev1.Version{{Name: "v1"}, {Name: "v2"}},
			Rollout: &scribev1.Rollout{Steps: []scribev1.RolloutStep{
				{Weight: 10, Pause: scribev1.PauseFor(time.Minute)},
				{Weight: 50, Pause: scribev1.PauseFor(5 * time.Minute)},
				{Weight: 100},
			}},
		},
		Status: scribev1.WorkloadStatus{
			CommonStatus: scribev1.CommonStatus{
				Revision: "0123456789abcdef0123456789abcdef01234567",
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing",
					Message: "step 2 of v2 healthy; holding for 4m"}},
				GeneratedResources: &scribev1.GeneratedResources{Path: "shop/workload/checkout", Objects: []scribev1.ObjectIdentity{
					{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: "shop", Name: "checkout"}}},
			},
			Phase:         scribev1.WorkloadProgressing,
			StableVersion: "v1",
			CanaryVersion: "v2",
			Step:          1,
			Traffic:       []scribev1.VersionWeight{{Version: "v1", Weight: 50}, {Version: "v2", Weight: 50}},
			StepHealthyAt: &getTime,
		},
	}
}

func TestGetRendersTheGoldenTrees(t *testing.T) {
	applied := &appliedRevision{Object: "Kustomization shop/checkout", Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567"}
	cases := map[string]func() string{
		"workload-canary-mid-step-with-checks": func() string {
			w := canaryWorkload()
			w.Status.FailedChecks = 1
			w.Status.Checks = []scribev1.CheckResult{
				{Name: "error-rate", Passed: true, Provider: "prometheus", Value: "0.01", Condition: "<= 0.05", Message: "0.01 <= 0.05"},
				{Name: "latency-p99", Provider: "datadog", Value: "812", Condition: "< 500", Message: "812 is not < 500"},
				{Name: "smoke", Inconclusive: true, Provider: "web", Message: "no sample yet"},
			}
			return renderWorkload(w, applied)
		},
		"workload-warm-up": func() string {
			w := canaryWorkload()
			w.Status.Step, w.Status.StepHealthyAt = 0, nil
			w.Status.Traffic = []scribev1.VersionWeight{{Version: "v1", Weight: 100}, {Version: "v2", Weight: 0}}
			w.Status.Revision = ""
			w.Status.Conditions[0].Message = "committing v1=100 v2=0"
			return renderWorkload(w, &appliedRevision{Object: "Kustomization shop/checkout", Note: "not found"})
		},
		"workload-rolled-back": func() string {
			w := canaryWorkload()
			w.Status.Phase = scribev1.WorkloadRolledBack
			w.Status.CanaryVersion, w.Status.Step, w.Status.StepHealthyAt, w.Status.RolledBackVersion = "", -1, nil, "v2"
			w.Status.Traffic = []scribev1.VersionWeight{{Version: "v1", Weight: 100}}
			w.Status.Message = "3 failed analysis rounds of v2 at step 2: latency-p99: 812 is not < 500"
			w.Status.Conditions[0] = metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "RolledBack", Message: "v1 takes all traffic; v2 was rolled back"}
			return renderWorkload(w, applied)
		},
		"workload-pull-request": func() string {
			w := canaryWorkload()
			w.Spec.Rollout.Promotion = scribev1.PromotionPullRequest
			w.Status.Step, w.Status.StepHealthyAt = 0, nil
			w.Status.Traffic = []scribev1.VersionWeight{{Version: "v1", Weight: 90}, {Version: "v2", Weight: 10}}
			w.Status.Revision = ""
			w.Status.PullRequest = &scribev1.PullRequestStatus{Number: 42, URL: "https://github.com/acme/deploy/pull/42", Head: "abc", State: "open"}
			w.Status.Conditions[0].Message = "waiting for pull request #42 to be merged"
			return renderWorkload(w, nil)
		},
		"workload-held-paused-with-history": func() string {
			w := canaryWorkload()
			w.Spec.Paused = true
			w.Spec.Rollout.Steps[1].Pause = &scribev1.RolloutPause{}
			w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: scribev1.ReconcilingCondition, Status: metav1.ConditionTrue,
				Reason: "AwaitingPromotion", Message: "step 2 of 3 of v2 healthy; held until promoted"})
			started := metav1.NewTime(getTime.Add(-time.Hour))
			w.Status.History = []scribev1.RolloutRecord{
				{Version: "v1.9", Outcome: scribev1.OutcomeAborted, StartedAt: &started, FinishedAt: getTime, Step: 1, Revision: "3333333", PullRequest: 7, Message: "aborted by alice: p99 latency doubled"},
				{Version: "v1", Outcome: scribev1.OutcomePromoted, FinishedAt: started, Step: 2},
			}
			return renderWorkload(w, applied)
		},
		"pipeline": func() string {
			return renderPipeline(&scribev1.Pipeline{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"},
				Status: scribev1.PipelineStatus{
					Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing", Message: "staging: v3 at step 1 of 3"}},
					Version:    "v3",
					Summary:    "dev=v3 staging=v2>v3(1/3,#4) prod=v2",
					Stages: []scribev1.PipelineStageStatus{
						{Name: "dev", Workload: "checkout-dev", Phase: scribev1.WorkloadHealthy, Admitted: "v3", Stable: "v3", Verified: "v3", Step: -1, Revision: "1111111"},
						{Name: "staging", Workload: "checkout-staging", Phase: scribev1.WorkloadProgressing, Admitted: "v3", Stable: "v2", Verified: "v2", InFlight: "v3", Step: 0,
							PullRequest: &scribev1.PullRequestStatus{Number: 4, URL: "https://github.com/acme/staging/pull/4", State: "open"}, Message: "soaking"},
						{Name: "prod", Workload: "checkout-prod", Phase: scribev1.WorkloadHealthy, Admitted: "v2", Stable: "v2", Step: -1, Failed: "v1.9"},
					},
				},
			})
		},
		"experiment": func() string {
			return renderExperiment(&scribev1.Experiment{
				ObjectMeta: metav1.ObjectMeta{Namespace: "lab", Name: "load"},
				Status: scribev1.ExperimentStatus{
					CommonStatus: scribev1.CommonStatus{Revision: "2222222",
						Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing", Message: "waiting for the components"}}},
					Phase:  scribev1.ExperimentProvisioning,
					Stage:  scribev1.StageComponents,
					Stages: []scribev1.StageStatus{{Stage: 1, Commit: "1111111", CommittedAt: &getTime}, {Stage: 2, Commit: "2222222"}},
					Targets: []scribev1.TargetStatus{
						{Name: "east", Phase: scribev1.ExperimentReady, ClusterReady: true, Components: []scribev1.ComponentStatus{
							{Name: "redis", Delivery: "HelmRelease/lab/load-east-redis", Ready: true},
							{Name: "observability", Delivery: "Kustomization/lab/load-east-obs", Message: "reconciling"},
						}},
						{Name: "west", Phase: scribev1.ExperimentProvisioning, Message: "cluster is provisioning"},
					},
					Workflow: &scribev1.WorkflowStatus{Kind: "Workflow", Name: "load-validate", Phase: "Pending"},
				},
			}, &appliedRevision{Object: "Application lab/load", Revision: "2222222"})
		},
	}
	for name, render := range cases {
		t.Run(name, func(t *testing.T) {
			got := render()
			file := filepath.Join("testdata", "get", name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("read golden (go test -run TestGet -update writes it): %v", err)
			}
			if got != string(want) {
				t.Errorf("got:\n%s\nwant (%s):\n%s", got, file, want)
			}
		})
	}
}

// TestGetEscapesControlCharactersFromStatus proves that text from status
// (written by remote servers) cannot put an escape sequence, a carriage
// return or a bidirectional override on the terminal.
func TestGetEscapesControlCharactersFromStatus(t *testing.T) {
	hostile := "ok\x1b[2J\x1b]0;pwned\x07\r\nnext\u202eevil\x9b31m\xff"
	w := canaryWorkload()
	w.Status.Message = hostile
	w.Status.Conditions[0].Message = hostile
	w.Status.Checks = []scribev1.CheckResult{{Name: "c", Provider: "web", Value: hostile, Condition: hostile, Message: hostile}}
	w.Status.PullRequest = &scribev1.PullRequestStatus{Number: 1, URL: hostile, State: hostile}
	outs := []string{
		renderWorkload(w, &appliedRevision{Object: hostile, Revision: hostile}),
		renderWorkload(w, &appliedRevision{Object: hostile, Note: hostile}),
		renderPipeline(&scribev1.Pipeline{Status: scribev1.PipelineStatus{Summary: hostile, Stages: []scribev1.PipelineStageStatus{{Name: "s", Message: hostile, InFlight: hostile}}}}),
		renderExperiment(&scribev1.Experiment{Status: scribev1.ExperimentStatus{
			Targets:  []scribev1.TargetStatus{{Name: "t", Message: hostile, Components: []scribev1.ComponentStatus{{Name: "c", Message: hostile}}}},
			Workflow: &scribev1.WorkflowStatus{Message: hostile}}}, nil),
	}
	for i, out := range outs {
		for _, r := range strings.TrimSuffix(out, "\n") {
			if r == '\n' {
				continue
			}
			if unsafeRune(r) {
				t.Errorf("output %d holds %U:\n%q", i, r, out)
				break
			}
		}
		if !strings.Contains(out, `ok\x1b[2J`) {
			t.Errorf("output %d does not show the escape visibly:\n%s", i, out)
		}
	}
}

func TestGetAcceptsKindsLikeKubectl(t *testing.T) {
	for in, want := range map[string]string{
		"workload": "Workload", "Workloads": "Workload", "wl": "Workload",
		"pipeline": "Pipeline", "pipelines": "Pipeline", "pl": "Pipeline",
		"experiment": "Experiment", "experiments": "Experiment", "exp": "Experiment",
	} {
		k, err := parseGetKind(in)
		if err != nil || k.kind != want {
			t.Errorf("parseGetKind(%q) = %q, %v; want %s", in, k.kind, err, want)
		}
	}
	if _, err := parseGetKind("repository"); err == nil {
		t.Error("parseGetKind accepted repository")
	}
}

// TestGetRunsAsAKubectlPlugin proves that the binary invoked as
// kubectl-scribe (kubectl's plugin for `kubectl scribe`) names itself so.
func TestGetRunsAsAKubectlPlugin(t *testing.T) {
	for prog, want := range map[string]string{
		"/usr/local/bin/kubectl-scribe": "kubectl scribe get workload|pipeline|experiment [NAME]",
		"scribe":                        "scribe get workload|pipeline|experiment [NAME]",
	} {
		var stdout, stderr strings.Builder
		if code := runAs(context.Background(), prog, []string{"get", "--help"}, &stdout, &stderr); code != exitOK {
			t.Fatalf("%s get --help: exit %d: %s", prog, code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "Usage:\n  "+want) {
			t.Errorf("%s get --help does not show the usage %q:\n%s", prog, want, stdout.String())
		}
	}
}

// TestGetStartsNoWorkflowCommand: status text that the tree indents
// only by spaces (the last check's message) cannot start a CI workflow
// command when scribe get runs in a CI log, and a newline in it adds no
// line.
func TestGetStartsNoWorkflowCommand(t *testing.T) {
	w := canaryWorkload()
	w.Status.Checks = []scribev1.CheckResult{{Name: "c", Provider: "web", Message: "::error::pwned\n::set-output name=ok::yes"}}
	out := renderWorkload(w, nil)
	for i, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "::") {
			t.Errorf("line %d reads as a workflow command: %q", i+1, line)
		}
	}
	if want := `    \x3a:error::pwned\n::set-output name=ok::yes`; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
