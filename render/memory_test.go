package render_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

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
			if _, err := e.Render(ctx, render.Input{Object: o, Publish: render.DefaultPublish()}); err != nil {
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
