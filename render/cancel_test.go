package render_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/scribe-gitops/scribe/render"
)

// cancelledAfter is a context whose Err reports cancellation from its
// n-th call on: cancelled in the middle of a render, deterministically.
type cancelledAfter struct {
	context.Context
	n, calls atomic.Int32
}

func (c *cancelledAfter) Err() error {
	if c.calls.Add(1) >= c.n.Load() {
		return context.Canceled
	}
	return nil
}

// A render whose context is cancelled while it checks its objects stops
// at the next object with the context's error, instead of holding a
// stopping controller for the rest of a large Experiment.
func TestACancelledRenderStopsBetweenObjects(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, fixture := range []string{"gateway-tutorial.yaml", "workload-canary-50.yaml"} {
		t.Run(fixture, func(t *testing.T) {
			obj := loadFixture(t, fixture)
			in := render.Input{Object: obj, Publish: render.DefaultPublish(), Resolved: testResolved}
			full := &cancelledAfter{Context: context.Background()}
			full.n.Store(1 << 30)
			if _, err := e.Render(full, in); err != nil {
				t.Fatal(err)
			}
			checks := full.calls.Load()
			if checks < 2 {
				t.Fatalf("a render asked its context %d times: it cannot be stopped between objects", checks)
			}
			ctx := &cancelledAfter{Context: context.Background()}
			ctx.n.Store(checks / 2)
			_, err := e.Render(ctx, in)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("a render cancelled half-way: got %v, want context.Canceled", err)
			}
			if got := ctx.calls.Load(); got != checks/2 {
				t.Errorf("the render went on after its context was cancelled: %d checks, want %d", got, checks/2)
			}
		})
	}
}
