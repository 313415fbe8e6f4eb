package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// The stages of one Workload's way into the cluster through Flux, in
// order: indexes into bringUpStages.
const (
	stageCreated = iota
	stageCommitted
	stageSourceCreated
	stageArtifact
	stageApplied
	stageHealthy
)

// bringUpStages name the stages.
var bringUpStages = []string{
	"created (seen by a watch)",
	"committed (revision in status)",
	"its source created (root Kustomization applied the sync index)",
	"its source's first artifact",
	"its Kustomization applied",
	"Healthy",
}

// bringUpTimeline records, from informers, when each Workload of a
// namespace first reached each of bringUpStages, to say where a bring-up's
// time goes.
type bringUpTimeline struct {
	mu      sync.Mutex
	start   time.Time
	reached map[string][]time.Time // Workload name -> time per stage
}

// watchBringUp starts informers on the namespace's Workloads and on the
// per-CR Flux sources and Kustomizations (labelled with it) until
// ctx ends.
func watchBringUp(ctx context.Context, t *testing.T, s *Stack, ns string) *bringUpTimeline {
	t.Helper()
	tl := &bringUpTimeline{start: time.Now(), reached: map[string][]time.Time{}}
	c, err := cache.New(s.Config, cache.Options{Scheme: s.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	on := func(obj client.Object, seen func(o any)) {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    seen,
			UpdateFunc: func(_, o any) { seen(o) },
		}); err != nil {
			t.Fatal(err)
		}
	}
	on(&scribev1.Workload{}, func(o any) {
		w, ok := o.(*scribev1.Workload)
		if !ok || w.Namespace != ns {
			return
		}
		tl.mark(w.Name, stageCreated)
		if w.Status.Revision != "" {
			tl.mark(w.Name, stageCommitted)
		}
		if w.Status.Phase == scribev1.WorkloadHealthy {
			tl.mark(w.Name, stageHealthy)
		}
	})
	// The custom resource's own source: a GitRepository, or an
	// OCIRepository with per-CR artifacts.
	source := func(o any) {
		var labels map[string]string
		var artifact bool
		switch g := o.(type) {
		case *sourcev1.GitRepository:
			labels, artifact = g.Labels, g.Status.Artifact != nil
		case *sourcev1.OCIRepository:
			labels, artifact = g.Labels, g.Status.Artifact != nil
		default:
			return
		}
		if labels["scribe.dev/namespace"] != ns {
			return
		}
		tl.mark(labels["scribe.dev/name"], stageSourceCreated)
		if artifact {
			tl.mark(labels["scribe.dev/name"], stageArtifact)
		}
	}
	on(&sourcev1.GitRepository{}, source)
	on(&sourcev1.OCIRepository{}, source)
	on(&kustomizev1.Kustomization{}, func(o any) {
		k, ok := o.(*kustomizev1.Kustomization)
		if !ok || k.Labels["scribe.dev/namespace"] != ns {
			return
		}
		if k.Status.LastAppliedRevision != "" {
			tl.mark(k.Labels["scribe.dev/name"], stageApplied)
		}
	})
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the bring-up timeline's informers did not sync")
	}
	return tl
}

// mark records that name reached stage (the first time only).
func (tl *bringUpTimeline) mark(name string, stage int) {
	if name == "" {
		return
	}
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	at := tl.reached[name]
	if at == nil {
		at = make([]time.Time, len(bringUpStages))
		tl.reached[name] = at
	}
	if at[stage].IsZero() {
		at[stage] = now
	}
}

// count is how many of the Workloads named new have reached stage.
func (tl *bringUpTimeline) count(stage int, isNew func(name string) bool) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	n := 0
	for name, at := range tl.reached {
		if isNew(name) && !at[stage].IsZero() {
			n++
		}
	}
	return n
}

// report says, per stage, when the last of the Workloads named new
// reached it (from the start of the bring-up) and how long the step from
// the previous stage took per Workload.
func (tl *bringUpTimeline) report(isNew func(name string) bool) []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []string
	for i, st := range bringUpStages {
		var last time.Time
		var steps []time.Duration
		for name, at := range tl.reached {
			if !isNew(name) || at[i].IsZero() {
				continue
			}
			if at[i].After(last) {
				last = at[i]
			}
			from := tl.start
			if i > 0 && !at[i-1].IsZero() {
				from = at[i-1]
			}
			steps = append(steps, at[i].Sub(from))
		}
		if len(steps) == 0 {
			out = append(out, fmt.Sprintf("%s: none seen", st))
			continue
		}
		step := "from the start of the bring-up"
		if i > 0 {
			step = "after " + strings.SplitN(bringUpStages[i-1], " (", 2)[0]
		}
		out = append(out, fmt.Sprintf("%s: the last at +%s; per Workload %s %s", st, last.Sub(tl.start).Round(100*time.Millisecond), step, stats(steps)))
	}
	return out
}
