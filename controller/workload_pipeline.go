package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// pipelineGate reads the Pipeline that claims w and decides whether w is
// published (DecidePipelineGate). A Workload held back for want of the
// Pipeline's record is decided again on the Pipeline read from the API
// server: the cache may not have the record the Pipeline saved right after
// its write.
func (r *WorkloadReconciler) pipelineGate(ctx context.Context, w *scribev1.Workload) (PipelineGate, error) {
	p, err := claimingPipeline(ctx, r.Publisher.Client, w)
	if err != nil {
		return PipelineGate{}, err
	}
	gate := DecidePipelineGate(w, p)
	if gate.Publish || p == nil || r.Publisher.Reader == nil {
		return gate, nil
	}
	live := &scribev1.Pipeline{}
	switch err := r.Publisher.Reader.Get(ctx, client.ObjectKeyFromObject(p), live); {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return PipelineGate{}, fmt.Errorf("read pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	return DecidePipelineGate(w, live), nil
}

// claimingPipeline is the Pipeline that claims w: the one its Pipeline
// ownerReference names, or else one with a stage whose Workload bears w's
// name; nil when there is none.
func claimingPipeline(ctx context.Context, c client.Reader, w *scribev1.Workload) (*scribev1.Pipeline, error) {
	if ref := pipelineOwnerRef(w); ref != nil {
		p := &scribev1.Pipeline{}
		switch err := c.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: ref.Name}, p); {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("get pipeline %s/%s, owner of workload %s: %w", w.Namespace, ref.Name, w.Name, err)
		}
		return p, nil
	}
	list := &scribev1.PipelineList{}
	if err := c.List(ctx, list, client.InNamespace(w.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list the pipelines of namespace %s: %w", w.Namespace, err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		for _, s := range p.Spec.Stages {
			if StageWorkloadName(p.Name, s.Name) == w.Name {
				return p.DeepCopy(), nil
			}
		}
	}
	return nil, nil
}

// holdBack records why w is not published: Ready=False with
// ReasonNotWrittenByPipeline, and Stalled when only a person can change
// that (Reconciling while its Pipeline writes it again).
func (r *WorkloadReconciler) holdBack(w *scribev1.Workload, gate PipelineGate) {
	marks := []Mark{markNotReady(ReasonNotWrittenByPipeline, "%s", gate.Message)}
	if gate.Stalled {
		marks = append(marks, markStalled(ReasonNotWrittenByPipeline, "%s", gate.Message))
	} else {
		marks = append(marks, markReconciling(ReasonNotWrittenByPipeline, "%s", gate.Message))
	}
	applyMarks(w, marks)
	r.event(w, "Warning", ReasonNotWrittenByPipeline, "not published: %s", gate.Message)
}

// releaseHold removes the Stalled condition holdBack set, once w is
// published again (the rollout's own conditions replace the rest).
func releaseHold(w *scribev1.Workload) {
	if c := apimeta.FindStatusCondition(w.Status.Conditions, scribev1.StalledCondition); c != nil && c.Reason == ReasonNotWrittenByPipeline {
		applyMarks(w, []Mark{unmark(scribev1.StalledCondition)})
	}
}

// watchPipelineWrites reconciles a Pipeline's stage Workloads when the
// Pipeline records what it wrote to them (a stage's WorkloadDigest), which
// they wait for.
func watchPipelineWrites(b *builder.Builder, shard predicate.Predicate) *builder.Builder {
	recorded := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, ok1 := e.ObjectOld.(*scribev1.Pipeline)
			after, ok2 := e.ObjectNew.(*scribev1.Pipeline)
			return !ok1 || !ok2 || stageDigests(before) != stageDigests(after)
		},
	}
	return b.Watches(&scribev1.Pipeline{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		p, ok := o.(*scribev1.Pipeline)
		if !ok {
			return nil
		}
		out := make([]reconcile.Request, 0, len(p.Spec.Stages))
		for _, s := range p.Spec.Stages {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: StageWorkloadName(p.Name, s.Name)}})
		}
		return out
	}), builder.WithPredicates(recorded, shard))
}

// stageDigests is every stage's recorded write, for comparison.
func stageDigests(p *scribev1.Pipeline) string {
	out := ""
	for _, s := range p.Status.Stages {
		out += s.Name + "=" + s.WorkloadDigest + ";"
	}
	return out
}
