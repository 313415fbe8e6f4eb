package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// intentLag is the manager's client with a cache one status write behind
// for one Experiment, right after the commit of a stage: the status patch
// that saves the stage's intent (stage n, empty revision) is remembered,
// and once the patch that records its commit has been written, the next
// read of the Experiment answers the intent, as an informer that has not
// received the second write yet does. Then reads go to the cache again.
type intentLag struct {
	client.Client
	key   types.NamespacedName
	stage int32

	mu     sync.Mutex
	intent *scribev1.Experiment
	armed  bool
	served bool
	// reconciles is how many Experiment reconciles had ended when the
	// stale read was answered (-1: not yet).
	reconciles float64
}

func (c *intentLag) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if e, ok := obj.(*scribev1.Experiment); ok && key == c.key {
		c.mu.Lock()
		armed := c.armed
		if armed {
			c.armed, c.served = false, true
			c.reconciles = reconcileTotal("experiment")
			c.intent.DeepCopyInto(e)
		}
		c.mu.Unlock()
		if armed {
			return nil
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *intentLag) Status() client.SubResourceWriter {
	return &intentLagStatus{SubResourceWriter: c.Client.Status(), c: c}
}

// wrote sees the Experiment as a status patch left it (the API server's
// answer).
func (c *intentLag) wrote(obj client.Object) {
	if obj.GetNamespace() != c.key.Namespace || obj.GetName() != c.key.Name {
		return
	}
	e := &scribev1.Experiment{}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		if o.GetKind() != scribev1.ExperimentKind || runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, e) != nil {
			return
		}
	case *scribev1.Experiment:
		o.DeepCopyInto(e)
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.served || e.Status.Stage != c.stage:
	case e.Status.Revision == "":
		c.intent = e
	case c.intent != nil:
		c.armed = true
	}
}

// staleReconcileDone reports that the stale read was answered and an
// Experiment reconcile ended since: the one that read it (the test has
// one Experiment, whose reconciles do not overlap).
func (c *intentLag) staleReconcileDone() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := reconcileTotal("experiment")
	return c.served && now > c.reconciles, fmt.Sprintf("intent saved: %t; stale read answered: %t; reconciles then %v, now %v", c.intent != nil, c.served, c.reconciles, now)
}

type intentLagStatus struct {
	client.SubResourceWriter
	c *intentLag
}

func (w *intentLagStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	w.c.wrote(obj)
	return nil
}

// An Experiment's committed stage is not rendered again with files: the
// reconcile that follows a stage's commit may read the Experiment from a
// cache that has not seen the status patch recording the commit yet, and
// so sees the intent saved before the push (the stage, its digest, an
// empty revision), as a controller restarted during the push would. That
// view is not taken for an unfinished push: the stage's render (with
// files, for its commit) is its only render, however many reconciles
// follow.
func TestAnExperimentsCommittedStageIsNotRenderedAgainWithFiles(t *testing.T) {
	f := newFixture(t)
	f.publishCatalog(t)
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	m, reg := renderMetrics(t)
	const name = "lab"
	lag := &intentLag{key: types.NamespacedName{Namespace: f.ns, Name: name}, stage: scribev1.StageComponents, reconciles: -1}
	newClient := func(cfg *rest.Config, opts client.Options) (client.Client, error) {
		c, err := client.New(cfg, opts)
		lag.Client = c
		return lag, err
	}
	cfg, polls := countingConfig(f.e.cfg, "/namespaces/"+f.ns+"/configmaps/"+controller.OTELConfigMapName)
	startManager(t, cfg, cacheFor(f.ns), newClient, controller.Options{Poll: 150 * time.Millisecond, Concurrency: 2, CommitInterval: -1, Metrics: m})
	if err := f.e.c.Create(f.ctx(), hubExperiment(f.ns, name)); err != nil {
		t.Fatal(err)
	}
	f.waitStage(t, name, scribev1.StageClusters)
	// The first poll after stage 1's commit renders once more (the sync
	// object it recorded is a render input): counted from after it.
	settled := polls.Load() + 2
	waitFor(t, "two polls after stage 1's commit", func() (bool, string) {
		return polls.Load() >= settled, fmt.Sprintf("%d polls", polls.Load())
	})
	before := renderCount(t, reg, scribev1.ExperimentKind)

	f.applyStage(t, name, scribev1.StageClusters)
	commit := f.waitStage(t, name, scribev1.StageComponents).Status.Revision
	waitFor(t, "the reconcile that read stage 2's intent after its commit", lag.staleReconcileDone)
	from := polls.Load()
	waitFor(t, "three polls after it", func() (bool, string) {
		return polls.Load() >= from+3, fmt.Sprintf("%d polls", polls.Load()-from)
	})
	if got := renderCount(t, reg, scribev1.ExperimentKind) - before; got != 1 {
		t.Errorf("stage 2 was rendered %d times over its commit and the reconciles after it, want once (its commit's render)", got)
	}
	if e := f.waitStage(t, name, scribev1.StageComponents); e.Status.Revision != commit {
		t.Errorf("stage 2's commit is %s, then %s", commit, e.Status.Revision)
	}
}
