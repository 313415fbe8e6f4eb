package controller

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

	// OTELConfigMapName is the ConfigMap, in the Experiment's namespace,
	// whose OTELEndpointKey gives the hub collector's OTLP address targets
	// export to and OTELMetricsURLKey the hub metrics backend's query URL,
	// where the Experiment's spec.observability does not. Without either,
	// render refuses a target with observability enabled: there is no
	// default address.
	OTELConfigMapName = "otel-config"
	// OTELEndpointKey is the key of the endpoint in OTELConfigMapName.
	OTELEndpointKey = "endpoint"
	// OTELMetricsURLKey is the key of the metrics URL in OTELConfigMapName.
	OTELMetricsURLKey = "metricsURL"
)

// ExperimentReconciler commits Experiments in stages and walks their
// phases Pending → Provisioning → Ready → Running → Complete | Failed.
// Each stage is its own commit (or pull request), made only on what was
// read back of the previous one: 1 the clusters; 2 the components, once
// every cluster is ready; 3 the workflow templates' deliveries, once every
// target is; 4 the runs, once every template is delivered. Then the runs'
// status completes or fails it. It never writes any of the objects it
// reads back.
type ExperimentReconciler struct {
	Publisher *Publisher
	Events    events.EventRecorder
	// Poll is how often the read-back objects are re-read while waiting.
	Poll time.Duration
	// WatchedPoll is how often the runs a rendered TestTrigger starts are
	// read from Testkube's API when nothing else brings the Experiment
	// back (no object in the cluster changes when the trigger starts a
	// run). 0: only on watch events.
	WatchedPoll time.Duration
	// TestkubeAPI is the address of Testkube's agent API, where the runs
	// a TestTrigger starts are read (DefaultTestkubeAPIURL when empty);
	// TestkubeClient reads it (NewTestkubeHTTPClient when nil).
	TestkubeAPI    string
	TestkubeClient *http.Client
}

// +kubebuilder:rbac:groups=scribe.dev,resources=experiments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=scribe.dev,resources=experiments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=scribe.dev,resources=experiments/finalizers,verbs=update
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;watch
// +kubebuilder:rbac:groups=argoproj.io,resources=workflows,verbs=get;list;watch
// +kubebuilder:rbac:groups=testworkflows.testkube.io,resources=testworkflowexecutions,verbs=get;list;watch
// +kubebuilder:rbac:groups=testworkflows.testkube.io,resources=testworkflows,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler.
func (r *ExperimentReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int, pred predicate.Predicate) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&scribev1.Experiment{}, finalizerPredicates(pred)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency})
	b = watchRepositoryChanges(b, mgr.GetClient(), func() client.ObjectList { return &scribev1.ExperimentList{} }, pred)
	// Read-back is watched where the kind is installed, so a phase moves as
	// soon as Flux, Argo CD, Cluster API or the workflow engine reports, not
	// at the next poll: the per-CR sync object carries render's
	// scribe.dev/{kind,namespace,name} labels, and every object rendered for
	// an Experiment scribe.dev/experiment, and those rendered outside the
	// Experiment's namespace (the Testkube objects, in Testkube's)
	// scribe.dev/namespace as well. Kustomizations share the Workload
	// controller's informer; the other kinds are watched as metadata only.
	owner := handler.EnqueueRequestsFromMapFunc(experimentOwner)
	if kustomizationsInstalled(mgr) {
		b = b.Watches(&kustomizev1.Kustomization{}, owner)
	}
	for _, gk := range []schema.GroupKind{
		{Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease"},
		{Group: "argoproj.io", Kind: "Application"},
		{Group: "cluster.x-k8s.io", Kind: "Cluster"},
		{Group: "argoproj.io", Kind: "Workflow"},
		{Group: "testworkflows.testkube.io", Kind: "TestWorkflowExecution"},
		// The evaluation's TestWorkflow: Testkube records every execution
		// of it, those its TestTrigger starts too, in its status.
		{Group: "testworkflows.testkube.io", Kind: "TestWorkflow"},
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

// experimentOwner maps a read-back object to its Experiment: a sync object
// by its scribe.dev/{kind,namespace,name} labels, any other rendered object
// by scribe.dev/experiment, in the namespace scribe.dev/namespace names
// (an object rendered into another namespace: Testkube's) or else its own.
func experimentOwner(ctx context.Context, o client.Object) []reconcile.Request {
	if reqs := syncOwner(scribev1.ExperimentKind)(ctx, o); len(reqs) > 0 {
		return reqs
	}
	l := o.GetLabels()
	name := l["scribe.dev/experiment"]
	if name == "" {
		return nil
	}
	ns := l["scribe.dev/namespace"]
	if ns == "" {
		ns = o.GetNamespace()
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// Reconcile moves one Experiment along its phases as far as the evidence
// read back allows.
func (r *ExperimentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return lifecycle[*scribev1.Experiment]{
		kind: scribev1.ExperimentKind, finalize: r.finalize, gone: r.gone, reconcile: r.reconcile,
		suspended: func(o *scribev1.Experiment) bool { return o.Spec.Suspend }, saved: r.Publisher.Metrics.Observe,
	}.run(ctx, r.Publisher.Client, req, &scribev1.Experiment{})
}

// gone removes what was committed of a Experiment that went without its
// finalize (RemoveIfGone).
func (r *ExperimentReconciler) gone(ctx context.Context, key types.NamespacedName) (ctrl.Result, error) {
	return r.Publisher.RemoveIfGone(ctx, scribev1.ExperimentKind, key)
}

// reconcile renders the Experiment into one commit and follows what is read
// back of it.
func (r *ExperimentReconciler) reconcile(ctx context.Context, e *scribev1.Experiment, patcher *statusPatcher) (ctrl.Result, error) {
	st := &e.Status
	observed := st.ObservedGeneration
	st.ObservedGeneration = e.Generation
	triggered := r.triggeredRun(ctx, e)
	res, err := r.progress(ctx, e, patcher, observed != e.Generation)
	if triggered && err == nil && r.WatchedPoll > 0 && (res.RequeueAfter == 0 || res.RequeueAfter > r.WatchedPoll) {
		res.RequeueAfter = r.WatchedPoll
	}
	return res, err
}

// triggeredRun records the last run the TestTrigger of the last render
// started (DecideTriggeredRun), whatever the phase, a Complete Experiment's
// too, and emits its Events; it reports whether the render has a
// TestTrigger to follow. The runs are read from Testkube's API: when it
// cannot be read, a Warning names its address and the record stays as it
// is; the Experiment's own phase goes on.
func (r *ExperimentReconciler) triggeredRun(ctx context.Context, e *scribev1.Experiment) bool {
	workflow, trigger := triggeredWorkflow(e.Status.GeneratedResources)
	if workflow == nil {
		return false
	}
	api, c := r.TestkubeAPI, r.TestkubeClient
	if api == "" {
		api = DefaultTestkubeAPIURL
	}
	if c == nil {
		c = NewTestkubeHTTPClient()
	}
	res, err := fetchTestkubeExecutions(ctx, c, api, workflow.Name)
	if err != nil {
		msg := fmt.Sprintf("runs of TestWorkflow %s/%s not read from Testkube's API (--testkube-api-url): %v", workflow.Namespace, workflow.Name, err)
		log.FromContext(ctx).Info("triggered run", "reason", ReasonTriggeredRunsUnread, "message", msg)
		r.event(e, corev1.EventTypeWarning, ReasonTriggeredRunsUnread, "%s", msg)
		return true
	}
	execs := triggeredExecutions(res, *workflow, trigger.Name, r.ownExecutionNumber(ctx, e))
	run, evs := DecideTriggeredRun(e.Status.LastTriggeredRun, execs)
	e.Status.LastTriggeredRun = run
	for _, ev := range evs {
		log.FromContext(ctx).Info("triggered run", "reason", ev.Reason, "message", ev.Message)
		r.event(e, ev.Type, ev.Reason, "%s", ev.Message)
	}
	return true
}

// ownExecutionNumber is the number of the Experiment's own execution, as
// its TestWorkflowExecution's status.latestExecution.number records it;
// 0 when not known.
func (r *ExperimentReconciler) ownExecutionNumber(ctx context.Context, e *scribev1.Experiment) int32 {
	for _, o := range e.Status.GeneratedResources.Objects {
		if o.Kind != "TestWorkflowExecution" {
			continue
		}
		u, err := r.get(ctx, o)
		if err != nil || u == nil {
			return 0
		}
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "latestExecution", "number")
		return int32(n)
	}
	return 0
}

// progress walks the Experiment's stages: DecideExperiment (stages.go)
// decides, and progress carries out each action it asks for, records what
// it saw and asks again, until the decision is to wait.
func (r *ExperimentReconciler) progress(ctx context.Context, e *scribev1.Experiment, patcher *statusPatcher, newGeneration bool) (ctrl.Result, error) {
	obs := ExperimentObservations{Poll: r.Poll, NewGeneration: newGeneration, CompleteRequested: completeRequested(e)}
	src := scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: scribev1.ExperimentKind, Namespace: e.Namespace, Name: e.Name}
	var (
		t      *Target
		bundle *render.Bundle
	)
	for range maxExperimentDecisions {
		from := e.Status.Phase
		st, act := DecideExperiment(&e.Spec, e.Status, obs, time.Now())
		// A new generation is acted on by the first decision (saved with
		// the intent it makes).
		obs.NewGeneration = false
		e.Status = st
		for _, ev := range act.Events {
			if ev.Reason == ReasonStageCommitted || strings.HasPrefix(ev.Reason, "PullRequest") {
				log.FromContext(ctx).Info("stage", "stage", st.Stage, "revision", st.Revision, "message", ev.Message)
			} else {
				log.FromContext(ctx).Info("phase", "from", from, "to", ev.Reason, "stage", st.Stage, "revision", st.Revision, "message", ev.Message)
				from = scribev1.ExperimentPhase(ev.Reason)
			}
			r.event(e, ev.Type, ev.Reason, "%s", ev.Message)
		}
		applyMarks(e, act.Marks)
		if act.SaveIntent {
			if err := r.patch(ctx, patcher, e); err != nil {
				return ctrl.Result{}, fmt.Errorf("save the intent of experiment %s/%s: %w", e.Namespace, e.Name, err)
			}
		}
		switch act.Kind {
		case ExperimentRender:
			var err error
			if t == nil {
				if t, err = r.Publisher.Target(ctx, e.Namespace, e.Spec.RepositoryRef, true); err != nil {
					return r.fail(e, err)
				}
				if t.Engine, err = r.Publisher.EngineFor(ctx, t); err != nil {
					return r.fail(e, err)
				}
			}
			resolved, err := r.resolve(ctx, e)
			if err != nil {
				return r.fail(e, &reasonError{reason: ReasonResolveFailed, err: err})
			}
			if bundle, err = r.render(ctx, e, t, resolved, st.Stage, true); err != nil {
				return r.fail(e, err)
			}
			// What follows a render is observed afresh.
			obs = ExperimentObservations{
				Poll: obs.Poll, CompleteRequested: obs.CompleteRequested, PullRequests: t.PullRequests(),
				Rendered: &Rendered{Digest: bundle.Digest, Generated: generated(t, bundle)}, RenderedStage: st.Stage,
				Workflow: workflowOf(bundle), Runs: runsOf(bundle),
			}
		case ExperimentConfirmIntent, ExperimentCommit, ExperimentPropose, ExperimentReadPullRequest:
			if (act.Kind == ExperimentCommit || act.Kind == ExperimentPropose) && bundle.Files == nil {
				// A summary from the memo: the commit needs the files.
				resolved, err := r.resolve(ctx, e)
				if err != nil {
					return r.fail(e, &reasonError{reason: ReasonResolveFailed, err: err})
				}
				if bundle, err = r.render(ctx, e, t, resolved, obs.RenderedStage, false); err != nil {
					return r.fail(e, err)
				}
			}
			job := deliveryJob{Target: t, Source: src, UID: e.UID, ResourceVersion: e.ResourceVersion, Written: patcher.Written(), Change: r.change(e, bundle), Sync: bundle.Sync, Head: headOf(st.PullRequest)}
			if act.Kind == ExperimentPropose {
				job.Evidence = stageEvidence(e)
			}
			d, err := r.Publisher.deliver(ctx, DeliveryStepKind(act.Kind), job)
			if err != nil {
				return r.fail(e, err)
			}
			switch act.Kind {
			case ExperimentCommit:
				obs.Commit = d.Result.Commit
				log.FromContext(ctx).Info("published", "stage", st.Stage, "revision", d.Result.Revision, "changed", d.Result.Changed, "digest", bundle.Digest)
			case ExperimentConfirmIntent:
				obs.Current = d.Current
			case ExperimentPropose:
				obs.Proposed = d.Proposed
			default:
				obs.PullRequest = d.PullRequest
			}
		case ExperimentReadTargets:
			verdict, err := r.Publisher.Applied(ctx, t, bundle.Source, bundle.Sync, st.Revision)
			if err != nil {
				return ctrl.Result{}, fmt.Errorf("read applier status of %s: %w", shortRev(st.Revision), err)
			}
			targets, err := r.targets(ctx, e, t, bundle)
			if err != nil {
				return ctrl.Result{}, err
			}
			rb := &TargetsReadBack{Applier: verdict, Targets: targets}
			if verdict.State == health.Healthy {
				r.Publisher.ObserveApplied(scribev1.ExperimentKind, st.Revision)
			}
			var failed string
			if rb.Templates, failed, _, err = r.deliveries(ctx, bundle.ReadBack.Templates); err != nil {
				return ctrl.Result{}, err
			}
			rb.TemplatesFailed = failed != ""
			obs.Targets = rb
		case ExperimentReadWorkflow:
			obs.Run = &WorkflowRun{}
			if obs.Workflow != nil {
				run, err := r.readRun(ctx, *obs.Workflow)
				if err != nil {
					return ctrl.Result{}, err
				}
				obs.Run = run
			}
			obs.ComponentRuns = make([]WorkflowRun, len(obs.Runs))
			for i, ref := range obs.Runs {
				cr, err := r.readRun(ctx, ref.ID)
				if err != nil {
					return ctrl.Result{}, err
				}
				obs.ComponentRuns[i] = *cr
			}
		default:
			return ctrl.Result{RequeueAfter: act.Requeue}, nil
		}
	}
	return ctrl.Result{}, fmt.Errorf("experiment %s/%s: no decision after %d observations", e.Namespace, e.Name, maxExperimentDecisions)
}

// change is the commit of the Experiment's current stage: its message
// says which stage and on what evidence.
func (r *ExperimentReconciler) change(e *scribev1.Experiment, bundle *render.Bundle) publish.Change {
	c := publish.ChangeFor(bundle)
	c.Reason = stageEvidence(e)
	return c
}

// stageEvidence says which stage a commit carries and what the previous
// stage showed.
func stageEvidence(e *scribev1.Experiment) string {
	st := e.Status
	if st.Stage <= scribev1.StageClusters {
		return fmt.Sprintf("Experiment %s of 4: the target clusters.", stageName(st.Stage))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Experiment %s of 4, on the evidence of %s:", stageName(st.Stage), stageName(st.Stage-1))
	for _, ts := range st.Targets {
		fmt.Fprintf(&b, "\n- target %s: %s", ts.Name, ts.Phase)
		if ts.Message != "" {
			fmt.Fprintf(&b, " (%s)", ts.Message)
		}
	}
	for _, c := range st.Templates {
		fmt.Fprintf(&b, "\n- workflow template %s: ready=%t", c.Name, c.Ready)
	}
	return b.String()
}

// patch writes metadata and status now, owning Scribe's conditions.
func (r *ExperimentReconciler) patch(ctx context.Context, patcher *statusPatcher, e *scribev1.Experiment) error {
	return patchObject(ctx, patcher, e)
}

func completeRequested(e *scribev1.Experiment) bool {
	return e.GetAnnotations()[CompleteAnnotation] != ""
}

// fail records err in the Experiment's conditions by the shared table.
// The phase is left as it is: nothing new was committed.
func (r *ExperimentReconciler) fail(e *scribev1.Experiment, err error) (ctrl.Result, error) {
	return fail(e, err)
}

func (r *ExperimentReconciler) event(obj runtime.Object, typ, reason, format string, args ...any) {
	eventf(r.Events, obj, typ, reason, format, args...)
}

// resolve looks up what the render needs from the cluster: the hub's
// OTLP endpoint and metrics URL.
func (r *ExperimentReconciler) resolve(ctx context.Context, e *scribev1.Experiment) (render.Resolved, error) {
	var res render.Resolved
	cm := &corev1.ConfigMap{}
	err := r.Publisher.Reader.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: OTELConfigMapName}, cm)
	switch {
	case err == nil:
		res.OTELEndpoint = strings.TrimSpace(cm.Data[OTELEndpointKey])
		res.MetricsURL = strings.TrimSpace(cm.Data[OTELMetricsURLKey])
	case !apierrors.IsNotFound(err):
		return res, fmt.Errorf("get configmap %s/%s: %w", e.Namespace, OTELConfigMapName, err)
	}
	// The targets' addresses as last read back, for the workflow params
	// that name them.
	for _, ts := range e.Status.Targets {
		if ts.Address != "" {
			if res.TargetAddresses == nil {
				res.TargetAddresses = map[string]string{}
			}
			res.TargetAddresses[ts.Name] = ts.Address
		}
	}
	return res, nil
}

// render renders stage of the Experiment; with summary, a render of the
// same input seen last comes from the memo, without files.
func (r *ExperimentReconciler) render(ctx context.Context, e *scribev1.Experiment, t *Target, resolved render.Resolved, stage int32, summary bool) (*render.Bundle, error) {
	b, err := r.Publisher.RenderExperiment(ctx, t, render.ExperimentInput{Experiment: e, Resolved: resolved, Stage: stage}, summary)
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
		released: func(ctx context.Context, t *Target) error {
			if t.Applier.Kind() != scribev1.ApplierArgoCD {
				return nil
			}
			return r.unregisterArgoClusters(ctx, t.Repo.Spec.Applier.Namespace, client.ObjectKeyFromObject(e), nil)
		},
	})
}
