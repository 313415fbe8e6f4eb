package render_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/scribe-gitops/scribe/render"
)

func loadFixture(b testing.TB, name string) map[string]any {
	data, err := os.ReadFile(filepath.Join(fixturesDir, "valid", name))
	if err != nil {
		b.Fatal(err)
	}
	objs, err := render.ObjectsFromYAML(data)
	if err != nil {
		b.Fatal(err)
	}
	return objs[0]
}

// benchRender renders fixture b.N times. changed gives each render a new
// name, so every object differs from the last; otherwise the object is
// unchanged, as when a controller re-renders it on each reconcile. Every
// render checks every object against its schema (there is no cache).
func benchRender(b *testing.B, fixture string, changed bool) {
	e, err := render.New()
	if err != nil {
		b.Fatal(err)
	}
	base := loadFixture(b, fixture)
	ctx := context.Background()
	// The first render builds the embedded schema checks of the kinds it meets.
	warm := k8sruntime.DeepCopyJSON(base)
	warm["metadata"].(map[string]any)["name"] = "warm"
	if _, err := e.Render(ctx, render.Input{Object: warm, Publish: render.DefaultPublish(), Resolved: testResolved}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		obj := base
		if changed {
			b.StopTimer()
			obj = k8sruntime.DeepCopyJSON(base)
			obj["metadata"].(map[string]any)["name"] = fmt.Sprintf("x%d", i)
			b.StartTimer()
		}
		if _, err := e.Render(ctx, render.Input{Object: obj, Publish: render.DefaultPublish(), Resolved: testResolved}); err != nil {
			b.Fatal(err)
		}
	}
}

// One Workload with two versions, HPA, HTTPRoute: 13 objects, full schema checks.
func BenchmarkRenderWorkload(b *testing.B) { benchRender(b, "workload-canary-50.yaml", true) }

// The same Workload unchanged, as re-rendered on every reconcile.
func BenchmarkRenderWorkloadUnchanged(b *testing.B) {
	benchRender(b, "workload-canary-50.yaml", false)
}

// The seed Experiment: GKE cluster, Helm and Git components, workflows: 19 objects.
func BenchmarkRenderExperiment(b *testing.B) { benchRender(b, "gateway-tutorial.yaml", true) }

// The same Experiment unchanged.
func BenchmarkRenderExperimentUnchanged(b *testing.B) {
	benchRender(b, "gateway-tutorial.yaml", false)
}

// 1000 distinct Workloads rendered concurrently by one shared engine.
func BenchmarkRender1000WorkloadsConcurrently(b *testing.B) {
	e, err := render.New()
	if err != nil {
		b.Fatal(err)
	}
	base := loadFixture(b, "workload-canary-50.yaml")
	objs := make([]map[string]any, 1000)
	for i := range objs {
		o := k8sruntime.DeepCopyJSON(base)
		o["metadata"].(map[string]any)["name"] = fmt.Sprintf("checkout-%04d", i)
		objs[i] = o
	}
	ctx := context.Background()
	if _, err := e.Render(ctx, render.Input{Object: base, Publish: render.DefaultPublish(), Resolved: testResolved}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		var wg sync.WaitGroup
		work := make(chan map[string]any)
		errs := make(chan error, 1)
		for w := 0; w < runtime.GOMAXPROCS(0); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for o := range work {
					if _, err := e.Render(ctx, render.Input{Object: o, Publish: render.DefaultPublish(), Resolved: testResolved}); err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				}
			}()
		}
		for _, o := range objs {
			work <- o
		}
		close(work)
		wg.Wait()
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapSys)/(1<<20), "heap-sys-MiB")
}

// Building an engine: templates, catalog, CRD validators (what every
// `scribe render` process pays before its first render).
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := render.New(); err != nil {
			b.Fatal(err)
		}
	}
}
