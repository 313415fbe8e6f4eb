package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func shapeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&scribev1.Workload{}, &scribev1.Experiment{}, &scribev1.Repository{}).Build()
}

// webKey names the object of the shape tests.
func webKey() types.NamespacedName { return types.NamespacedName{Namespace: "team", Name: "web"} }

func TestRunStoresTheFinalizerBeforeThePassAndPatchesStatusAfterIt(t *testing.T) {
	c := shapeClient(t, &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: webKey().Namespace, Name: webKey().Name}})
	passErr := errors.New("the pass failed")
	var finalizerStored bool
	res, err := lifecycle[*scribev1.Workload]{
		kind: scribev1.WorkloadKind,
		finalize: func(context.Context, *scribev1.Workload) (ctrl.Result, error) {
			t.Fatal("finalize on a live object")
			return ctrl.Result{}, nil
		},
		reconcile: func(ctx context.Context, w *scribev1.Workload, _ *statusPatcher) (ctrl.Result, error) {
			stored := &scribev1.Workload{}
			if err := c.Get(ctx, webKey(), stored); err != nil {
				t.Fatal(err)
			}
			finalizerStored = controllerutil.ContainsFinalizer(stored, Finalizer)
			return fail(w, passErr)
		},
	}.run(context.Background(), c, ctrl.Request{NamespacedName: webKey()}, &scribev1.Workload{})
	if !finalizerStored {
		t.Fatal("the pass ran before the finalizer was stored")
	}
	if !errors.Is(err, passErr) || res.RequeueAfter != 0 {
		t.Fatalf("run = %+v, %v; want the pass's error", res, err)
	}
	stored := &scribev1.Workload{}
	if err := c.Get(context.Background(), webKey(), stored); err != nil {
		t.Fatal(err)
	}
	if !conditions.IsFalse(stored, scribev1.ReadyCondition) {
		t.Fatalf("status not patched after a failed pass: %+v", stored.Status.Conditions)
	}
}

func TestRunFinalizesAnObjectBeingDeletedAndToleratesItsDisappearance(t *testing.T) {
	now := metav1.NewTime(time.Now())
	c := shapeClient(t, &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Namespace: webKey().Namespace, Name: webKey().Name,
		Finalizers: []string{Finalizer}, DeletionTimestamp: &now}})
	finalized := false
	_, err := lifecycle[*scribev1.Experiment]{
		kind: scribev1.ExperimentKind,
		finalize: func(_ context.Context, e *scribev1.Experiment) (ctrl.Result, error) {
			finalized = true
			controllerutil.RemoveFinalizer(e, Finalizer)
			return ctrl.Result{}, nil
		},
		reconcile: func(context.Context, *scribev1.Experiment, *statusPatcher) (ctrl.Result, error) {
			t.Fatal("reconcile on an object being deleted")
			return ctrl.Result{}, nil
		},
	}.run(context.Background(), c, ctrl.Request{NamespacedName: webKey()}, &scribev1.Experiment{})
	if err != nil || !finalized {
		t.Fatalf("run = %v, finalized %v", err, finalized)
	}
	if err := c.Get(context.Background(), webKey(), &scribev1.Experiment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the object outlived its finalizer: %v", err)
	}
}

func TestRunOfAMissingObjectDoesNothing(t *testing.T) {
	res, err := lifecycle[*scribev1.Repository]{
		kind: scribev1.RepositoryKind,
		reconcile: func(context.Context, *scribev1.Repository, *statusPatcher) (ctrl.Result, error) {
			t.Fatal("reconcile of a missing object")
			return ctrl.Result{}, nil
		},
	}.run(context.Background(), shapeClient(t), ctrl.Request{NamespacedName: webKey()}, &scribev1.Repository{})
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("run = %+v, %v", res, err)
	}
}

func TestRunRecordsTheReconcileRequestItHandled(t *testing.T) {
	const token = "2025-01-02T03:04:05Z"
	c := shapeClient(t, &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: webKey().Namespace, Name: webKey().Name,
		Annotations: map[string]string{RequestedAtAnnotation: token}}})
	_, err := lifecycle[*scribev1.Workload]{
		kind:     scribev1.WorkloadKind,
		finalize: func(context.Context, *scribev1.Workload) (ctrl.Result, error) { return ctrl.Result{}, nil },
		reconcile: func(context.Context, *scribev1.Workload, *statusPatcher) (ctrl.Result, error) {
			return ctrl.Result{}, nil
		},
	}.run(context.Background(), c, ctrl.Request{NamespacedName: webKey()}, &scribev1.Workload{})
	if err != nil {
		t.Fatal(err)
	}
	w := &scribev1.Workload{}
	if err := c.Get(context.Background(), webKey(), w); err != nil {
		t.Fatal(err)
	}
	if w.Status.LastHandledReconcileAt != token {
		t.Fatalf("lastHandledReconcileAt = %q, want %q", w.Status.LastHandledReconcileAt, token)
	}
}

func TestDeletingPassesOnlyTheStartOfADeletion(t *testing.T) {
	now := metav1.Now()
	live := &scribev1.Workload{}
	doomed := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	for _, tc := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"a deletion starts", live, doomed, true},
		{"an update of a live object", live, live, false},
		{"an update of an object already being deleted", doomed, doomed, false},
	} {
		if got := deleting().Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
