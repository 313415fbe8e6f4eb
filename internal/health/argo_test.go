package health

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// syncedApplication is an Application as the Argo CD v3 application
// controller writes it after an automated sync of shaOurs finished at
// 10:00:07 and the following refresh at 10:00:09 found it Synced and Healthy.
const syncedApplication = `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web
  namespace: argocd
  generation: 42
spec:
  project: default
  source:
    repoURL: https://git.example.com/fleet.git
    path: clusters/prod/web
    targetRevision: main
  destination:
    server: https://kubernetes.default.svc
    namespace: web
  syncPolicy:
    automated:
      prune: true
status:
  reconciledAt: "2026-07-01T10:00:09Z"
  sourceType: Directory
  sync:
    status: Synced
    revision: ` + shaOurs + `
    comparedTo:
      source:
        repoURL: https://git.example.com/fleet.git
        path: clusters/prod/web
        targetRevision: main
      destination:
        server: https://kubernetes.default.svc
        namespace: web
  health:
    status: Healthy
    lastTransitionTime: "2026-07-01T10:00:09Z"
  resources:
  - group: apps
    version: v1
    kind: Deployment
    namespace: web
    name: web
    status: Synced
    health:
      status: Healthy
  operationState:
    phase: Succeeded
    message: successfully synced (all tasks run)
    startedAt: "2026-07-01T10:00:05Z"
    finishedAt: "2026-07-01T10:00:07Z"
    operation:
      initiatedBy:
        automated: true
      retry:
        limit: 5
      sync:
        revision: ` + shaOurs + `
        prune: true
    syncResult:
      revision: ` + shaOurs + `
      source:
        repoURL: https://git.example.com/fleet.git
        path: clusters/prod/web
        targetRevision: main
      resources:
      - group: apps
        version: v1
        kind: Deployment
        namespace: web
        name: web
        status: Synced
        message: deployment.apps/web configured
        hookPhase: Running
        syncPhase: Sync
  history:
  - id: 7
    revision: ` + shaOurs + `
    deployStartedAt: "2026-07-01T10:00:05Z"
    deployedAt: "2026-07-01T10:00:07Z"
    initiatedBy:
      automated: true
`

func application(t *testing.T, mutate func(o map[string]any)) *unstructured.Unstructured {
	t.Helper()
	u := fromYAML(t, syncedApplication)
	if mutate != nil {
		mutate(u.Object)
	}
	return u
}

func set(o map[string]any, value any, path ...string) {
	if err := unstructured.SetNestedField(o, value, path...); err != nil {
		panic(err)
	}
}

func TestArgoApplication(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(o map[string]any)
		descendant map[string]bool
		want       Verdict
	}{
		{
			name: "healthy when synced at our commit with fresh health",
			want: Verdict{State: Healthy, Reason: ReasonHealthy, AppliedRevision: shaOurs},
		},
		{
			name: "healthy when reconciledAt equals finishedAt",
			mutate: func(o map[string]any) {
				set(o, "2026-07-01T10:00:07Z", "status", "reconciledAt")
			},
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "stale health (reconciledAt before finishedAt) is not healthy",
			mutate: func(o map[string]any) {
				set(o, "2026-07-01T10:00:04Z", "status", "reconciledAt")
			},
			want: Verdict{State: Pending, Reason: ReasonStaleHealth},
		},
		{
			name: "missing reconciledAt after a sync is stale",
			mutate: func(o map[string]any) {
				unstructured.RemoveNestedField(o, "status", "reconciledAt")
			},
			want: Verdict{State: Pending, Reason: ReasonStaleHealth},
		},
		{
			name: "healthy without any operation when never synced by Argo",
			mutate: func(o map[string]any) {
				unstructured.RemoveNestedField(o, "status", "operationState")
			},
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "pending while an operation is requested",
			mutate: func(o map[string]any) {
				set(o, map[string]any{"sync": map[string]any{"revision": shaOurs}, "initiatedBy": map[string]any{"automated": true}}, "operation")
			},
			want: Verdict{State: Pending, Reason: ReasonOperationInProgress},
		},
		{
			name: "pending while the operation is running",
			mutate: func(o map[string]any) {
				set(o, "Running", "status", "operationState", "phase")
				set(o, "waiting for healthy state of apps/Deployment/web", "status", "operationState", "message")
				unstructured.RemoveNestedField(o, "status", "operationState", "finishedAt")
			},
			want: Verdict{State: Pending, Reason: ReasonOperationInProgress,
				Message: "operation running: waiting for healthy state of apps/Deployment/web"},
		},
		{
			name: "failed on ComparisonError with Argo's message",
			mutate: func(o map[string]any) {
				set(o, []any{map[string]any{
					"type":               "ComparisonError",
					"message":            "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown desc = kustomize build failed",
					"lastTransitionTime": "2026-07-01T10:00:09Z",
				}}, "status", "conditions")
				set(o, "Unknown", "status", "sync", "status")
			},
			want: Verdict{State: Failed, Reason: ReasonComparisonError,
				Message: "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown desc = kustomize build failed"},
		},
		{
			name: "failed on ComparisonError when the revision could not be resolved",
			mutate: func(o map[string]any) {
				set(o, []any{map[string]any{"type": "ComparisonError", "message": "unable to resolve 'main' to a commit SHA"}}, "status", "conditions")
				unstructured.RemoveNestedField(o, "status", "sync", "revision")
			},
			want: Verdict{State: Failed, Reason: ReasonComparisonError, Message: "unable to resolve 'main' to a commit SHA"},
		},
		{
			name: "ComparisonError on an older revision is not our failure",
			mutate: func(o map[string]any) {
				set(o, []any{map[string]any{"type": "ComparisonError", "message": "boom"}}, "status", "conditions")
				set(o, shaOld, "status", "sync", "revision")
			},
			descendant: map[string]bool{},
			want:       Verdict{State: Pending, Reason: ReasonRevisionNotApplied},
		},
		{
			name: "failed on InvalidSpecError",
			mutate: func(o map[string]any) {
				set(o, []any{
					map[string]any{"type": "OrphanedResourceWarning", "message": "Application has 1 orphaned resources"},
					map[string]any{"type": "InvalidSpecError", "message": "application destination server 'https://x' and namespace 'web' do not match any of the allowed destinations in project 'default'"},
				}, "status", "conditions")
			},
			want: Verdict{State: Failed, Reason: ReasonInvalidSpecError,
				Message: "application destination server 'https://x' and namespace 'web' do not match any of the allowed destinations in project 'default'"},
		},
		{
			name: "pending while the destination cluster is not registered",
			mutate: func(o map[string]any) {
				set(o, []any{
					map[string]any{"type": "InvalidSpecError", "message": "application destination spec for lab-sandbox-app is invalid: there are no clusters with this name: lab-sandbox"},
				}, "status", "conditions")
			},
			want: Verdict{State: Pending, Reason: ReasonDestinationNotRegistered,
				Message: "application destination spec for lab-sandbox-app is invalid: there are no clusters with this name: lab-sandbox"},
		},
		{
			name: "warning conditions do not fail",
			mutate: func(o map[string]any) {
				set(o, []any{map[string]any{"type": "OrphanedResourceWarning", "message": "Application has 1 orphaned resources"}}, "status", "conditions")
			},
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "failed when the sync of our revision failed",
			mutate: func(o map[string]any) {
				set(o, "Failed", "status", "operationState", "phase")
				set(o, "one or more objects failed to apply, reason: Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1", "status", "operationState", "message")
				set(o, "OutOfSync", "status", "sync", "status")
			},
			want: Verdict{State: Failed, Reason: ReasonSyncFailed,
				Message: "one or more objects failed to apply, reason: Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1"},
		},
		{
			name: "failed when the sync errored before producing a result",
			mutate: func(o map[string]any) {
				set(o, "Error", "status", "operationState", "phase")
				set(o, "ComparisonError: rpc error", "status", "operationState", "message")
				unstructured.RemoveNestedField(o, "status", "operationState", "syncResult")
			},
			want: Verdict{State: Failed, Reason: ReasonSyncFailed, Message: "ComparisonError: rpc error"},
		},
		{
			name: "a failed sync of an older revision is not our failure",
			mutate: func(o map[string]any) {
				set(o, "Failed", "status", "operationState", "phase")
				set(o, shaOld, "status", "operationState", "syncResult", "revision")
				set(o, "OutOfSync", "status", "sync", "status")
			},
			descendant: map[string]bool{},
			want:       Verdict{State: Pending, Reason: ReasonOutOfSync},
		},
		{
			name: "pending on revision mismatch",
			mutate: func(o map[string]any) {
				set(o, shaOld, "status", "sync", "revision")
			},
			descendant: map[string]bool{},
			want:       Verdict{State: Pending, Reason: ReasonRevisionNotApplied, AppliedRevision: shaOld},
		},
		{
			name: "healthy at a descendant when ancestry says our path is unchanged",
			mutate: func(o map[string]any) {
				set(o, shaChild, "status", "sync", "revision")
			},
			descendant: map[string]bool{shaChild: true},
			want:       Verdict{State: Healthy, Reason: ReasonHealthy, AppliedRevision: shaChild},
		},
		{
			name: "pending when our revision is compared but not yet synced",
			mutate: func(o map[string]any) {
				set(o, "OutOfSync", "status", "sync", "status")
			},
			want: Verdict{State: Pending, Reason: ReasonOutOfSync},
		},
		{
			name: "multi-source: healthy when sync.revisions contains our commit",
			mutate: func(o map[string]any) {
				unstructured.RemoveNestedField(o, "status", "sync", "revision")
				set(o, []any{"1.4.2", shaOurs}, "status", "sync", "revisions")
			},
			want: Verdict{State: Healthy, Reason: ReasonHealthy, AppliedRevision: shaOurs},
		},
		{
			name: "multi-source: pending when no source is at our commit",
			mutate: func(o map[string]any) {
				unstructured.RemoveNestedField(o, "status", "sync", "revision")
				set(o, []any{"1.4.2", shaOld}, "status", "sync", "revisions")
			},
			want: Verdict{State: Pending, Reason: ReasonRevisionNotApplied, AppliedRevision: "1.4.2," + shaOld},
		},
		{
			name: "multi-source: failed sync at our commit",
			mutate: func(o map[string]any) {
				unstructured.RemoveNestedField(o, "status", "sync", "revision")
				set(o, []any{"1.4.2", shaOurs}, "status", "sync", "revisions")
				set(o, "Failed", "status", "operationState", "phase")
				set(o, "hook failed", "status", "operationState", "message")
				unstructured.RemoveNestedField(o, "status", "operationState", "syncResult", "revision")
				set(o, []any{"1.4.2", shaOurs}, "status", "operationState", "syncResult", "revisions")
			},
			want: Verdict{State: Failed, Reason: ReasonSyncFailed, Message: "hook failed"},
		},
		{
			name: "degraded fails with health.message",
			mutate: func(o map[string]any) {
				set(o, "Degraded", "status", "health", "status")
				set(o, "Deployment \"web\" exceeded its progress deadline", "status", "health", "message")
			},
			want: Verdict{State: Failed, Reason: ReasonDegraded, Message: "Deployment \"web\" exceeded its progress deadline"},
		},
		{
			name: "degraded without an Application message names the degraded resource",
			mutate: func(o map[string]any) {
				set(o, "Degraded", "status", "health", "status")
				set(o, []any{map[string]any{
					"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "web", "name": "web", "status": "Synced",
					"health": map[string]any{"status": "Degraded", "message": "Deployment \"web\" exceeded its progress deadline"},
				}}, "status", "resources")
			},
			want: Verdict{State: Failed, Reason: ReasonDegraded, Message: "Deployment/web/web: Deployment \"web\" exceeded its progress deadline"},
		},
		{
			name:   "progressing is pending",
			mutate: func(o map[string]any) { set(o, "Progressing", "status", "health", "status") },
			want:   Verdict{State: Pending, Reason: "Progressing"},
		},
		{
			name:   "missing is pending",
			mutate: func(o map[string]any) { set(o, "Missing", "status", "health", "status") },
			want:   Verdict{State: Pending, Reason: "Missing"},
		},
		{
			name:   "suspended is pending",
			mutate: func(o map[string]any) { set(o, "Suspended", "status", "health", "status") },
			want:   Verdict{State: Pending, Reason: "Suspended"},
		},
		{
			name:   "unknown health is pending",
			mutate: func(o map[string]any) { set(o, "Unknown", "status", "health", "status") },
			want:   Verdict{State: Pending, Reason: "Unknown"},
		},
		{
			name:   "no status is pending",
			mutate: func(o map[string]any) { delete(o, "status") },
			want:   Verdict{State: Pending, Reason: ReasonRevisionNotApplied},
		},
		{
			name: "wrongly typed status fields do not panic",
			mutate: func(o map[string]any) {
				o["status"] = map[string]any{
					"sync":           "Synced",
					"health":         []any{1},
					"operationState": 3,
					"conditions":     map[string]any{"type": "ComparisonError"},
					"reconciledAt":   7,
				}
			},
			want: Verdict{State: Pending, Reason: ReasonRevisionNotApplied},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var anc Ancestry
			if tt.descendant != nil {
				anc = (&ancestry{unchanged: tt.descendant}).fn
			}
			got, err := ArgoApplication(context.Background(), application(t, tt.mutate), shaOurs, anc)
			if err != nil {
				t.Fatal(err)
			}
			checkVerdict(t, got, tt.want)
			if got.Subject != "Application/argocd/web" {
				t.Errorf("Subject = %q", got.Subject)
			}
		})
	}
}

func TestArgoApplicationBadInput(t *testing.T) {
	ctx := context.Background()
	for _, app := range []*unstructured.Unstructured{nil, {}} {
		got, err := ArgoApplication(ctx, app, shaOurs, nil)
		if err != nil || got.State != Pending || got.Reason != ReasonNotFound {
			t.Errorf("ArgoApplication(%v) = %v, %v", app, got, err)
		}
	}
	if _, err := ArgoApplication(ctx, application(t, nil), "", nil); err == nil {
		t.Error("empty commit: no error")
	}
	boom := errors.New("boom")
	app := application(t, func(o map[string]any) { set(o, shaChild, "status", "sync", "revision") })
	got, err := ArgoApplication(ctx, app, shaOurs, (&ancestry{err: boom}).fn)
	if !errors.Is(err, boom) || got.State != Pending {
		t.Errorf("ancestry error: %v, %v", got, err)
	}
}
