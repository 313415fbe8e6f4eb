package controller

import (
	"context"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// PipelineReconciler walks a Pipeline's versions through its stages. It
// never renders or commits itself: each stage is a Workload it owns, which
// the WorkloadReconciler renders, commits, rolls out and rolls back in the
// stage's Repository; the Pipeline decides which versions each stage's
// Workload may carry.
type PipelineReconciler struct {
	Client client.Client
	Events events.EventRecorder
	// Metrics receives the Pipeline's saved status; nil: none.
	Metrics *Metrics
}

// +kubebuilder:rbac:groups=scribe.dev,resources=pipelines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=scribe.dev,resources=pipelines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=scribe.dev,resources=workloads,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the reconciler: a Pipeline's own changes and
// every status change of its stage Workloads reconcile it.
func (r *PipelineReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int, shard predicate.Predicate) error {
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&scribev1.Pipeline{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}), shard)).
		Owns(&scribev1.Workload{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(r); err != nil {
		return fmt.Errorf("pipeline controller: %w", err)
	}
	return nil
}

// Reconcile moves one Pipeline's versions on by what its stages report.
func (r *PipelineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return lifecycle[*scribev1.Pipeline]{kind: scribev1.PipelineKind, reconcile: r.reconcile, suspended: func(o *scribev1.Pipeline) bool { return o.Spec.Suspend }, saved: r.Metrics.Observe}.
		run(ctx, r.Client, req, &scribev1.Pipeline{})
}

func (r *PipelineReconciler) reconcile(ctx context.Context, p *scribev1.Pipeline, patcher *statusPatcher) (ctrl.Result, error) {
	owned, err := r.stageWorkloads(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	stages := map[string]*scribev1.Workload{}
	for _, s := range p.Spec.Stages {
		if w := owned[s.Name]; w != nil {
			stages[s.Name] = w
			continue
		}
		// A Workload of the stage's name that is not the Pipeline's is
		// reported, never taken over.
		w := &scribev1.Workload{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: StageWorkloadName(p.Name, s.Name)}, w)
		switch {
		case err == nil:
			stages[s.Name] = w
		case !apierrors.IsNotFound(err):
			return ctrl.Result{}, fmt.Errorf("get the Workload of stage %s: %w", s.Name, err)
		}
	}
	before := p.Status.DeepCopy()
	dec := DecidePipeline(p, stages, time.Now())
	p.Status = dec.Status
	applyMarks(p, dec.Marks)
	for _, ev := range dec.Events {
		eventf(r.Events, p, ev.Type, ev.Reason, "%s", ev.Message)
	}
	if admissionChanged(before, &p.Status) {
		// The intent is saved before any stage's Workload carries it: a
		// restart finds it and makes the same change again.
		if err := patchObject(ctx, patcher, p); err != nil {
			return ctrl.Result{}, fmt.Errorf("save the admitted versions: %w", err)
		}
	}
	for i, s := range p.Spec.Stages {
		if err := r.ensureStage(ctx, p, patcher, i, s, stages[s.Name]); err != nil {
			return ctrl.Result{}, err
		}
	}
	for name, w := range owned {
		if stageIndex(p, name) >= 0 {
			continue
		}
		// A stage removed from the spec: its Workload goes, and with it
		// (its finalizer) what Scribe committed for the stage.
		if err := r.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete the Workload of removed stage %s: %w", name, err)
		}
		log.FromContext(ctx).Info("stage removed", "stage", name, "workload", w.Name)
		eventf(r.Events, p, "Normal", "StageRemoved", "stage %s was removed from the spec: Workload %s deleted", name, w.Name)
	}
	return ctrl.Result{RequeueAfter: dec.Requeue}, nil
}

// stageWorkloads are the Pipeline's Workloads by stage.
func (r *PipelineReconciler) stageWorkloads(ctx context.Context, p *scribev1.Pipeline) (map[string]*scribev1.Workload, error) {
	list := &scribev1.WorkloadList{}
	if err := r.Client.List(ctx, list, client.InNamespace(p.Namespace), client.MatchingLabels{PipelineLabel: p.Name}); err != nil {
		return nil, fmt.Errorf("list the Workloads of pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	out := map[string]*scribev1.Workload{}
	for i := range list.Items {
		w := &list.Items[i]
		if metav1.IsControlledBy(w, p) {
			out[w.Labels[StageLabel]] = w
		}
	}
	return out, nil
}

// ensureStage makes the stage's Workload carry the template up to the
// stage's admitted version, with the previous stage's evidence for it, and
// records the digest of what it wrote (PipelineWrite) in the stage's
// status, without which the Workload is not published (DecidePipelineGate).
func (r *PipelineReconciler) ensureStage(ctx context.Context, p *scribev1.Pipeline, patcher *statusPatcher, i int, stage scribev1.PipelineStage, w *scribev1.Workload) error {
	s := p.Status.Stages[i]
	if w != nil && !metav1.IsControlledBy(w, p) {
		return nil // reported by DecidePipeline (StageConflict)
	}
	spec, ok := StageWorkloadSpec(p, stage, s.Admitted)
	if !ok {
		return nil
	}
	labels := map[string]string{PipelineLabel: p.Name, StageLabel: stage.Name}
	if v := p.Labels[ShardLabel]; v != "" {
		labels[ShardLabel] = v
	}
	// The promotion annotations are exactly the Pipeline's: evidence for
	// the version admitted, or none.
	promotion := map[string]string{}
	if i > 0 {
		if up := p.Status.Stages[i-1]; up.Verified == s.Admitted && up.Evidence != "" {
			promotion[PromotedVersionAnnotation] = s.Admitted
			promotion[PromotionEvidenceAnnotation] = up.Evidence
		}
	}
	if w == nil {
		w = &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: StageWorkloadName(p.Name, stage.Name), Labels: labels, Annotations: promotion}, Spec: spec}
		if err := controllerutil.SetControllerReference(p, w, r.Client.Scheme()); err != nil {
			return fmt.Errorf("own the Workload of stage %s: %w", stage.Name, err)
		}
		if err := r.Client.Create(ctx, w); err != nil {
			return fmt.Errorf("create the Workload of stage %s: %w", stage.Name, err)
		}
		log.FromContext(ctx).Info("stage workload created", "stage", stage.Name, "version", s.Admitted)
		return r.recordWrite(ctx, p, patcher, i, w)
	}
	want := w.DeepCopy()
	want.Spec = spec
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	maps.Copy(want.Labels, labels)
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	for _, k := range []string{PromotedVersionAnnotation, PromotionEvidenceAnnotation} {
		if v, ok := promotion[k]; ok {
			want.Annotations[k] = v
		} else {
			delete(want.Annotations, k)
		}
	}
	if equality.Semantic.DeepEqual(want.Spec, w.Spec) && equality.Semantic.DeepEqual(want.Labels, w.Labels) && equality.Semantic.DeepEqual(want.Annotations, w.Annotations) {
		return r.recordWrite(ctx, p, patcher, i, w)
	}
	if err := r.Client.Update(ctx, want); err != nil {
		return fmt.Errorf("update the Workload of stage %s: %w", stage.Name, err)
	}
	log.FromContext(ctx).Info("stage workload updated", "stage", stage.Name, "version", s.Admitted)
	return r.recordWrite(ctx, p, patcher, i, want)
}

// recordWrite records in stage i's status the digest of w, as the API
// server returned it to the Pipeline's write (or as the Pipeline found it,
// already what it would write). It is saved at once: the stage's Workload
// waits for it.
func (r *PipelineReconciler) recordWrite(ctx context.Context, p *scribev1.Pipeline, patcher *statusPatcher, i int, w *scribev1.Workload) error {
	digest, err := PipelineWrite(w)
	if err != nil {
		return err
	}
	st := &p.Status.Stages[i]
	if st.WorkloadDigest == digest {
		return nil
	}
	st.WorkloadDigest = digest
	if err := patchObject(ctx, patcher, p); err != nil {
		return fmt.Errorf("record what the Pipeline wrote to stage %s: %w", st.Name, err)
	}
	return nil
}

// admissionChanged says a stage was admitted a version (or dropped).
func admissionChanged(before, after *scribev1.PipelineStatus) bool {
	if len(before.Stages) != len(after.Stages) {
		return true
	}
	for i := range after.Stages {
		if before.Stages[i].Name != after.Stages[i].Name || before.Stages[i].Admitted != after.Stages[i].Admitted {
			return true
		}
	}
	return false
}

func stageIndex(p *scribev1.Pipeline, name string) int {
	for i, s := range p.Spec.Stages {
		if s.Name == name {
			return i
		}
	}
	return -1
}
