package main

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// The control verbs write Scribe's own resources on a real API server,
// with the user's kubeconfig: promote, abort and retry a request
// annotation with who (as the API server authenticates the user) and
// why; pause, suspend and resume spec.paused and spec.suspend. A verb
// refuses a kind it does not act on, and a missing object.
func TestControlVerbsWriteRequestsAndFlagsOnAnAPIServer(t *testing.T) {
	env, cfg := startAPIServer(t)
	admin := adminClient(t, cfg)
	ctx := context.Background()
	w := canaryFixture(t)
	w.Namespace, w.Name = "default", "web"
	if err := admin.Create(ctx, &w); err != nil {
		t.Fatal(err)
	}
	p := &scribev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: scribev1.PipelineSpec{
		Template: scribev1.WorkloadSpec{Versions: w.Spec.Versions, Service: w.Spec.Service},
		Stages:   []scribev1.PipelineStage{{Name: "dev", RepositoryRef: scribev1.LocalObjectReference{Name: "dev"}}},
	}}
	if err := admin.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	kubeconfig := userKubeconfig(t, env, envtest.User{Name: "alice", Groups: []string{"system:masters"}})
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return scribe(t, append(args, "--kubeconfig", kubeconfig, "-n", "default")...)
	}
	workload := func() *scribev1.Workload {
		t.Helper()
		got := &scribev1.Workload{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	for _, tc := range []struct {
		args       []string
		annotation string
	}{
		{[]string{"promote", "workload", "web"}, scribev1.PromoteAnnotation},
		{[]string{"promote", "wl", "web", "--full", "--reason", "verified by hand"}, scribev1.PromoteFullAnnotation},
		{[]string{"abort", "workload", "web", "--reason", "p99\nlatency"}, scribev1.AbortAnnotation},
		{[]string{"retry", "workload", "web"}, scribev1.RetryAnnotation},
	} {
		before := workload().Annotations[tc.annotation]
		if code, out, stderr := cli(tc.args...); code != exitOK || !strings.Contains(out, "workload/web") {
			t.Fatalf("scribe %s: exit %d, stdout %q, stderr %q", strings.Join(tc.args, " "), code, out, stderr)
		}
		a := workload().Annotations
		if a[tc.annotation] == "" || a[tc.annotation] == before {
			t.Errorf("scribe %s: %s = %q, want a new request", strings.Join(tc.args, " "), tc.annotation, a[tc.annotation])
		}
		if a[scribev1.RequestedByAnnotation] != "alice" {
			t.Errorf("scribe %s: %s = %q, want the API server's name for the user", strings.Join(tc.args, " "), scribev1.RequestedByAnnotation, a[scribev1.RequestedByAnnotation])
		}
		_, withReason := map[string]bool{scribev1.PromoteFullAnnotation: true, scribev1.AbortAnnotation: true}[tc.annotation]
		if got := a[scribev1.RequestReasonAnnotation]; withReason != (got != "") {
			t.Errorf("scribe %s: reason %q (a request without --reason clears the last one's)", strings.Join(tc.args, " "), got)
		}
	}
	// A request written again is a new request: its value changes.
	first := workload().Annotations[scribev1.PromoteAnnotation]
	cli("promote", "workload", "web")
	if again := workload().Annotations[scribev1.PromoteAnnotation]; again == first {
		t.Errorf("a second scribe promote wrote the same value %q: the controller would not see it", again)
	}

	steps := []struct {
		args         []string
		paused, susp bool
		pipelineSusp bool
	}{
		{[]string{"pause", "workload", "web"}, true, false, false},
		{[]string{"suspend", "workload", "web"}, true, true, false},
		{[]string{"suspend", "pipeline", "web"}, true, true, true},
		{[]string{"resume", "workload", "web"}, false, false, true},
		{[]string{"resume", "pl", "web"}, false, false, false},
	}
	for _, s := range steps {
		if code, _, stderr := cli(s.args...); code != exitOK {
			t.Fatalf("scribe %s: exit %d: %s", strings.Join(s.args, " "), code, stderr)
		}
		got := workload()
		pl := &scribev1.Pipeline{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, pl); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Paused != s.paused || got.Spec.Suspend != s.susp || pl.Spec.Suspend != s.pipelineSusp {
			t.Errorf("after scribe %s: workload paused=%v suspend=%v, pipeline suspend=%v; want %v %v %v", strings.Join(s.args, " "),
				got.Spec.Paused, got.Spec.Suspend, pl.Spec.Suspend, s.paused, s.susp, s.pipelineSusp)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "pipeline", "web"}, "pause acts on Workloads only, not on Pipelines"},
		{[]string{"abort", "experiment", "web"}, "abort acts on Workloads only, not on Experiments"},
		{[]string{"promote", "workload", "nothing"}, `"nothing" not found`},
		{[]string{"promote", "repository", "web"}, "unknown kind"},
	} {
		if code, _, stderr := cli(tc.args...); code != exitError || !strings.Contains(stderr, tc.want) {
			t.Errorf("scribe %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr, exitError, tc.want)
		}
	}
}
