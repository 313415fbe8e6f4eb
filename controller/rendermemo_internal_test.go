package controller

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// A waiting CR is rendered again only when its input changed, a commit
// needs the files, or the memo never saw it.
func TestDecideRenderReusesOnlyTheSameInputWithoutFiles(t *testing.T) {
	a, b := [32]byte{1}, [32]byte{2}
	last := &memoEntry{input: a}
	for _, tc := range []struct {
		name      string
		last      *memoEntry
		input     [32]byte
		keyed     bool
		needFiles bool
		want      renderReason
	}{
		{"waiting, input unchanged: reused", last, a, true, false, renderReuse},
		{"input changed: rendered", last, b, true, false, renderInputChanged},
		{"never rendered: rendered", nil, a, true, false, renderFirst},
		{"a commit needs the files: rendered", last, a, true, true, renderFiles},
		{"no digest: always rendered", last, a, false, false, renderNoKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideRender(tc.last, tc.input, tc.keyed, tc.needFiles); got != tc.want {
				t.Errorf("decideRender = %q, want %q", got, tc.want)
			}
		})
	}
}

// The Workload digest is everything render is given but what render does
// not read: a status patch (status, resourceVersion) keeps it; a spec,
// split, target or engine change makes a new one.
func TestWorkloadDigestFollowsTheRenderInput(t *testing.T) {
	base := func() render.WorkloadInput {
		w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", Generation: 1, ResourceVersion: "1"}}
		w.Spec.Versions = []scribev1.Version{{Name: "v1", Image: "example.com/web:1"}}
		return render.WorkloadInput{Workload: w, Traffic: []scribev1.VersionWeight{{Version: "v1", Weight: 100}}, Publish: render.DefaultPublish()}
	}
	key := func(engine string, in render.WorkloadInput) [32]byte {
		k, ok := workloadDigest(engine, in)
		if !ok {
			t.Fatal("no digest")
		}
		return k
	}
	want := key("builtin v1", base())
	patched := base()
	patched.Workload.ResourceVersion = "2"
	patched.Workload.Status.Phase = scribev1.WorkloadHealthy
	patched.Workload.Status.Revision = "abc"
	if key("builtin v1", patched) != want {
		t.Error("a status patch changed the digest")
	}
	if patched.Workload.Status.Revision != "abc" {
		t.Error("the digest changed its input")
	}
	if key("builtin v2", base()) == want {
		t.Error("a new template version kept the digest")
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
		if key("builtin v1", in) == want {
			t.Errorf("a change of %s kept the digest", name)
		}
	}
}

// The Experiment digest follows its generation and spec, the stage, the
// catalog (engine and published revision), the OTLP endpoint and the
// Repository's publish input; a status patch keeps it.
func TestExperimentDigestFollowsTheRenderInput(t *testing.T) {
	base := func() render.ExperimentInput {
		e := hubExperimentSpec("team", "lab")
		return render.ExperimentInput{Experiment: e, Publish: render.DefaultPublish(), Stage: scribev1.StageClusters,
			Resolved: render.Resolved{Catalog: &render.CatalogSource{Kind: "GitRepository", Namespace: "team", Name: "catalog", Revision: "v1"}}}
	}
	key := func(engine string, in render.ExperimentInput) [32]byte {
		k, ok := experimentDigest(engine, in)
		if !ok {
			t.Fatal("no digest")
		}
		return k
	}
	const engine = "catalog sha256:aaa ."
	want := key(engine, base())
	patched := base()
	patched.Experiment.ResourceVersion = "9"
	patched.Experiment.Status.Phase = scribev1.ExperimentProvisioning
	patched.Experiment.Status.Revision = "abc"
	if key(engine, patched) != want {
		t.Error("a status patch changed the digest")
	}
	if key("catalog sha256:bbb .", base()) == want {
		t.Error("a new catalog artifact kept the digest")
	}
	for name, change := range map[string]func(*render.ExperimentInput){
		"generation":        func(in *render.ExperimentInput) { in.Experiment.Generation = 2 },
		"components":        func(in *render.ExperimentInput) { in.Experiment.Spec.Targets[0].Components = nil },
		"stage":             func(in *render.ExperimentInput) { in.Stage = scribev1.StageComponents },
		"catalog revision":  func(in *render.ExperimentInput) { in.Resolved.Catalog.Revision = "v2" },
		"otel endpoint":     func(in *render.ExperimentInput) { in.Resolved.OTELEndpoint = "http://otel:4317" },
		"path":              func(in *render.ExperimentInput) { in.Publish.Path = "clusters/prod" },
		"allowedNamespaces": func(in *render.ExperimentInput) { in.Publish.AllowedNamespaces = []string{"lab-2"} },
		"sync name":         func(in *render.ExperimentInput) { in.Publish.SyncName = "old" },
	} {
		in := base()
		change(&in)
		if key(engine, in) == want {
			t.Errorf("a change of %s kept the digest", name)
		}
	}
}

func hubExperimentSpec(ns, name string) *scribev1.Experiment {
	return &scribev1.Experiment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Generation: 1, ResourceVersion: "1", UID: types.UID("uid-" + ns + "-" + name)},
		Spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{
			{Name: "app", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Components: []scribev1.Component{{App: "demo-services"}}},
		}},
	}
}

// The memo holds one summary (no files) per CR and at most
// renderMemoSize CRs, the least recently used dropped first.
func TestRenderMemoKeepsOneSummaryPerCRAndIsBounded(t *testing.T) {
	var m renderMemo
	for i := range renderMemoSize + 10 {
		m.put(fmt.Sprint(i), [32]byte{byte(i)}, &render.Bundle{Digest: fmt.Sprint(i), Files: []render.File{{Path: "x", Data: []byte("y")}}})
	}
	m.put("7", [32]byte{7, 7}, &render.Bundle{Digest: "again"}) // dropped already: back
	if n := len(m.byCR); n != renderMemoSize || m.order.Len() != renderMemoSize {
		t.Fatalf("memo holds %d entries (%d in order), want %d", n, m.order.Len(), renderMemoSize)
	}
	if m.get("0") != nil {
		t.Error("the least recently used entry was kept")
	}
	last := fmt.Sprint(renderMemoSize + 9)
	m.put(last, [32]byte{9}, &render.Bundle{Digest: "new input"})
	e := m.get(last)
	if e == nil || e.summary.Digest != "new input" || e.input != [32]byte{9} || e.summary.Files != nil {
		t.Errorf("entry = %+v, want the last input's summary, without files", e)
	}
	if len(m.byCR) != renderMemoSize {
		t.Errorf("a CR's new render added an entry: %d", len(m.byCR))
	}
}

// A waiting Experiment polled again renders once; a commit's render (with
// files), a new generation and a new stage render again. Renders are
// counted as the controller's metric counts them.
func TestPublisherRendersAWaitingExperimentOnce(t *testing.T) {
	engine, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	p := &Publisher{Engine: engine, Metrics: m, renderSlots: newRenderSlots(2)}
	tgt := &Target{Input: render.DefaultPublish(), CatalogSource: &render.CatalogSource{Kind: "GitRepository", Namespace: "flux-system", Name: "catalog", Path: ".", URL: "https://git.example.com/catalog.git", Revision: "v1"}}
	renders := func() int {
		return renderCount(t, reg, scribev1.ExperimentKind)
	}
	e := hubExperimentSpec("team", "lab")
	in := func() render.ExperimentInput {
		return render.ExperimentInput{Experiment: e, Stage: scribev1.StageClusters}
	}
	ctx := context.Background()
	for range 5 { // five polls while waiting
		b, err := p.RenderExperiment(ctx, tgt, in(), true)
		if err != nil {
			t.Fatal(err)
		}
		e.Status.Revision, e.ResourceVersion = b.Digest, fmt.Sprint(b.Generation+1) // the reconcile's status patch
	}
	if n := renders(); n != 1 {
		t.Fatalf("five polls of a waiting Experiment rendered %d times, want 1", n)
	}
	if b, err := p.RenderExperiment(ctx, tgt, in(), false); err != nil || len(b.Files) == 0 {
		t.Fatalf("a render for a commit has no files (%v)", err)
	}
	e.Generation = 2
	if _, err := p.RenderExperiment(ctx, tgt, in(), true); err != nil {
		t.Fatal(err)
	}
	if _, err := p.RenderExperiment(ctx, tgt, render.ExperimentInput{Experiment: e, Stage: scribev1.StageComponents}, true); err != nil {
		t.Fatal(err)
	}
	if n := renders(); n != 4 {
		t.Errorf("renders after a commit, a new generation and a new stage = %d, want 4", n)
	}
}

// renderCount is the number of renders of kind the registry's
// scribe_render_duration_seconds observed.
func renderCount(t *testing.T, reg prometheus.Gatherer, kind string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "scribe_render_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					n += int(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return n
}
