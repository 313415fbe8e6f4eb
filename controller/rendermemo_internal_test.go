package controller

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// The memo's key is everything render is given but what render does not
// read: a status patch (status, resourceVersion) keeps it; a spec, split or
// target change makes a new one.
func TestWorkloadKeyFollowsTheRenderInput(t *testing.T) {
	base := func() render.WorkloadInput {
		w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", Generation: 1, ResourceVersion: "1"}}
		w.Spec.Versions = []scribev1.Version{{Name: "v1", Image: "example.com/web:1"}}
		return render.WorkloadInput{Workload: w, Traffic: []scribev1.VersionWeight{{Version: "v1", Weight: 100}}, Publish: render.DefaultPublish()}
	}
	key := func(in render.WorkloadInput) [32]byte {
		k, ok := workloadKey(in)
		if !ok {
			t.Fatal("no key")
		}
		return k
	}
	want := key(base())
	patched := base()
	patched.Workload.ResourceVersion = "2"
	patched.Workload.Status.Phase = scribev1.WorkloadHealthy
	patched.Workload.Status.Revision = "abc"
	if key(patched) != want {
		t.Error("a status patch changed the key")
	}
	if patched.Workload.Status.Revision != "abc" {
		t.Error("the key changed its input")
	}
	for name, change := range map[string]func(*render.WorkloadInput){
		"image":      func(in *render.WorkloadInput) { in.Workload.Spec.Versions[0].Image = "example.com/web:2" },
		"generation": func(in *render.WorkloadInput) { in.Workload.Generation = 2 },
		"traffic":    func(in *render.WorkloadInput) { in.Traffic[0].Weight = 50 },
		"stable":     func(in *render.WorkloadInput) { in.Stable = "v1" },
		"path":       func(in *render.WorkloadInput) { in.Publish.Path = "clusters/prod" },
		"labels":     func(in *render.WorkloadInput) { in.Workload.Labels = map[string]string{"a": "b"} },
	} {
		in := base()
		change(&in)
		if key(in) == want {
			t.Errorf("a change of %s kept the key", name)
		}
	}
}

// The memo holds summaries (no files) and at most renderMemoSize of them.
func TestRenderMemoIsBounded(t *testing.T) {
	var m renderMemo
	keyOf := func(i int) [32]byte {
		var k [32]byte
		copy(k[:], fmt.Sprintf("%032d", i))
		return k
	}
	for i := range renderMemoSize + 10 {
		m.put(keyOf(i), &render.Bundle{Digest: fmt.Sprint(i), Files: []render.File{{Path: "x", Data: []byte("y")}}})
	}
	if n := len(m.byKey); n != renderMemoSize || m.order.Len() != renderMemoSize {
		t.Fatalf("memo holds %d entries (%d in order), want %d", n, m.order.Len(), renderMemoSize)
	}
	if m.get(keyOf(0)) != nil {
		t.Error("the oldest entry was kept")
	}
	b := m.get(keyOf(renderMemoSize + 9))
	if b == nil || b.Digest != fmt.Sprint(renderMemoSize+9) || b.Files != nil {
		t.Errorf("newest entry = %+v, want its digest and no files", b)
	}
}
