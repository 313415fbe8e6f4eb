package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

// Experiment-specific condition reasons and names.
const (
	// ReasonProvisioning: the commit is applied; target clusters are coming up.
	ReasonProvisioning = "Provisioning"
	// ReasonClusterFailed: a target's cluster reports a failure.
	ReasonClusterFailed = "ClusterFailed"
	// ReasonComponentFailed: the applier reports that a component delivered
	// to a target failed (Flux's or Argo CD's message follows). Not
	// terminal: the applier retries, and a fixed source is read back.
	ReasonComponentFailed = "ComponentFailed"
	// ReasonWaitingForWorkflow: every target is ready; the workflow has not started.
	ReasonWaitingForWorkflow = "WaitingForWorkflow"
	// ReasonWorkflowRunning: the validation workflow runs.
	ReasonWorkflowRunning = "WorkflowRunning"
	// ReasonWorkflowFailed: the validation workflow failed (terminal).
	ReasonWorkflowFailed = "WorkflowFailed"
	// ReasonWorkflowTimeout: the workflow ran longer than
	// spec.workflow.completion.timeout (terminal).
	ReasonWorkflowTimeout = "WorkflowTimeout"
	// ReasonWaitingForCompletion: manual completion mode; waiting for the
	// CompleteAnnotation.
	ReasonWaitingForCompletion = "WaitingForCompletion"

	// CompleteAnnotation completes an Experiment whose
	// spec.workflow.completion.mode is manual.
	CompleteAnnotation = "scribe.dev/complete"

	// OTELConfigMapName is the ConfigMap, in the Experiment's namespace, whose
	// OTELEndpointKey gives the OTLP endpoint targets ship telemetry to. When
	// it (or the key) is missing the render's default endpoint is used.
	OTELConfigMapName = "otel-config"
	// OTELEndpointKey is the key of the endpoint in OTELConfigMapName.
	OTELEndpointKey = "endpoint"

	// kubeconfigSuffix: Cluster API (and the vcluster chart, as Scribe renders
	// it) write a cluster's kubeconfig to the Secret "<cluster>-kubeconfig".
	kubeconfigSuffix = "-kubeconfig"
)

// ExperimentReconciler renders Experiments into one commit and walks their
// phases Pending → Provisioning → Ready → Running → Complete | Failed, each
// entered only on what it reads back: the applier's verdict on the commit,
// each target cluster's own status and kubeconfig Secret, then the
// validation workflow's status. It never writes any of those objects.
//
// The render yields clusters, component deliveries and the workflow in one
// bundle, so there is exactly one commit per rendered state; the phases
// follow what the cluster reports, not a sequence of commits.
type ExperimentReconciler struct {
	Publisher *Publisher
	Events    events.EventRecorder
	// Poll is how often the read-back objects are re-read while waiting.
	Poll time.Duration
}

// +kubebuilder:rbac:groups=scribe.dev,resources=experiments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=scribe.dev,resources=experiments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=scribe.dev,resources=experiments/finalizers,verbs=update
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;watch
// +kubebuilder:rbac:groups=argoproj.io,resources=workflows,verbs=get;list;watch
// +kubebuilder:rbac:groups=testworkflows.testkube.io,resources=testworkflowexecutions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler.
func (r *ExperimentReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int, pred predicate.Predicate) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&scribev1.Experiment{}, finalizerPredicates(pred)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency})
	// Read-back is watched where the kind is installed, so a phase moves as
	// soon as Flux, Argo CD, Cluster API or the workflow engine reports, not
	// at the next poll: the per-CR sync object carries render's
	// scribe.dev/{kind,namespace,name} labels, and every object rendered for
	// an Experiment scribe.dev/experiment. Kustomizations share the Workload
	// controller's informer; the other kinds are watched as metadata only.
	sync := syncOwner(scribev1.ExperimentKind)
	owner := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if reqs := sync(ctx, o); len(reqs) > 0 {
			return reqs
		}
		if name := o.GetLabels()["scribe.dev/experiment"]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	})
	if kustomizationsInstalled(mgr) {
		b = b.Watches(&kustomizev1.Kustomization{}, owner)
	}
	for _, gk := range []schema.GroupKind{
		{Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease"},
		{Group: "argoproj.io", Kind: "Application"},
		{Group: "cluster.x-k8s.io", Kind: "Cluster"},
		{Group: "argoproj.io", Kind: "Workflow"},
		{Group: "testworkflows.testkube.io", Kind: "TestWorkflowExecution"},
	} {
		m, err := mgr.GetRESTMapper().RESTMapping(gk)
		if err != nil {
			continue // not installed: polled
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(m.GroupVersionKind)
		b = b.WatchesMetadata(obj, owner)
	}
	return b.Complete(r)
}

// Reconcile moves one Experiment along its phases as far as the evidence
// read back allows.
func (r *ExperimentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return lifecycle[*scribev1.Experiment]{kind: scribev1.ExperimentKind, finalize: r.finalize, reconcile: r.reconcile}.
		run(ctx, r.Publisher.Client, req, &scribev1.Experiment{})
}

// reconcile renders the Experiment into one commit and follows what is read
// back of it.
func (r *ExperimentReconciler) reconcile(ctx context.Context, e *scribev1.Experiment, patcher *patch.SerialPatcher) (ctrl.Result, error) {
	st := &e.Status
	observed := st.ObservedGeneration
	st.ObservedGeneration = e.Generation
	if st.Phase == "" {
		r.setPhase(ctx, e, scribev1.ExperimentPending, "waiting for the first render")
		conditions.MarkReconciling(e, ReasonProgressing, "rendering")
		conditions.MarkUnknown(e, scribev1.ReadyCondition, ReasonProgressing, "rendering")
	}
	if observed == e.Generation && finished(e) {
		// Complete, or failed for good, at this generation: nothing to read
		// back any more. A new generation renders and runs again.
		return ctrl.Result{}, nil
	}

	t, err := r.Publisher.Target(ctx, e.Namespace, e.Spec.RepositoryRef, true)
	if err != nil {
		return r.fail(e, err)
	}
	if t.Engine, err = r.Publisher.EngineFor(ctx, t); err != nil {
		return r.fail(e, err)
	}
	resolved, err := r.resolve(ctx, e)
	if err != nil {
		return r.fail(e, &reasonError{reason: ReasonResolveFailed, err: err})
	}
	bundle, err := r.render(ctx, e, t, resolved)
	if err != nil {
		return r.fail(e, err)
	}

	// Intent first: the digest to publish is saved with an empty revision
	// before the push, and the commit recorded after it, so a controller
	// restarted in between publishes the same bundle again (a no-op in Git)
	// and never makes a second commit for it.
	if st.Revision == "" || st.Digest != bundle.Digest {
		st.Revision, st.Digest = "", bundle.Digest
		if err := r.patch(ctx, patcher, e); err != nil {
			return ctrl.Result{}, err
		}
		res, err := r.Publisher.Publish(ctx, t, publish.ChangeFor(bundle), bundle.Sync)
		if err != nil {
			return r.fail(e, err)
		}
		st.Revision = res.Commit
		st.GeneratedResources = generated(t, bundle)
		st.Workflow = nil
		conditions.Delete(e, scribev1.StalledCondition) // a new render starts over
		log.FromContext(ctx).Info("published", "revision", res.Revision, "changed", res.Changed, "digest", bundle.Digest)
		r.setPhase(ctx, e, scribev1.ExperimentProvisioning, "published %s; waiting for the applier and the target clusters", shortRev(st.Revision))
	}

	switch st.Phase {
	case scribev1.ExperimentReady, scribev1.ExperimentRunning:
		return r.run(ctx, e, bundle)
	case scribev1.ExperimentComplete:
		return ctrl.Result{}, nil
	case scribev1.ExperimentFailed:
		if finished(e) {
			return ctrl.Result{}, nil
		}
	}
	return r.provision(ctx, e, t, bundle)
}

// patch writes metadata and status now, owning Scribe's conditions.
func (r *ExperimentReconciler) patch(ctx context.Context, patcher *patch.SerialPatcher, e *scribev1.Experiment) error {
	return patchObject(ctx, patcher, e)
}

// finished reports a terminal phase: Complete, or Failed because the
// workflow failed or timed out. Failures of the applier or of a cluster are
// not terminal: they are re-read, as Flux and Cluster API retry.
func finished(e *scribev1.Experiment) bool {
	switch e.Status.Phase {
	case scribev1.ExperimentComplete:
		return true
	case scribev1.ExperimentFailed:
		reason := conditions.GetReason(e, scribev1.ReadyCondition)
		return reason == ReasonWorkflowFailed || reason == ReasonWorkflowTimeout
	}
	return false
}

// provision waits for the applier to apply the commit and for every target
// cluster to be ready, in depends order; then the Experiment is Ready.
func (r *ExperimentReconciler) provision(ctx context.Context, e *scribev1.Experiment, t *Target, bundle *render.Bundle) (ctrl.Result, error) {
	st := &e.Status
	verdict, err := r.Publisher.Applied(ctx, t, bundle.Source, bundle.Sync, st.Revision)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read applier status of %s: %w", shortRev(st.Revision), err)
	}
	targets, err := r.targets(ctx, e, bundle)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.Targets = targets

	if verdict.State == health.Failed {
		r.failed(ctx, e, ReasonApplyFailed, "%s failed to apply: %s", shortRev(st.Revision), verdict.Message)
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	var waiting []string
	for _, ts := range targets {
		switch ts.Phase {
		case scribev1.ExperimentFailed:
			reason := ReasonClusterFailed
			if ts.ClusterReady {
				reason = ReasonComponentFailed
			}
			r.failed(ctx, e, reason, "target %s: %s", ts.Name, ts.Message)
			return ctrl.Result{RequeueAfter: r.Poll}, nil
		case scribev1.ExperimentReady:
		default:
			waiting = append(waiting, ts.Name+": "+ts.Message)
		}
	}
	if verdict.State != health.Healthy {
		r.setPhase(ctx, e, scribev1.ExperimentProvisioning, "waiting for %s to be applied", shortRev(st.Revision))
		conditions.MarkReconciling(e, ReasonApplyPending, "waiting for %s to be applied: %s", shortRev(st.Revision), verdict.Message)
		conditions.MarkFalse(e, scribev1.ReadyCondition, ReasonApplyPending, "waiting for %s to be applied: %s", shortRev(st.Revision), verdict.Message)
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	if len(waiting) > 0 {
		msg := fmt.Sprintf("%s applied; waiting for %d of %d targets: %s", shortRev(st.Revision), len(waiting), len(targets), strings.Join(waiting, "; "))
		r.setPhase(ctx, e, scribev1.ExperimentProvisioning, "%s", msg)
		conditions.MarkReconciling(e, ReasonProvisioning, "%s", msg)
		conditions.MarkFalse(e, scribev1.ReadyCondition, ReasonProvisioning, "%s", msg)
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	msg := fmt.Sprintf("%s applied; all %d targets ready", shortRev(st.Revision), len(targets))
	r.setPhase(ctx, e, scribev1.ExperimentReady, "%s", msg)
	conditions.MarkTrue(e, scribev1.ReadyCondition, ReasonSucceeded, "%s", msg)
	conditions.MarkReconciling(e, ReasonWaitingForWorkflow, "%s", msg)
	// The next pass, at once, looks at the workflow: each phase is recorded
	// on its own.
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// targets reads back every target's cluster. A target is Ready when its
// cluster is and every target it depends on is Ready.
func (r *ExperimentReconciler) targets(ctx context.Context, e *scribev1.Experiment, bundle *render.Bundle) ([]scribev1.TargetStatus, error) {
	out := make([]scribev1.TargetStatus, len(e.Spec.Targets))
	clusterOK := make([]bool, len(e.Spec.Targets))
	index := make(map[string]int, len(e.Spec.Targets))
	for i, tg := range e.Spec.Targets {
		index[tg.Name] = i
		ts, err := r.cluster(ctx, e, tg, bundle)
		if err != nil {
			return nil, err
		}
		if ts.ClusterReady {
			if err := r.components(ctx, e, tg, bundle, &ts); err != nil {
				return nil, err
			}
		}
		out[i] = ts
		clusterOK[i] = ts.ClusterReady && ts.Phase != scribev1.ExperimentFailed && componentsReady(ts)
	}
	// Ready propagates along depends until nothing changes; targets in a
	// dependency cycle never become Ready and say what they wait for.
	ready := make([]bool, len(out))
	for changed := true; changed; {
		changed = false
		for i, tg := range e.Spec.Targets {
			if ready[i] || !clusterOK[i] {
				continue
			}
			ok := true
			for _, d := range tg.Depends {
				if j, found := index[d]; found && !ready[j] {
					ok = false
				}
			}
			if ok {
				ready[i], changed = true, true
			}
		}
	}
	for i, tg := range e.Spec.Targets {
		switch {
		case out[i].Phase == scribev1.ExperimentFailed:
		case ready[i]:
			out[i].Phase = scribev1.ExperimentReady
		case out[i].ClusterReady && !componentsReady(out[i]):
			out[i].Phase = scribev1.ExperimentProvisioning
		case clusterOK[i]:
			var deps []string
			for _, d := range tg.Depends {
				if j, found := index[d]; found && !ready[j] {
					deps = append(deps, d)
				}
			}
			out[i].Phase = scribev1.ExperimentProvisioning
			out[i].Message = "cluster ready; waiting for targets " + strings.Join(deps, ", ")
		default:
			out[i].Phase = scribev1.ExperimentProvisioning
		}
	}
	return out, nil
}

// cluster reads one target's cluster: the hub is ready at once; gke and
// talos need the Cluster API Cluster ready, vcluster its HelmRelease; both
// need the kubeconfig Secret the applier uses to reach the cluster.
func (r *ExperimentReconciler) cluster(ctx context.Context, e *scribev1.Experiment, tg scribev1.Target, bundle *render.Bundle) (scribev1.TargetStatus, error) {
	ts := scribev1.TargetStatus{Name: tg.Name}
	if tg.Cluster.Type == scribev1.ClusterHub {
		ts.ClusterReady, ts.Message = true, "the hub cluster"
		return ts, nil
	}
	name := e.Name + "-" + tg.Name
	kind := "Cluster"
	if tg.Cluster.Type == scribev1.ClusterVCluster {
		kind = "HelmRelease"
	}
	var id *scribev1.ObjectIdentity
	for i := range bundle.Objects {
		if o := bundle.Objects[i]; o.Kind == kind && o.Name == name {
			id = &bundle.Objects[i]
		}
	}
	if id == nil {
		ts.Phase, ts.Message = scribev1.ExperimentFailed, fmt.Sprintf("the render has no %s %s for this %s target", kind, name, tg.Cluster.Type)
		return ts, nil
	}
	ts.KubeconfigSecret = name + kubeconfigSuffix
	v, err := r.readBack(ctx, *id)
	if err != nil {
		return ts, err
	}
	switch v.State {
	case health.Failed:
		ts.Phase, ts.Message = scribev1.ExperimentFailed, fmt.Sprintf("%s %s: %s", kind, name, v.Message)
		return ts, nil
	case health.Pending:
		ts.Message = fmt.Sprintf("%s %s: %s", kind, name, v.Message)
		return ts, nil
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Publisher.Reader.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: ts.KubeconfigSecret}, secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return ts, fmt.Errorf("get secret %s/%s: %w", e.Namespace, ts.KubeconfigSecret, err)
		}
		ts.Message = fmt.Sprintf("%s %s is ready; waiting for its kubeconfig Secret %s", kind, name, ts.KubeconfigSecret)
		return ts, nil
	}
	ts.ClusterReady, ts.Message = true, fmt.Sprintf("%s %s ready", kind, name)
	return ts, nil
}

// components reads back the applier objects that deliver the target's
// catalog components (and its observability wiring). The first failed one
// fails the target with the applier's message; while any is pending, the
// target's message says which.
func (r *ExperimentReconciler) components(ctx context.Context, e *scribev1.Experiment, tg scribev1.Target, bundle *render.Bundle, ts *scribev1.TargetStatus) error {
	names := make([]string, 0, len(tg.Components)+1)
	for _, c := range tg.Components {
		names = append(names, componentName(c))
	}
	if tg.Observability != nil && tg.Observability.Enabled {
		names = append(names, "observability")
	}
	ts.Components = nil
	var pending []string
	for _, name := range names {
		cs := scribev1.ComponentStatus{Name: name}
		id := deliveryObject(bundle, e.Name+"-"+tg.Name+"-"+name)
		if id == nil {
			cs.Message = "the render has no delivery for this component"
			ts.Components = append(ts.Components, cs)
			ts.Phase, ts.Message = scribev1.ExperimentFailed, fmt.Sprintf("component %s: %s", name, cs.Message)
			continue
		}
		cs.Delivery = subjectOf(*id)
		u, err := r.get(ctx, *id)
		if err != nil {
			return err
		}
		var src *unstructured.Unstructured
		if u != nil && id.Kind == "Kustomization" {
			if src, err = r.source(ctx, u); err != nil {
				return err
			}
		}
		v := health.Delivery(u, src)
		cs.Ready, cs.Message = v.State == health.Healthy, v.Message
		ts.Components = append(ts.Components, cs)
		switch {
		case v.State == health.Failed && ts.Phase != scribev1.ExperimentFailed:
			ts.Phase, ts.Message = scribev1.ExperimentFailed, fmt.Sprintf("component %s: %s: %s", name, cs.Delivery, v.Message)
		case v.State == health.Pending:
			pending = append(pending, fmt.Sprintf("%s (%s)", name, v.Reason))
		}
	}
	if ts.Phase != scribev1.ExperimentFailed && len(pending) > 0 {
		ts.Message = fmt.Sprintf("%s; waiting for components %s", ts.Message, strings.Join(pending, ", "))
	}
	return nil
}

// componentsReady reports that every component of the target is Ready.
func componentsReady(ts scribev1.TargetStatus) bool {
	for _, c := range ts.Components {
		if !c.Ready {
			return false
		}
	}
	return true
}

// componentName is the catalog name a component refers to.
func componentName(c scribev1.Component) string {
	switch {
	case c.App != "":
		return c.App
	case c.Workflow != "":
		return c.Workflow
	}
	return c.Config
}

// deliveryObject finds the rendered applier object (Flux Kustomization or
// HelmRelease, Argo CD Application) named name.
func deliveryObject(bundle *render.Bundle, name string) *scribev1.ObjectIdentity {
	for i := range bundle.Objects {
		o := bundle.Objects[i]
		if o.Name != name {
			continue
		}
		switch {
		case o.Kind == "Kustomization" && strings.HasPrefix(o.APIVersion, "kustomize.toolkit.fluxcd.io/"),
			o.Kind == "HelmRelease" && strings.HasPrefix(o.APIVersion, "helm.toolkit.fluxcd.io/"),
			o.Kind == "Application" && strings.HasPrefix(o.APIVersion, "argoproj.io/"):
			return &bundle.Objects[i]
		}
	}
	return nil
}

// subjectOf names an object as Kind/namespace/name.
func subjectOf(id scribev1.ObjectIdentity) string {
	if id.Namespace == "" {
		return id.Kind + "/" + id.Name
	}
	return id.Kind + "/" + id.Namespace + "/" + id.Name
}

// source reads the Flux source a Kustomization names, or nil.
func (r *ExperimentReconciler) source(ctx context.Context, ks *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	kind, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "kind")
	name, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
	ns, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "namespace")
	if kind == "" || name == "" {
		return nil, nil
	}
	if ns == "" {
		ns = ks.GetNamespace()
	}
	return r.get(ctx, scribev1.ObjectIdentity{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: kind, Namespace: ns, Name: name})
}

// readBack reads one rendered object and judges its own status; a missing
// object is Pending.
func (r *ExperimentReconciler) readBack(ctx context.Context, id scribev1.ObjectIdentity) (health.Verdict, error) {
	u, err := r.get(ctx, id)
	if err != nil {
		return health.Verdict{}, err
	}
	if u == nil {
		return health.Verdict{State: health.Pending, Reason: health.ReasonNotFound, Message: "not created yet"}, nil
	}
	return health.Object(u), nil
}

// get reads one rendered object, or nil when it does not exist or its kind
// is not installed yet (the applier installs it, or reports the failure).
func (r *ExperimentReconciler) get(ctx context.Context, id scribev1.ObjectIdentity) (*unstructured.Unstructured, error) {
	gv, err := schema.ParseGroupVersion(id.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("rendered object %s/%s: %w", id.Kind, id.Name, err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gv.WithKind(id.Kind))
	if err := r.Publisher.Client.Get(ctx, types.NamespacedName{Namespace: id.Namespace, Name: id.Name}, u); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get %s %s/%s: %w", id.Kind, id.Namespace, id.Name, err)
	}
	return u, nil
}

// run follows the validation workflow once every target is Ready.
func (r *ExperimentReconciler) run(ctx context.Context, e *scribev1.Experiment, bundle *render.Bundle) (ctrl.Result, error) {
	st := &e.Status
	wf := e.Spec.Workflow
	id := workflowObject(e, bundle)
	if wf == nil || id == nil {
		// Without a workflow the experiment is the environment itself: it is
		// complete once every target is ready.
		r.setPhase(ctx, e, scribev1.ExperimentComplete, "no workflow to run; every target is ready")
		conditions.MarkTrue(e, scribev1.ReadyCondition, ReasonSucceeded, "%s applied; every target ready; no workflow to run", shortRev(st.Revision))
		conditions.Delete(e, scribev1.ReconcilingCondition)
		conditions.Delete(e, scribev1.StalledCondition)
		return ctrl.Result{}, nil
	}
	manual := wf.Completion != nil && wf.Completion.Mode == "manual"
	if st.Workflow == nil || st.Workflow.Kind != id.Kind || st.Workflow.Name != id.Name {
		st.Workflow = &scribev1.WorkflowStatus{Kind: id.Kind, Name: id.Name}
	}
	u, err := r.get(ctx, *id)
	if err != nil {
		return ctrl.Result{}, err
	}
	if u == nil {
		st.Workflow.Phase, st.Workflow.Message = "", "not created yet"
		if manual && completeRequested(e) {
			return r.complete(ctx, e, "completed by the %s annotation", CompleteAnnotation)
		}
		conditions.MarkReconciling(e, ReasonWaitingForWorkflow, "waiting for %s %s to be created", id.Kind, id.Name)
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	v := health.Object(u)
	st.Workflow.Phase, st.Workflow.Message = enginePhase(u), v.Message

	if v.State == health.Failed {
		r.failed(ctx, e, ReasonWorkflowFailed, "%s %s failed: %s", id.Kind, id.Name, v.Message)
		return ctrl.Result{}, nil
	}
	if manual && completeRequested(e) {
		return r.complete(ctx, e, "completed by the %s annotation", CompleteAnnotation)
	}
	if v.State == health.Healthy {
		if manual {
			r.setPhase(ctx, e, scribev1.ExperimentRunning, "%s %s succeeded; waiting for the %s annotation", id.Kind, id.Name, CompleteAnnotation)
			conditions.MarkReconciling(e, ReasonWaitingForCompletion, "%s %s succeeded; waiting for the %s annotation", id.Kind, id.Name, CompleteAnnotation)
			return ctrl.Result{}, nil
		}
		return r.complete(ctx, e, "%s %s succeeded", id.Kind, id.Name)
	}
	if v.Reason != health.ReasonProgressing {
		// Applied but not picked up by its engine yet.
		conditions.MarkReconciling(e, ReasonWaitingForWorkflow, "waiting for %s %s to start: %s", id.Kind, id.Name, v.Message)
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	requeue := r.Poll
	if wf.Completion != nil && wf.Completion.Timeout != nil && wf.Completion.Timeout.Duration > 0 {
		left := wf.Completion.Timeout.Duration - time.Since(u.GetCreationTimestamp().Time)
		if left <= 0 {
			r.failed(ctx, e, ReasonWorkflowTimeout, "%s %s ran longer than %s", id.Kind, id.Name, wf.Completion.Timeout.Duration)
			return ctrl.Result{}, nil
		}
		requeue = minDuration(requeue, left)
	}
	r.setPhase(ctx, e, scribev1.ExperimentRunning, "%s %s is running", id.Kind, id.Name)
	conditions.MarkReconciling(e, ReasonWorkflowRunning, "%s %s: %s", id.Kind, id.Name, v.Message)
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func (r *ExperimentReconciler) complete(ctx context.Context, e *scribev1.Experiment, format string, args ...any) (ctrl.Result, error) {
	msg := fmt.Sprintf(format, args...)
	r.setPhase(ctx, e, scribev1.ExperimentComplete, "%s", msg)
	conditions.MarkTrue(e, scribev1.ReadyCondition, ReasonSucceeded, "%s", msg)
	conditions.Delete(e, scribev1.ReconcilingCondition)
	conditions.Delete(e, scribev1.StalledCondition)
	return ctrl.Result{}, nil
}

func completeRequested(e *scribev1.Experiment) bool {
	return e.GetAnnotations()[CompleteAnnotation] != ""
}

// workflowObject finds the validation workflow among the rendered objects:
// the Argo Workflow "<experiment>-validation-<hash>" or the Testkube
// TestWorkflowExecution. Workflow components of hub targets are deliveries
// like any other component and do not drive the phase.
func workflowObject(e *scribev1.Experiment, bundle *render.Bundle) *scribev1.ObjectIdentity {
	if e.Spec.Workflow == nil {
		return nil
	}
	for i := range bundle.Objects {
		o := bundle.Objects[i]
		switch {
		case e.Spec.Workflow.Engine == "testkube" && o.Kind == "TestWorkflowExecution":
			return &bundle.Objects[i]
		case e.Spec.Workflow.Engine != "testkube" && o.Kind == "Workflow" && strings.HasPrefix(o.APIVersion, "argoproj.io/") && strings.HasPrefix(o.Name, e.Name+"-validation-"):
			return &bundle.Objects[i]
		}
	}
	return nil
}

// enginePhase is the workflow engine's own phase: Argo's status.phase or
// Testkube's latest execution result.
func enginePhase(u *unstructured.Unstructured) string {
	if u.GetKind() == "TestWorkflowExecution" {
		s, _, _ := unstructured.NestedString(u.Object, "status", "latestExecution", "result", "status")
		return s
	}
	s, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return s
}

// failed moves the Experiment to Failed with reason and message in Ready
// and Stalled.
func (r *ExperimentReconciler) failed(ctx context.Context, e *scribev1.Experiment, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.setPhase(ctx, e, scribev1.ExperimentFailed, "%s", msg)
	conditions.MarkFalse(e, scribev1.ReadyCondition, reason, "%s", msg)
	conditions.MarkStalled(e, reason, "%s", msg)
}

// fail records err in the Experiment's conditions by the shared table.
// The phase is left as it is: nothing new was committed.
func (r *ExperimentReconciler) fail(e *scribev1.Experiment, err error) (ctrl.Result, error) {
	return fail(e, err)
}

// setPhase records a phase and, on a transition, an event.
func (r *ExperimentReconciler) setPhase(ctx context.Context, e *scribev1.Experiment, phase scribev1.ExperimentPhase, format string, args ...any) {
	if e.Status.Phase == phase {
		return
	}
	msg := fmt.Sprintf(format, args...)
	log.FromContext(ctx).Info("phase", "from", e.Status.Phase, "to", phase, "revision", e.Status.Revision, "message", msg)
	e.Status.Phase = phase
	typ := corev1.EventTypeNormal
	if phase == scribev1.ExperimentFailed {
		typ = corev1.EventTypeWarning
	}
	r.event(e, typ, string(phase), "%s", msg)
}

func (r *ExperimentReconciler) event(obj runtime.Object, typ, reason, format string, args ...any) {
	eventf(r.Events, obj, typ, reason, format, args...)
}

// resolve looks up what the render needs from the cluster: the agent's URL
// and the OTLP endpoint.
func (r *ExperimentReconciler) resolve(ctx context.Context, e *scribev1.Experiment) (render.Resolved, error) {
	var res render.Resolved
	if wf := e.Spec.Workflow; wf != nil && wf.Testkube != nil {
		ref := wf.Testkube.AgentRef
		ns := ref.Namespace
		if ns == "" {
			ns = e.Namespace
		}
		port := ref.Port
		if port == 0 {
			// Not defaulted (an object stored before the default existed):
			// the Service's first port, else 80.
			port = 80
			svc := &corev1.Service{}
			err := r.Publisher.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, svc)
			switch {
			case err == nil && len(svc.Spec.Ports) > 0:
				port = svc.Spec.Ports[0].Port
			case err != nil && !apierrors.IsNotFound(err):
				return res, fmt.Errorf("get agent service %s/%s: %w", ns, ref.Name, err)
			}
		}
		res.AgentURL = fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", ref.Name, ns, port)
	}
	cm := &corev1.ConfigMap{}
	err := r.Publisher.Reader.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: OTELConfigMapName}, cm)
	switch {
	case err == nil:
		res.OTELEndpoint = strings.TrimSpace(cm.Data[OTELEndpointKey])
	case !apierrors.IsNotFound(err):
		return res, fmt.Errorf("get configmap %s/%s: %w", e.Namespace, OTELConfigMapName, err)
	}
	return res, nil
}

func (r *ExperimentReconciler) render(ctx context.Context, e *scribev1.Experiment, t *Target, resolved render.Resolved) (*render.Bundle, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
	if err != nil {
		return nil, fmt.Errorf("convert experiment: %w", err)
	}
	u["apiVersion"], u["kind"] = scribev1.GroupVersion.String(), scribev1.ExperimentKind
	delete(u, "status")
	md, _ := u["metadata"].(map[string]any)
	m := map[string]any{"name": md["name"], "namespace": md["namespace"], "generation": md["generation"]}
	if l, ok := md["labels"].(map[string]any); ok && len(l) > 0 {
		m["labels"] = l
	}
	u["metadata"] = m
	b, err := r.Publisher.Render(ctx, t, u, resolved)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return b, nil
}

// finalize commits the Experiment's removal and releases the finalizer
// once the applier has pruned it. The phase enum has no Deleting:
// Reconciling=Pruning records that the removal is committed.
func (r *ExperimentReconciler) finalize(ctx context.Context, e *scribev1.Experiment) (ctrl.Result, error) {
	return r.Publisher.finalize(ctx, removal{
		obj: e, kind: scribev1.ExperimentKind, repo: e.Spec.RepositoryRef, generated: e.Status.GeneratedResources,
		committed: conditions.GetReason(e, scribev1.ReconcilingCondition) == ReasonPruning,
		record:    func(commit string) { e.Status.Revision = commit },
		event:     func(typ, reason, format string, args ...any) { r.event(e, typ, reason, format, args...) },
		poll:      r.Poll,
	})
}
