package controller

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// TestRunHandsTheSavedStatusToSaved: the metrics hook of every reconciler
// receives the object once its status is written, nil once it is gone,
// and nothing from a reconcile that wrote nothing (a stale read).
func TestRunHandsTheSavedStatusToSaved(t *testing.T) {
	stale := &reasonError{reason: ReasonStaleStatus, err: errors.New("status older than the last write")}
	for _, tc := range []struct {
		name     string
		exists   bool
		passErr  error
		wantCall bool
		wantNil  bool
	}{
		{"a reconciled object, after its status was patched", true, nil, true, false},
		{"a reconciled object whose pass failed, with the failure saved", true, errors.New("render failed"), true, false},
		{"a missing object, as gone", false, nil, true, true},
		{"a reconcile that read a stale status: nothing", true, stale, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.exists {
				objs = append(objs, &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: webKey().Namespace, Name: webKey().Name}})
			}
			c := shapeClient(t, objs...)
			calls := 0
			var got client.Object
			_, _ = lifecycle[*scribev1.Workload]{
				kind: scribev1.WorkloadKind,
				reconcile: func(_ context.Context, w *scribev1.Workload, _ *statusPatcher) (ctrl.Result, error) {
					w.Status.Phase = scribev1.WorkloadProgressing
					return ctrl.Result{}, tc.passErr
				},
				saved: func(kind string, key types.NamespacedName, obj client.Object) {
					calls++
					got = obj
					if kind != scribev1.WorkloadKind || key != webKey() {
						t.Errorf("saved(%s, %s)", kind, key)
					}
				},
			}.run(context.Background(), c, ctrl.Request{NamespacedName: webKey()}, &scribev1.Workload{})
			if (calls == 1) != tc.wantCall || calls > 1 {
				t.Fatalf("saved called %d times", calls)
			}
			if !tc.wantCall {
				return
			}
			if tc.wantNil != (got == nil) {
				t.Fatalf("saved got %v", got)
			}
			if tc.wantNil {
				return
			}
			stored := &scribev1.Workload{}
			if err := c.Get(context.Background(), webKey(), stored); err != nil {
				t.Fatal(err)
			}
			if w := got.(*scribev1.Workload); w.Status.Phase != stored.Status.Phase || w.ResourceVersion != stored.ResourceVersion {
				t.Errorf("saved got phase %q at %s; the API server holds %q at %s", w.Status.Phase, w.ResourceVersion, stored.Status.Phase, stored.ResourceVersion)
			}
		})
	}
}
