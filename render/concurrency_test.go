package render_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/scribe-gitops/scribe/render"
)

// TestEngineRendersConcurrentlyAsSequentially shares one fresh engine (its
// templates and schemas never evaluated before) between goroutines, as the
// controller's workers do, and checks every bundle matches the one a
// separate engine renders sequentially. Run with -race to check for data
// races in the engine and in CUE.
func TestEngineRendersConcurrentlyAsSequentially(t *testing.T) {
	var objs []map[string]any
	for _, fixture := range []string{"workload-canary-50.yaml", "workload-keda.yaml", "gateway-tutorial.yaml", "agent-eval-dataset.yaml"} {
		base := loadFixture(t, fixture)
		for i := range 6 {
			o := k8sruntime.DeepCopyJSON(base)
			md := o["metadata"].(map[string]any)
			md["name"] = fmt.Sprintf("%s-%d", md["name"], i)
			objs = append(objs, o)
		}
	}
	render1 := func(e *render.Engine, o map[string]any) (string, error) {
		b, err := e.Render(context.Background(), render.Input{Object: o, Publish: render.DefaultPublish(), Resolved: testResolved})
		if err != nil {
			return "", err
		}
		return b.Digest, nil
	}

	seq, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, len(objs))
	for i, o := range objs {
		if want[i], err = render1(seq, o); err != nil {
			t.Fatal(err)
		}
	}

	shared, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(objs))
	errs := make([]error, len(objs))
	var wg sync.WaitGroup
	for i, o := range objs {
		wg.Go(func() { got[i], errs[i] = render1(shared, o) })
	}
	wg.Wait()
	for i := range objs {
		if errs[i] != nil {
			t.Errorf("object %d: %v", i, errs[i])
		} else if got[i] != want[i] {
			t.Errorf("object %d: concurrent digest %s, sequential %s", i, got[i], want[i])
		}
	}
}
