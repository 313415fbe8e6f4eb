package health

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRevisionHash(t *testing.T) {
	tests := []struct{ in, want string }{
		{"main@sha1:" + shaOurs, shaOurs},
		{"feature/x@sha1:" + shaOurs, shaOurs},
		{"sha1:" + shaOurs, shaOurs},
		{shaOurs, shaOurs},
		{strings.ToUpper(shaOurs), shaOurs},
		{"latest@sha256:" + digest, digest},
		{"v1.2.3@sha256:" + digest, digest},
		{"sha256:" + digest, digest},
		{"main/" + shaOurs, shaOurs},
		{" " + shaOurs + "\n", shaOurs},
		{"1.4.2", "1.4.2"},
		{"", ""},
		{"main@", ""},
		{"sha1:", ""},
	}
	for _, tt := range tests {
		if got := RevisionHash(tt.in); got != tt.want {
			t.Errorf("RevisionHash(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAggregate(t *testing.T) {
	healthy := func(s string) Verdict { return Verdict{State: Healthy, Reason: ReasonHealthy, Subject: s} }
	tests := []struct {
		name string
		in   []Verdict
		want Verdict
	}{
		{
			name: "nothing to check is healthy",
			want: Verdict{State: Healthy, Reason: ReasonHealthy, Message: "nothing to check"},
		},
		{
			name: "all healthy is healthy",
			in:   []Verdict{healthy("Deployment/a/web"), healthy("Service/a/web")},
			want: Verdict{State: Healthy, Reason: ReasonHealthy, Message: "all 2 healthy"},
		},
		{
			name: "any failed is failed with the first failure's message naming it",
			in: []Verdict{
				healthy("Deployment/a/web"),
				{State: Pending, Reason: ReasonProgressing, Subject: "Deployment/a/api"},
				{State: Failed, Reason: ReasonFailed, Message: "child 'm-1' failed", Subject: "Workflow/a/migrate"},
				{State: Failed, Reason: ReasonNotSynced, Message: "403", Subject: "Cluster/gke"},
			},
			want: Verdict{State: Failed, Reason: ReasonFailed,
				Message: "Workflow/a/migrate: child 'm-1' failed (1 more failed: Cluster/gke)"},
		},
		{
			name: "failures without subjects are named by position",
			in:   []Verdict{healthy(""), {State: Failed, Message: "boom"}},
			want: Verdict{State: Failed, Reason: ReasonFailed, Message: "#1: boom"},
		},
		{
			name: "otherwise pending, listing what is pending",
			in: []Verdict{
				healthy("Deployment/a/web"),
				{State: Pending, Reason: "LessAvailable", Message: "Available: 1/3", Subject: "Deployment/a/api"},
				{State: Pending, Reason: ReasonNotObserved, Subject: "Cluster/fleet/prod"},
			},
			want: Verdict{State: Pending, Reason: "LessAvailable",
				Message: "waiting for 2 of 3: Deployment/a/api (LessAvailable): Available: 1/3; Cluster/fleet/prod (NotObserved)"},
		},
		{
			name: "an unknown state counts as pending",
			in:   []Verdict{healthy("x"), {Subject: "y"}},
			want: Verdict{State: Pending, Reason: ReasonProgressing, Message: "waiting for 1 of 2: y"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkVerdict(t, Aggregate(tt.in...), tt.want)
		})
	}

	t.Run("long lists are cut", func(t *testing.T) {
		var vs []Verdict
		for range 25 {
			vs = append(vs, Verdict{State: Pending, Subject: "p"}, Verdict{State: Failed, Subject: "f"})
		}
		if got := Aggregate(vs...).Message; !strings.HasSuffix(got, "(24 more failed: f, f, f, f, f, f, f, f, f, f, and 14 more)") {
			t.Errorf("failed message = %q", got)
		}
		var pend []Verdict
		for range 12 {
			pend = append(pend, Verdict{State: Pending, Subject: "p"})
		}
		if got := Aggregate(pend...).Message; !strings.HasSuffix(got, "; and 2 more") || strings.Count(got, "p") != 10 {
			t.Errorf("pending message = %q", got)
		}
	})

	t.Run("applied revision kept only when all agree", func(t *testing.T) {
		a := Verdict{State: Healthy, AppliedRevision: "main@sha1:" + shaOurs}
		b := Verdict{State: Healthy}
		c := Verdict{State: Healthy, AppliedRevision: "main@sha1:" + shaOld}
		if got := Aggregate(a, b, a).AppliedRevision; got != a.AppliedRevision {
			t.Errorf("agreeing: %q", got)
		}
		if got := Aggregate(a, c).AppliedRevision; got != "" {
			t.Errorf("disagreeing: %q", got)
		}
	})
}

func TestVerdictString(t *testing.T) {
	v := Verdict{State: Failed, Reason: ReasonHealthCheckFailed, Message: "timeout", Subject: "Kustomization/flux-system/apps"}
	if got, want := v.String(), "Kustomization/flux-system/apps: Failed (HealthCheckFailed): timeout"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (Verdict{State: Pending}).String(); got != "Pending" {
		t.Errorf("String() = %q", got)
	}
}

// FuzzObjectAndApplication checks that arbitrary JSON never panics Object or
// ArgoApplication and always yields a complete verdict.
func FuzzObjectAndApplication(f *testing.F) {
	f.Add(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"generation":2},"status":{"observedGeneration":2,"conditions":[{"type":"Available","status":"True"}]}}`)
	f.Add(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","status":{"sync":{"revision":"` + shaOurs + `","status":"Synced"},"health":{"status":"Healthy"},"operationState":{"phase":"Failed","finishedAt":"x"}}}`)
	f.Add(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Workflow","status":{"phase":"Failed"}}`)
	f.Add(`{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","status":{"v1beta2":{"conditions":[{"type":"Available","status":"True"}]}}}`)
	f.Add(`{"apiVersion":"testworkflows.testkube.io/v1","kind":"TestWorkflowExecution","status":{"latestExecution":{"result":{"status":"failed","steps":{"a":{"errorMessage":"e"}}}}}}`)
	f.Add(`{"apiVersion":"v1","kind":"Pod","status":{"conditions":[{"type":"Synced","status":"False"}]}}`)
	f.Fuzz(func(t *testing.T, s string) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(s)); err != nil {
			return
		}
		if v := Object(u); v.State == "" || v.Reason == "" {
			t.Errorf("Object: incomplete verdict %+v", v)
		}
		v, err := ArgoApplication(context.Background(), u, shaOurs, func(context.Context, string, string) (bool, error) { return true, nil })
		if err != nil || v.State == "" || v.Reason == "" {
			t.Errorf("ArgoApplication: %+v, %v", v, err)
		}
	})
}
