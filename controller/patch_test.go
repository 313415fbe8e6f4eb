package controller

import (
	"context"
	"fmt"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// countingClient counts the patches sent to the object and to its status.
type countingClient struct {
	client.WithWatch
	patches, statusPatches int
	// beforeStatusPatch runs before each status patch is sent.
	beforeStatusPatch func()
}

func newCountingClient(t *testing.T, objs ...client.Object) (*countingClient, client.Client) {
	t.Helper()
	cc := &countingClient{WithWatch: shapeClient(t, objs...).(client.WithWatch)}
	return cc, interceptor.NewClient(cc.WithWatch, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			cc.patches++
			return c.Patch(ctx, obj, p, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			cc.statusPatches++
			if cc.beforeStatusPatch != nil {
				f := cc.beforeStatusPatch
				cc.beforeStatusPatch = nil
				f()
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
}

func TestStatusPatcherWritesConditionsAndStatusInOneRequest(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		change                  func(w *scribev1.Workload)
		wantPatches, wantStatus int
	}{
		{"nothing changed", func(*scribev1.Workload) {}, 0, 0},
		{"the finalizer", func(w *scribev1.Workload) { controllerutil.AddFinalizer(w, Finalizer) }, 1, 0},
		{"conditions and other status fields", func(w *scribev1.Workload) {
			conditions.MarkTrue(w, scribev1.ReadyCondition, "Applied", "applied abc")
			w.Status.Revision = "abc"
			w.Status.Phase = scribev1.WorkloadPending
		}, 0, 1},
		{"the finalizer and the status", func(w *scribev1.Workload) {
			controllerutil.AddFinalizer(w, Finalizer)
			conditions.MarkReconciling(w, "Progressing", "step 1")
			w.Status.Step = 1
		}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, c := newCountingClient(t, &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: webKey().Namespace, Name: webKey().Name}})
			w := &scribev1.Workload{}
			if err := c.Get(context.Background(), webKey(), w); err != nil {
				t.Fatal(err)
			}
			p := newStatusPatcher(w, c)
			tc.change(w)
			want := w.DeepCopy()
			if err := p.Patch(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			if cc.patches != tc.wantPatches || cc.statusPatches != tc.wantStatus {
				t.Errorf("sent %d object and %d status patches, want %d and %d", cc.patches, cc.statusPatches, tc.wantPatches, tc.wantStatus)
			}
			stored := &scribev1.Workload{}
			if err := c.Get(context.Background(), webKey(), stored); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(stored.Finalizers, stored.Status.Revision, stored.Status.Step, stored.Status.Phase) != fmt.Sprint(want.Finalizers, want.Status.Revision, want.Status.Step, want.Status.Phase) {
				t.Errorf("stored %v %q %d %q, want %v %q %d %q", stored.Finalizers, stored.Status.Revision, stored.Status.Step, stored.Status.Phase,
					want.Finalizers, want.Status.Revision, want.Status.Step, want.Status.Phase)
			}
			if len(stored.Status.Conditions) != len(want.Status.Conditions) {
				t.Errorf("stored conditions %v, want %v", stored.Status.Conditions, want.Status.Conditions)
			}
			if stored.ResourceVersion != w.ResourceVersion {
				t.Errorf("the object's resourceVersion %s is not the stored %s", w.ResourceVersion, stored.ResourceVersion)
			}
			// The next Patch starts from what was written: nothing to send.
			before := cc.patches + cc.statusPatches
			if err := p.Patch(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			if after := cc.patches + cc.statusPatches; after != before {
				t.Errorf("an unchanged object sent %d more patches", after-before)
			}
		})
	}
}

// Another writer changed the status since the object was read: Scribe's
// status fields and owned conditions win, a condition type Scribe does not
// own is kept.
func TestStatusPatcherMergesConditionsAfterAConflict(t *testing.T) {
	cc, c := newCountingClient(t, &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: webKey().Namespace, Name: webKey().Name}})
	ctx := context.Background()
	w := &scribev1.Workload{}
	if err := c.Get(ctx, webKey(), w); err != nil {
		t.Fatal(err)
	}
	p := newStatusPatcher(w, c)
	cc.beforeStatusPatch = func() {
		other := &scribev1.Workload{}
		if err := cc.Get(ctx, webKey(), other); err != nil {
			t.Fatal(err)
		}
		conditions.MarkTrue(other, "Audited", "Reviewed", "by another controller")
		conditions.MarkFalse(other, scribev1.ReadyCondition, "Theirs", "another writer's Ready")
		other.Status.Revision = "theirs"
		if err := cc.Status().Update(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	conditions.MarkTrue(w, scribev1.ReadyCondition, "Applied", "applied ours")
	w.Status.Revision = "ours"
	if err := p.Patch(ctx, w); err != nil {
		t.Fatal(err)
	}
	if cc.statusPatches != 2 {
		t.Errorf("sent %d status patches, want 2 (the conflict, then the merge)", cc.statusPatches)
	}
	stored := &scribev1.Workload{}
	if err := c.Get(ctx, webKey(), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.Revision != "ours" {
		t.Errorf("revision %q, want ours", stored.Status.Revision)
	}
	if r := conditions.Get(stored, scribev1.ReadyCondition); r == nil || r.Reason != "Applied" {
		t.Errorf("Ready %+v, want Scribe's", r)
	}
	if a := conditions.Get(stored, "Audited"); a == nil || a.Reason != "Reviewed" {
		t.Errorf("the other writer's condition was lost: %v", stored.Status.Conditions)
	}
	if stored.ResourceVersion != w.ResourceVersion {
		t.Errorf("the object's resourceVersion %s is not the stored %s", w.ResourceVersion, stored.ResourceVersion)
	}
}
