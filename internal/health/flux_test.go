package health

import (
	"context"
	"errors"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	shaOurs  = "6f1c2e0b9d8a7c6b5a4f3e2d1c0b9a8f7e6d5c4b"
	shaOld   = "0123456789abcdef0123456789abcdef01234567"
	shaChild = "89abcdef0123456789abcdef0123456789abcdef"
	digest   = "c0ffee0123456789c0ffee0123456789c0ffee0123456789c0ffee0123456789"
)

// appliedKustomization is a Kustomization as kustomize-controller v1.9 writes
// it after successfully applying, pruning and health-checking shaOurs at
// generation 3 (wait: true).
const appliedKustomization = `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
  generation: 3
spec:
  interval: 10m
  path: ./clusters/prod/apps
  prune: true
  wait: true
  sourceRef:
    kind: GitRepository
    name: fleet
status:
  observedGeneration: 3
  lastAppliedRevision: main@sha1:` + shaOurs + `
  lastAttemptedRevision: main@sha1:` + shaOurs + `
  conditions:
  - type: Ready
    status: "True"
    reason: ReconciliationSucceeded
    message: "Applied revision: main@sha1:` + shaOurs + `"
    observedGeneration: 3
    lastTransitionTime: "2026-07-01T10:00:05Z"
  - type: Healthy
    status: "True"
    reason: Succeeded
    message: Health check passed in 5.012s
    observedGeneration: 3
    lastTransitionTime: "2026-07-01T10:00:05Z"
`

func kustomization(t *testing.T, mutate func(ks *kustomizev1.Kustomization)) *kustomizev1.Kustomization {
	t.Helper()
	ks := &kustomizev1.Kustomization{}
	if err := yaml.UnmarshalStrict([]byte(appliedKustomization), ks); err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(ks)
	}
	return ks
}

// setReady replaces the Ready condition and drops Healthy, as
// kustomize-controller does when a reconciliation fails or starts.
func setReady(ks *kustomizev1.Kustomization, status metav1.ConditionStatus, reason, msg string) {
	ks.Status.Conditions = []metav1.Condition{{
		Type: "Ready", Status: status, Reason: reason, Message: msg,
		ObservedGeneration: ks.Generation,
	}}
}

// ancestry is an Ancestry backed by a fixed set of descendants in which our
// paths are unchanged; it records its calls.
type ancestry struct {
	unchanged map[string]bool
	err       error
	calls     []string
}

func (a *ancestry) fn(_ context.Context, ours, applied string) (bool, error) {
	a.calls = append(a.calls, ours+".."+applied)
	if a.err != nil {
		return false, a.err
	}
	return a.unchanged[applied], nil
}

func TestFluxKustomization(t *testing.T) {
	const healthCheckMsg = "health check failed after 5m0s: timeout waiting for: [Deployment/apps/web status: 'InProgress']"
	tests := []struct {
		name       string
		mutate     func(ks *kustomizev1.Kustomization)
		commit     string
		descendant map[string]bool // nil: no Ancestry
		want       Verdict
	}{
		{
			name:   "healthy at our commit",
			commit: shaOurs,
			want: Verdict{State: Healthy, Reason: ReasonHealthy, Message: "Applied revision: main@sha1:" + shaOurs,
				AppliedRevision: "main@sha1:" + shaOurs},
		},
		{
			name:   "healthy when commit is given as sha1:<hex> in upper case",
			commit: "sha1:" + strings.ToUpper(shaOurs),
			want: Verdict{State: Healthy, Reason: ReasonHealthy, Message: "Applied revision: main@sha1:" + shaOurs,
				AppliedRevision: "main@sha1:" + shaOurs},
		},
		{
			name: "healthy with bare and sha1: revision forms",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = shaOurs
				ks.Status.LastAttemptedRevision = "sha1:" + shaOurs
			},
			commit: shaOurs,
			want:   Verdict{State: Healthy, Reason: ReasonHealthy, Message: "Applied revision: main@sha1:" + shaOurs, AppliedRevision: shaOurs},
		},
		{
			name: "healthy with the Flux v1beta2 <branch>/<sha> revision form",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main/" + shaOurs
			},
			commit: shaOurs,
			want:   Verdict{State: Healthy, Reason: ReasonHealthy, Message: "Applied revision: main@sha1:" + shaOurs, AppliedRevision: "main/" + shaOurs},
		},
		{
			name: "healthy at OCI digest",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "latest@sha256:" + digest
				ks.Status.LastAttemptedRevision = "latest@sha256:" + digest
				setReady(ks, metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision: latest@sha256:"+digest)
			},
			commit: "sha256:" + digest,
			want: Verdict{State: Healthy, Reason: ReasonHealthy, Message: "Applied revision: latest@sha256:" + digest,
				AppliedRevision: "latest@sha256:" + digest},
		},
		{
			name: "OCI artifact with another digest is pending",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "latest@sha256:" + strings.Repeat("a", 64)
			},
			commit: "sha256:" + digest,
			want:   Verdict{State: Pending, Reason: ReasonRevisionNotApplied},
		},
		{
			name: "healthy at a per-CR artifact whose origin revision is our commit",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "latest@sha256:" + digest
				ks.Status.LastAttemptedRevision = "latest@sha256:" + digest
				ks.Status.LastAppliedOriginRevision = "main@sha1:" + shaOurs
				setReady(ks, metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision: latest@sha256:"+digest)
			},
			commit: shaOurs,
			want: Verdict{State: Healthy, Reason: ReasonHealthy, Message: "Applied revision: latest@sha256:" + digest,
				AppliedRevision: "main@sha1:" + shaOurs},
		},
		{
			name: "pending at a per-CR artifact whose origin is an older commit",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "latest@sha256:" + digest
				ks.Status.LastAttemptedRevision = "latest@sha256:" + digest
				ks.Status.LastAppliedOriginRevision = "main@sha1:" + shaOld
			},
			commit:     shaOurs,
			descendant: map[string]bool{},
			want:       Verdict{State: Pending, Reason: ReasonRevisionNotApplied, AppliedRevision: "main@sha1:" + shaOld},
		},
		{
			name: "healthy at a per-CR artifact whose origin is an ancestor of our commit with our paths the same",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "latest@sha256:" + digest
				ks.Status.LastAttemptedRevision = "latest@sha256:" + digest
				ks.Status.LastAppliedOriginRevision = "main@sha1:" + shaOld
				setReady(ks, metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision: latest@sha256:"+digest)
			},
			commit:     shaOurs,
			descendant: map[string]bool{shaOurs: true},
			want: Verdict{State: Healthy, Reason: ReasonHealthy, Message: "Applied revision: latest@sha256:" + digest,
				AppliedRevision: "main@sha1:" + shaOld},
		},
		{
			name: "failed when the attempted artifact is ours by its digest and Ready=False BuildFailed",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "latest@sha256:" + strings.Repeat("a", 64)
				ks.Status.LastAppliedOriginRevision = "main@sha1:" + shaOld
				ks.Status.LastAttemptedRevision = "latest@sha256:" + digest
				setReady(ks, metav1.ConditionFalse, "BuildFailed", "kustomize build failed")
			},
			commit:     shaOurs,
			descendant: map[string]bool{digest: true},
			want:       Verdict{State: Failed, Reason: ReasonBuildFailed, Message: "kustomize build failed", AppliedRevision: "main@sha1:" + shaOld},
		},
		{
			name: "healthy at a descendant when ancestry says our path is unchanged",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaChild
				ks.Status.LastAttemptedRevision = "main@sha1:" + shaChild
			},
			commit:     shaOurs,
			descendant: map[string]bool{shaChild: true},
			want: Verdict{State: Healthy, Reason: ReasonHealthy, Message: "Applied revision: main@sha1:" + shaOurs,
				AppliedRevision: "main@sha1:" + shaChild},
		},
		{
			name: "pending at a descendant that changed our path",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaChild
				ks.Status.LastAttemptedRevision = "main@sha1:" + shaChild
			},
			commit:     shaOurs,
			descendant: map[string]bool{},
			want:       Verdict{State: Pending, Reason: ReasonRevisionNotApplied},
		},
		{
			name: "pending at a descendant without an Ancestry",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaChild
			},
			commit: shaOurs,
			want:   Verdict{State: Pending, Reason: ReasonRevisionNotApplied},
		},
		{
			name: "pending when lastAppliedRevision is older",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				ks.Status.LastAttemptedRevision = "main@sha1:" + shaOld
				setReady(ks, metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision: main@sha1:"+shaOld)
			},
			commit:     shaOurs,
			descendant: map[string]bool{},
			want:       Verdict{State: Pending, Reason: ReasonRevisionNotApplied},
		},
		{
			name: "pending when observedGeneration lags",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Generation = 4
			},
			commit: shaOurs,
			want:   Verdict{State: Pending, Reason: ReasonNotObserved},
		},
		{
			name: "pending while reconciling our revision",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				ks.Status.Conditions = []metav1.Condition{
					{Type: "Ready", Status: metav1.ConditionUnknown, Reason: "Progressing", Message: "Reconciliation in progress", ObservedGeneration: 3},
					{Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "Progressing",
						Message: "Running health checks for revision main@sha1:" + shaOurs + " with a timeout of 5m0s", ObservedGeneration: 3},
				}
			},
			commit: shaOurs,
			want:   Verdict{State: Pending, Reason: "Progressing"},
		},
		{
			name: "failed with Flux's message when lastAttemptedRevision is ours and Ready=False HealthCheckFailed",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				setReady(ks, metav1.ConditionFalse, "HealthCheckFailed", healthCheckMsg)
			},
			commit: shaOurs,
			want:   Verdict{State: Failed, Reason: ReasonHealthCheckFailed, Message: healthCheckMsg},
		},
		{
			name: "failed ApplyFailed when Ready=False ReconciliationFailed at our revision",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				setReady(ks, metav1.ConditionFalse, "ReconciliationFailed",
					`Deployment/apps/web dry-run failed: Deployment.apps "web" is invalid: spec.template.spec.containers[0].image: Required value`)
			},
			commit: shaOurs,
			want: Verdict{State: Failed, Reason: ReasonApplyFailed,
				Message: `Deployment/apps/web dry-run failed: Deployment.apps "web" is invalid: spec.template.spec.containers[0].image: Required value`},
		},
		{
			name: "failed BuildFailed at our revision",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				setReady(ks, metav1.ConditionFalse, "BuildFailed", "kustomization path not found: stat /tmp/kustomization-1/clusters/prod/apps: no such file or directory")
			},
			commit: shaOurs,
			want:   Verdict{State: Failed, Reason: ReasonBuildFailed, Message: "kustomization path not found: stat /tmp/kustomization-1/clusters/prod/apps: no such file or directory"},
		},
		{
			name: "failed at a descendant per ancestry",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				ks.Status.LastAttemptedRevision = "main@sha1:" + shaChild
				setReady(ks, metav1.ConditionFalse, "HealthCheckFailed", healthCheckMsg)
			},
			commit:     shaOurs,
			descendant: map[string]bool{shaChild: true},
			want:       Verdict{State: Failed, Reason: ReasonHealthCheckFailed, Message: healthCheckMsg},
		},
		{
			name: "failed when the same revision later fails its health check",
			mutate: func(ks *kustomizev1.Kustomization) {
				setReady(ks, metav1.ConditionFalse, "HealthCheckFailed", healthCheckMsg)
			},
			commit: shaOurs,
			want:   Verdict{State: Failed, Reason: ReasonHealthCheckFailed, Message: healthCheckMsg},
		},
		{
			name: "not failed when the failure is on an older revision",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				ks.Status.LastAttemptedRevision = "main@sha1:" + shaOld
				setReady(ks, metav1.ConditionFalse, "HealthCheckFailed", healthCheckMsg)
			},
			commit:     shaOurs,
			descendant: map[string]bool{},
			want:       Verdict{State: Pending, Reason: ReasonRevisionNotApplied},
		},
		{
			name: "not failed but pending when ours was applied and a later commit that changed our path fails",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAttemptedRevision = "main@sha1:" + shaChild
				setReady(ks, metav1.ConditionFalse, "HealthCheckFailed", healthCheckMsg)
			},
			commit:     shaOurs,
			descendant: map[string]bool{},
			want:       Verdict{State: Pending, Reason: ReasonNotReady, AppliedRevision: "main@sha1:" + shaOurs},
		},
		{
			name: "not failed when the Ready=False condition is from an older generation",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Generation = 4
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				ks.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse,
					Reason: "HealthCheckFailed", Message: healthCheckMsg, ObservedGeneration: 3}}
			},
			commit: shaOurs,
			want:   Verdict{State: Pending, Reason: ReasonNotObserved},
		},
		{
			name: "pending on a transient DependencyNotReady at our revision",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				setReady(ks, metav1.ConditionFalse, "DependencyNotReady", "dependency 'flux-system/infra' is not ready")
			},
			commit: shaOurs,
			want:   Verdict{State: Pending, Reason: "DependencyNotReady", Message: "dependency 'flux-system/infra' is not ready"},
		},
		{
			name: "pending on a transient ArtifactFailed",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				setReady(ks, metav1.ConditionFalse, "ArtifactFailed", "Source artifact not found, retrying in 30s")
			},
			commit: shaOurs,
			want:   Verdict{State: Pending, Reason: "ArtifactFailed", Message: "Source artifact not found, retrying in 30s"},
		},
		{
			name: "failed when Stalled=True",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				ks.Status.Conditions = []metav1.Condition{
					{Type: "Ready", Status: metav1.ConditionFalse, Reason: "InvalidCELExpression", Message: "Reconciliation failed terminally due to configuration error: bad expr", ObservedGeneration: 3},
					{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "InvalidCELExpression", Message: "Reconciliation failed terminally due to configuration error: bad expr", ObservedGeneration: 3},
				}
			},
			commit: shaOurs,
			want:   Verdict{State: Failed, Reason: ReasonStalled, Message: "Reconciliation failed terminally due to configuration error: bad expr"},
		},
		{
			name: "pending when suspended before applying our commit",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Spec.Suspend = true
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				ks.Status.LastAttemptedRevision = "main@sha1:" + shaOld
			},
			commit: shaOurs,
			want:   Verdict{State: Pending, Reason: ReasonSuspended},
		},
		{
			name: "pending without any status",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status = kustomizev1.KustomizationStatus{}
			},
			commit: shaOurs,
			want:   Verdict{State: Pending, Reason: ReasonNotObserved},
		},
		{
			name: "pending while the Kustomization is being deleted",
			mutate: func(ks *kustomizev1.Kustomization) {
				now := metav1.Now()
				ks.DeletionTimestamp = &now
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
			},
			commit: shaOurs,
			want:   Verdict{State: Pending, Reason: ReasonTerminating},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks := kustomization(t, tt.mutate)
			var anc Ancestry
			if tt.descendant != nil {
				anc = (&ancestry{unchanged: tt.descendant}).fn
			}
			got, err := FluxKustomization(context.Background(), ks, tt.commit, anc)
			if err != nil {
				t.Fatal(err)
			}
			checkVerdict(t, got, tt.want)
			if got.Subject != "Kustomization/flux-system/apps" {
				t.Errorf("Subject = %q", got.Subject)
			}
		})
	}
}

// checkVerdict compares State and Reason, and Message and AppliedRevision
// where want sets them.
func checkVerdict(t *testing.T, got, want Verdict) {
	t.Helper()
	if got.State != want.State || got.Reason != want.Reason {
		t.Errorf("got %s/%s (%q), want %s/%s", got.State, got.Reason, got.Message, want.State, want.Reason)
	}
	if want.Message != "" && got.Message != want.Message {
		t.Errorf("Message = %q, want %q", got.Message, want.Message)
	}
	if want.AppliedRevision != "" && got.AppliedRevision != want.AppliedRevision {
		t.Errorf("AppliedRevision = %q, want %q", got.AppliedRevision, want.AppliedRevision)
	}
}

func TestFluxKustomizationAncestryCalls(t *testing.T) {
	t.Run("not asked when the revision is ours", func(t *testing.T) {
		a := &ancestry{}
		if _, err := FluxKustomization(context.Background(), kustomization(t, nil), shaOurs, a.fn); err != nil {
			t.Fatal(err)
		}
		if len(a.calls) != 0 {
			t.Errorf("calls = %v", a.calls)
		}
	})
	t.Run("asked once per revision with bare hashes", func(t *testing.T) {
		a := &ancestry{unchanged: map[string]bool{}}
		ks := kustomization(t, func(ks *kustomizev1.Kustomization) {
			ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
			ks.Status.LastAttemptedRevision = "main@sha1:" + shaOld
			setReady(ks, metav1.ConditionFalse, "HealthCheckFailed", "x")
		})
		got, err := FluxKustomization(context.Background(), ks, "main@sha1:"+shaOurs, a.fn)
		if err != nil {
			t.Fatal(err)
		}
		checkVerdict(t, got, Verdict{State: Pending, Reason: ReasonRevisionNotApplied})
		if want := []string{shaOurs + ".." + shaOld}; strings.Join(a.calls, " ") != strings.Join(want, " ") {
			t.Errorf("calls = %v, want %v", a.calls, want)
		}
	})
	t.Run("its error is returned with a Pending verdict", func(t *testing.T) {
		boom := errors.New("object not found")
		a := &ancestry{err: boom}
		ks := kustomization(t, func(ks *kustomizev1.Kustomization) { ks.Status.LastAppliedRevision = shaChild })
		got, err := FluxKustomization(context.Background(), ks, shaOurs, a.fn)
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		if got.State != Pending {
			t.Errorf("State = %s", got.State)
		}
	})
}

func TestFluxKustomizationBadInput(t *testing.T) {
	got, err := FluxKustomization(context.Background(), nil, shaOurs, nil)
	if err != nil || got.State != Pending || got.Reason != ReasonNotFound {
		t.Errorf("nil Kustomization: %v, %v", got, err)
	}
	for _, commit := range []string{"", "  ", "main@sha1:", "sha256:"} {
		got, err := FluxKustomization(context.Background(), kustomization(t, nil), commit, nil)
		if err == nil || got.State != Pending {
			t.Errorf("commit %q: %v, %v; want an error and Pending", commit, got, err)
		}
	}
	got, err = FluxPruned(context.Background(), nil, shaOurs, nil)
	if err != nil || got.State != Pending || got.Reason != ReasonNotFound {
		t.Errorf("FluxPruned(nil): %v, %v", got, err)
	}
}

func TestFluxPruned(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(ks *kustomizev1.Kustomization)
		descendant map[string]bool
		want       Verdict
	}{
		{
			name: "pruned once the deletion commit is applied",
			want: Verdict{State: Healthy, Reason: ReasonPruned},
		},
		{
			name: "pruned even if a later health check of that revision fails",
			mutate: func(ks *kustomizev1.Kustomization) {
				setReady(ks, metav1.ConditionFalse, "HealthCheckFailed", "timeout")
			},
			want: Verdict{State: Healthy, Reason: ReasonPruned},
		},
		{
			name: "pruned at a later revision with our paths unchanged",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaChild
			},
			descendant: map[string]bool{shaChild: true},
			want:       Verdict{State: Healthy, Reason: ReasonPruned},
		},
		{
			name: "pending while an older revision is applied",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				ks.Status.LastAttemptedRevision = "main@sha1:" + shaOld
			},
			descendant: map[string]bool{},
			want:       Verdict{State: Pending, Reason: ReasonRevisionNotApplied},
		},
		{
			name: "failed when pruning our revision failed",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Status.LastAppliedRevision = "main@sha1:" + shaOld
				setReady(ks, metav1.ConditionFalse, "PruneFailed", `failed to delete ConfigMap/apps/old: configmaps "old" is forbidden`)
			},
			want: Verdict{State: Failed, Reason: ReasonPruneFailed, Message: `failed to delete ConfigMap/apps/old: configmaps "old" is forbidden`},
		},
		{
			name: "failed when the Kustomization does not prune",
			mutate: func(ks *kustomizev1.Kustomization) {
				ks.Spec.Prune = false
			},
			want: Verdict{State: Failed, Reason: ReasonPruneDisabled},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var anc Ancestry
			if tt.descendant != nil {
				anc = (&ancestry{unchanged: tt.descendant}).fn
			}
			got, err := FluxPruned(context.Background(), kustomization(t, tt.mutate), shaOurs, anc)
			if err != nil {
				t.Fatal(err)
			}
			checkVerdict(t, got, tt.want)
		})
	}
}
