package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/render"
	"github.com/scribe-gitops/scribe/render/contract"
)

// What an Experiment's reconciler reads back of a commit: the targets'
// clusters and components, the workflow templates' deliveries, the
// validation run and the workflow components' runs, each as the render's
// read-back names it.

// readRun reads one workflow run; one not created yet is not Found.
func (r *ExperimentReconciler) readRun(ctx context.Context, id scribev1.ObjectIdentity) (*WorkflowRun, error) {
	u, err := r.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return &WorkflowRun{}, nil
	}
	return &WorkflowRun{Found: true, Verdict: health.Object(u), Phase: enginePhase(u), Created: u.GetCreationTimestamp().Time}, nil
}

// runsOf are the workflow components' Workflows the render's read-back
// names.
func runsOf(b *render.Bundle) []ComponentRunRef {
	out := make([]ComponentRunRef, 0, len(b.ReadBack.Runs))
	for _, rr := range b.ReadBack.Runs {
		out = append(out, ComponentRunRef{Target: rr.Target, Component: rr.Component, ID: rr.Workflow.Identity()})
	}
	return out
}

// targets reads back every target's cluster. A target is Ready when its
// cluster is and every target it depends on is Ready.
func (r *ExperimentReconciler) targets(ctx context.Context, e *scribev1.Experiment, t *Target, bundle *render.Bundle) ([]scribev1.TargetStatus, error) {
	out := make([]scribev1.TargetStatus, len(e.Spec.Targets))
	clusterOK := make([]bool, len(e.Spec.Targets))
	index := make(map[string]int, len(e.Spec.Targets))
	readBack := make(map[string]contract.TargetReadBack, len(bundle.ReadBack.Targets))
	for _, rb := range bundle.ReadBack.Targets {
		readBack[rb.Name] = rb
	}
	named := render.AddressesNamed(e)
	for i, tg := range e.Spec.Targets {
		index[tg.Name] = i
		rb, ok := readBack[tg.Name]
		if !ok {
			out[i] = scribev1.TargetStatus{Name: tg.Name, Phase: scribev1.ExperimentFailed, Message: "the render names nothing to read back for this target"}
			continue
		}
		ts, kc, err := r.cluster(ctx, e, t, bundle, tg, rb)
		if err != nil {
			return nil, err
		}
		if ts.ClusterReady {
			if err := r.components(ctx, rb, &ts); err != nil {
				return nil, err
			}
			// A target whose components are not ready yet: is its
			// cluster there at all?
			if kc != nil && !componentsReady(ts) {
				err := reach(ctx, *kc)
				if err == nil && wasUnreachable(e, tg.Name) {
					// Back: its deliveries retry now, not at their
					// next interval.
					r.retryDeliveries(ctx, e, rb)
				}
				if err != nil {
					// What its deliveries report failed is the cluster's
					// absence: not a failure of theirs.
					ts.Phase, ts.Reason = scribev1.ExperimentProvisioning, ReasonTargetUnreachable
					ts.Message = fmt.Sprintf("its cluster's API server %s (kubeconfig Secret %s) does not answer: %v", kc.Server, ts.KubeconfigSecret, err)
				}
			}
		}
		addressOK := true
		// The address last read stays while its components are not ready
		// (an applier re-applying them at a later stage) or it cannot be
		// read: the workflows' params are rendered from it.
		ts.Address = previousTarget(e, tg.Name).Address
		if ts.ClusterReady && componentsReady(ts) && len(rb.Addressable) > 0 && (tg.Cluster.Type == scribev1.ClusterHub || kc != nil) {
			addr, err := r.targetAddress(ctx, kc, rb.Addressable)
			if err != nil {
				log.FromContext(ctx).Info("target address", "experiment", client.ObjectKeyFromObject(e), "target", tg.Name, "error", err.Error())
			} else {
				ts.Address = addr
			}
		}
		if named[tg.Name] && len(rb.Components) > 0 && ts.ClusterReady && componentsReady(ts) && ts.Address == "" {
			// A workflow param names its address: once its components
			// are committed (stage 2 on), the workflows wait for it.
			addressOK = false
			ts.Message = fmt.Sprintf("%s; waiting for its address, which the workflow params name: %s", ts.Message, addressableList(rb.Addressable))
		}
		out[i] = ts
		clusterOK[i] = ts.ClusterReady && ts.Phase != scribev1.ExperimentFailed && componentsReady(ts) && addressOK
	}
	if t.Applier.Kind() == scribev1.ApplierArgoCD {
		// The registrations of targets the spec no longer has go.
		keep := map[string]bool{}
		for _, rb := range bundle.ReadBack.Targets {
			keep[rb.Name] = rb.ArgoCDCluster != ""
		}
		if err := r.unregisterArgoClusters(ctx, t.Repo.Spec.Applier.Namespace, client.ObjectKeyFromObject(e), keep); err != nil {
			return nil, err
		}
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

// cluster reads one target's cluster, as the render's read-back names it:
// the hub is ready at once; gke and talos need the Cluster API Cluster
// ready, vcluster its HelmRelease; both need the kubeconfig Secret the
// applier uses to reach the cluster.
func (r *ExperimentReconciler) cluster(ctx context.Context, e *scribev1.Experiment, t *Target, bundle *render.Bundle, tg scribev1.Target, rb contract.TargetReadBack) (scribev1.TargetStatus, *remoteKubeconfig, error) {
	ts := scribev1.TargetStatus{Name: tg.Name}
	if tg.Cluster.Type == scribev1.ClusterHub {
		ts.ClusterReady, ts.Message = true, "the hub cluster"
		return ts, nil, nil
	}
	if rb.Cluster == nil {
		ts.Phase, ts.Message = scribev1.ExperimentFailed, fmt.Sprintf("the render names no cluster object for this %s target", tg.Cluster.Type)
		return ts, nil, nil
	}
	id := rb.Cluster.Identity()
	ts.KubeconfigSecret = rb.KubeconfigSecret
	v, err := r.readBack(ctx, id)
	if err != nil {
		return ts, nil, err
	}
	switch v.State {
	case health.Failed:
		ts.Phase, ts.Message = scribev1.ExperimentFailed, fmt.Sprintf("%s %s: %s", id.Kind, id.Name, v.Message)
		return ts, nil, nil
	case health.Pending:
		ts.Message = fmt.Sprintf("%s %s: %s", id.Kind, id.Name, v.Message)
		return ts, nil, nil
	}
	if ts.KubeconfigSecret == "" {
		ts.ClusterReady, ts.Message = true, fmt.Sprintf("%s %s ready", id.Kind, id.Name)
		return ts, nil, nil
	}
	secret := &corev1.Secret{}
	if err := r.Publisher.Reader.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: ts.KubeconfigSecret}, secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return ts, nil, fmt.Errorf("get secret %s/%s: %w", e.Namespace, ts.KubeconfigSecret, err)
		}
		ts.Message = fmt.Sprintf("%s %s is ready; waiting for its kubeconfig Secret %s", id.Kind, id.Name, ts.KubeconfigSecret)
		return ts, nil, nil
	}
	kc, perr := parseRemoteKubeconfig(secret.Data[rb.KubeconfigKey])
	if _, ok := secret.Data[rb.KubeconfigKey]; !ok {
		perr = fmt.Errorf("it has no key %q", rb.KubeconfigKey)
	}
	if rb.ArgoCDCluster != "" {
		// Argo CD reaches the cluster through its registration, which
		// the controller writes from the kubeconfig: the cluster is
		// ready for Argo CD once it is registered.
		if perr != nil {
			ts.Reason, ts.Message = ReasonKubeconfigUnusable, fmt.Sprintf("%s %s is ready; its kubeconfig Secret %s cannot register it with Argo CD: %v", id.Kind, id.Name, ts.KubeconfigSecret, perr)
			return ts, nil, nil
		}
		reg, err := argoClusterSecret(t.Repo.Spec.Applier.Namespace, rb.ArgoCDCluster, bundle.Sync.Name, client.ObjectKeyFromObject(e), tg.Name, kc)
		if err != nil {
			return ts, nil, err
		}
		switch err := r.registerArgoCluster(ctx, reg, client.ObjectKeyFromObject(e), tg.Name); {
		case errors.Is(err, errRegistrationNotPermitted):
			// The platform registers it; Argo CD says when it has not
			// (DestinationNotRegistered on the Applications).
			log.FromContext(ctx).V(1).Info("Argo CD cluster registration left to the platform", "experiment", client.ObjectKeyFromObject(e), "target", tg.Name, "cluster", rb.ArgoCDCluster)
		case err != nil:
			ts.Reason, ts.Message = ReasonClusterNotRegistered, fmt.Sprintf("%s %s is ready; registering it with Argo CD as %q: %v", id.Kind, id.Name, rb.ArgoCDCluster, err)
			return ts, nil, nil
		}
	}
	ts.ClusterReady, ts.Message = true, fmt.Sprintf("%s %s ready", id.Kind, id.Name)
	if perr != nil {
		// Flux reads the kubeconfig itself (it may use what the
		// controller refuses): no reachability check then.
		return ts, nil, nil
	}
	return ts, &kc, nil
}

// components reads back the applier objects that deliver the target's
// catalog components (and its observability wiring), as the render's
// read-back names them. The first failed one fails the target with the
// applier's message; while any is pending, the target's message says which.
func (r *ExperimentReconciler) components(ctx context.Context, rb contract.TargetReadBack, ts *scribev1.TargetStatus) error {
	statuses, failed, pending, err := r.deliveries(ctx, rb.Components)
	if err != nil {
		return err
	}
	ts.Components = statuses
	switch {
	case failed != "":
		ts.Phase, ts.Message = scribev1.ExperimentFailed, failed
	case len(pending) > 0:
		ts.Message = fmt.Sprintf("%s; waiting for components %s", ts.Message, strings.Join(pending, ", "))
	}
	return nil
}

// deliveries reads back the applier objects that deliver components (a
// target's, or the workflow templates): their statuses, the first
// failure ("component <name>: <delivery>: <message>"), and those pending
// as "<name> (<reason>)".
func (r *ExperimentReconciler) deliveries(ctx context.Context, comps []contract.ComponentReadBack) ([]scribev1.ComponentStatus, string, []string, error) {
	var (
		out     []scribev1.ComponentStatus
		failed  string
		pending []string
	)
	for _, c := range comps {
		cs := scribev1.ComponentStatus{Name: c.Name}
		if c.Delivery == nil {
			cs.Message = "the render has no delivery for this component"
			out = append(out, cs)
			if failed == "" {
				failed = fmt.Sprintf("component %s: %s", c.Name, cs.Message)
			}
			continue
		}
		id := c.Delivery.Identity()
		cs.Delivery = subjectOf(id)
		u, err := r.get(ctx, id)
		if err != nil {
			return nil, "", nil, err
		}
		var src *unstructured.Unstructured
		if u != nil && id.Kind == "Kustomization" {
			if src, err = r.source(ctx, u); err != nil {
				return nil, "", nil, err
			}
		}
		v := health.Delivery(u, src)
		cs.Ready, cs.Message = v.State == health.Healthy, v.Message
		if v.State == health.Pending && v.Reason == meta.DependencyNotReadyReason {
			r.requestDependentReconcile(ctx, u, src)
		}
		out = append(out, cs)
		switch {
		case v.State == health.Failed && failed == "":
			failed = fmt.Sprintf("component %s: %s: %s", c.Name, cs.Delivery, v.Message)
		case v.State == health.Pending:
			pending = append(pending, fmt.Sprintf("%s (%s)", c.Name, v.Reason))
		}
	}
	return out, failed, pending, nil
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

// subjectOf names an object as Kind/namespace/name.
func subjectOf(id scribev1.ObjectIdentity) string {
	if id.Namespace == "" {
		return id.Kind + "/" + id.Name
	}
	return id.Kind + "/" + id.Namespace + "/" + id.Name
}

// source reads the Flux source a Kustomization names, or nil.
func (r *ExperimentReconciler) source(ctx context.Context, ks *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ref := sourceRefOf(ks)
	if ref.Kind == "" || ref.Name == "" {
		return nil, nil
	}
	return r.get(ctx, scribev1.ObjectIdentity{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name})
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

// workflowOf is the validation run the render's read-back names, or nil.
// Workflow components of hub targets are deliveries like any other
// component and do not drive the phase.
func workflowOf(b *render.Bundle) *scribev1.ObjectIdentity {
	if b.ReadBack.Workflow == nil {
		return nil
	}
	id := b.ReadBack.Workflow.Identity()
	return &id
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

// previousTarget is the target's status as last recorded.
func previousTarget(e *scribev1.Experiment, target string) scribev1.TargetStatus {
	for _, ts := range e.Status.Targets {
		if ts.Name == target {
			return ts
		}
	}
	return scribev1.TargetStatus{}
}

// wasUnreachable says the Experiment's status last found the target's
// cluster unreachable.
func wasUnreachable(e *scribev1.Experiment, target string) bool {
	return previousTarget(e, target).Reason == ReasonTargetUnreachable
}

// retryDeliveries asks the applier objects that deliver the target's
// components to reconcile now: a Flux Kustomization by its
// reconcile.fluxcd.io/requestedAt, an Argo CD Application by a refresh.
// A failure is only logged: they retry at their interval anyway.
func (r *ExperimentReconciler) retryDeliveries(ctx context.Context, e *scribev1.Experiment, rb contract.TargetReadBack) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for _, c := range rb.Components {
		if c.Delivery == nil {
			continue
		}
		id := c.Delivery.Identity()
		key, value := RequestedAtAnnotation, now
		if id.Kind == "Application" {
			key, value = ArgoRefreshAnnotation, "normal"
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(id.APIVersion)
		u.SetKind(id.Kind)
		u.SetNamespace(id.Namespace)
		u.SetName(id.Name)
		if err := annotate(ctx, r.Publisher.Client, u, key, value); err != nil {
			log.FromContext(ctx).Info("retry delivery", "experiment", client.ObjectKeyFromObject(e), "target", rb.Name, "error", err.Error())
		}
	}
}

// addressableList names the objects that may report a target's address.
func addressableList(ids []scribev1.ObjectIdentity) string {
	if len(ids) == 0 {
		return "none of its components delivers a Gateway, a Service of type LoadBalancer or an Ingress"
	}
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.Kind + " " + id.Namespace + "/" + id.Name
	}
	return "none of " + strings.Join(names, ", ") + " reports one yet"
}
