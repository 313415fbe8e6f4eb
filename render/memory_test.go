package render_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/scribe-gitops/scribe/render"
)

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestSharedEngineHeapPerRender measures what a shared engine keeps per
// render: the heap after GC following N renders of the same Workload, and
// of N distinct ones. Inputs compiled as CUE files stayed registered in
// the engine's CUE context for good (~64 KiB per render); what remains is
// CUE's interning of the field names a distinct Workload brings (under
// 1 KiB). The test fails well above that, and far below the old leak.
func TestSharedEngineHeapPerRender(t *testing.T) {
	if testing.Short() {
		t.Skip("renders hundreds of Workloads")
	}
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	base := loadFixture(t, "workload-canary-50.yaml")
	ctx := context.Background()
	renderN := func(n int, distinct bool, offset int) {
		for i := range n {
			o := base
			if distinct {
				o = k8sruntime.DeepCopyJSON(base)
				o["metadata"].(map[string]any)["name"] = fmt.Sprintf("w%d", offset+i)
			}
			if _, err := e.Render(ctx, render.Input{Object: o, Publish: render.DefaultPublish(), Resolved: testResolved}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 200
	renderN(20, true, 1_000_000) // warm: schema checks decoded, templates evaluated once
	for _, distinct := range []bool{false, true} {
		before := heapAfterGC()
		renderN(n, distinct, 0)
		after := heapAfterGC()
		per := (float64(after) - float64(before)) / n
		t.Logf("distinct=%v: heap %d KiB -> %d KiB after %d renders: %.1f KiB per render", distinct, before>>10, after>>10, n, per/1024)
		if per > 16<<10 {
			t.Errorf("distinct=%v: the shared engine keeps %.0f KiB per render", distinct, per/1024)
		}
	}
}

// cheapestWorkload is the smallest valid Workload: one version, one port
// (a Deployment, two Services, a PodDisruptionBudget, a NetworkPolicy and
// the sync object).
func cheapestWorkload(name string) map[string]any {
	return map[string]any{
		"apiVersion": "scribe.dev/v1alpha1",
		"kind":       "Workload",
		"metadata":   map[string]any{"name": name, "namespace": "demo"},
		"spec": map[string]any{
			"versions": []any{map[string]any{"name": "v1", "image": "nginx:1.27"}},
			"service":  map[string]any{"ports": []any{map[string]any{"name": "http", "port": int64(80)}}},
		},
	}
}

// TestSharedEngineHeapStaysFlatOver100000Renders renders 100,000 times
// with one engine on every core, as a controller re-renders its CRs on
// every reconcile (64 Workloads in turn), and bounds the heap's growth
// after GC: from the end of a warm-up to the midpoint, and from the
// midpoint to the end. A leak of even 100 bytes per render (the engine
// once kept ~27 KB) grows the heap by 5 MB per half. It measures memory,
// not time.
func TestSharedEngineHeapStaysFlatOver100000Renders(t *testing.T) {
	if testing.Short() {
		t.Skip("renders 100,000 Workloads")
	}
	const (
		renders   = 100_000
		workloads = 64
		warm      = 2_000
		bound     = 4 << 20 // bytes of heap growth allowed per half
	)
	// Less frequent GC makes each render cheaper; every measurement below
	// is taken after a forced full GC, so it does not change what is kept.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]map[string]any, workloads)
	for i := range objs {
		objs[i] = cheapestWorkload(fmt.Sprintf("w%02d", i))
	}
	ctx := context.Background()
	run := func(from, to int) {
		var next atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		errs := make(chan error, runtime.GOMAXPROCS(0))
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(to) {
						return
					}
					if _, err := e.Render(ctx, render.Input{Object: objs[i%workloads], Publish: render.DefaultPublish(), Resolved: testResolved}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	start := time.Now()
	run(0, warm)
	h0 := heapAfterGC()
	run(warm, renders/2)
	h1 := heapAfterGC()
	run(renders/2, renders)
	h2 := heapAfterGC()
	t.Logf("%d renders on %d cores in %s; heap after GC: %d KiB after %d, %d KiB after %d, %d KiB after %d",
		renders, runtime.GOMAXPROCS(0), time.Since(start).Round(time.Second), h0>>10, warm, h1>>10, renders/2, h2>>10, renders)
	for _, half := range []struct {
		name          string
		before, after uint64
		n             int
	}{{"first half", h0, h1, renders/2 - warm}, {"second half", h1, h2, renders / 2}} {
		growth := int64(half.after) - int64(half.before)
		if growth > bound {
			t.Errorf("%s: the heap grew by %d KiB over %d renders (%.0f bytes per render), more than %d KiB", half.name, growth>>10, half.n, float64(growth)/float64(half.n), bound>>10)
		}
	}
}
