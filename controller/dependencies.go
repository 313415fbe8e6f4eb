package controller

import (
	"context"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
)

// A Flux Kustomization whose dependsOn is not ready is requeued after
// kustomize-controller's --requeue-dependency (30 s by default), and a
// dependency that shares its source counts only once it has applied the
// source's newest revision: every commit of an Experiment's stages made
// each dependent component wait about 30 s after its dependencies were
// ready. When the read-back finds a component waiting on dependencies that
// are all ready, it asks kustomize-controller to reconcile it now, as
// `flux reconcile` would.

// dependencyRef is one entry of a Kustomization's spec.dependsOn.
type dependencyRef struct{ Namespace, Name string }

// dependenciesOf lists ks's spec.dependsOn, the namespace defaulting to
// ks's own.
func dependenciesOf(ks *unstructured.Unstructured) []dependencyRef {
	list, _, _ := unstructured.NestedSlice(ks.Object, "spec", "dependsOn")
	var out []dependencyRef
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		ns, _ := m["namespace"].(string)
		if ns == "" {
			ns = ks.GetNamespace()
		}
		if name != "" {
			out = append(out, dependencyRef{Namespace: ns, Name: name})
		}
	}
	return out
}

// decideDependencyRequest reports whether to ask kustomize-controller to
// reconcile ks now: its delivery verdict (health.Delivery) is
// DependencyNotReady, no reconcile it was asked for is still unhandled,
// and every dependency (deps, by dependsOn entry; nil when missing) is as
// kustomize-controller requires it: Ready for its generation and, when it
// reads the same source as ks, applied at the revision of src's artifact
// (src nil: unknown, so no such dependency counts).
func decideDependencyRequest(ks, src *unstructured.Unstructured, deps map[dependencyRef]*unstructured.Unstructured) bool {
	if ks == nil || len(deps) == 0 {
		return false
	}
	if v := health.Delivery(ks, src); v.State != health.Pending || v.Reason != meta.DependencyNotReadyReason {
		return false
	}
	requested := ks.GetAnnotations()[meta.ReconcileRequestAnnotation]
	handled, _, _ := unstructured.NestedString(ks.Object, "status", "lastHandledReconcileAt")
	if requested != "" && requested != handled {
		return false // asked already; kustomize-controller has not got to it
	}
	var revision string
	if src != nil {
		revision, _, _ = unstructured.NestedString(src.Object, "status", "artifact", "revision")
	}
	for _, ref := range dependenciesOf(ks) {
		dep := deps[ref]
		if dep == nil || health.Delivery(dep, nil).State != health.Healthy {
			return false
		}
		if sameSource(ks, dep) {
			applied, _, _ := unstructured.NestedString(dep.Object, "status", "lastAppliedRevision")
			if revision == "" || applied != revision {
				return false
			}
		}
	}
	return true
}

// sameSource reports whether two Kustomizations read one source.
func sameSource(a, b *unstructured.Unstructured) bool {
	return sourceRefOf(a) == sourceRefOf(b)
}

// sourceRef is the Flux source a Kustomization's spec.sourceRef names.
type sourceRef struct{ Kind, Namespace, Name string }

// sourceRefOf reads ks's spec.sourceRef, its namespace defaulting to ks's.
func sourceRefOf(ks *unstructured.Unstructured) (ref sourceRef) {
	ref.Kind, _, _ = unstructured.NestedString(ks.Object, "spec", "sourceRef", "kind")
	ref.Name, _, _ = unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
	ref.Namespace, _, _ = unstructured.NestedString(ks.Object, "spec", "sourceRef", "namespace")
	if ref.Namespace == "" {
		ref.Namespace = ks.GetNamespace()
	}
	return ref
}

// requestDependentReconcile asks kustomize-controller to reconcile the
// component's Kustomization ks now when decideDependencyRequest says so.
// A failure is only logged: kustomize-controller retries at its own pace.
func (r *ExperimentReconciler) requestDependentReconcile(ctx context.Context, ks, src *unstructured.Unstructured) {
	refs := dependenciesOf(ks)
	if len(refs) == 0 {
		return
	}
	deps := make(map[dependencyRef]*unstructured.Unstructured, len(refs))
	for _, ref := range refs {
		dep, err := r.get(ctx, scribev1.ObjectIdentity{APIVersion: ks.GetAPIVersion(), Kind: ks.GetKind(), Namespace: ref.Namespace, Name: ref.Name})
		if err != nil {
			return
		}
		deps[ref] = dep
	}
	if !decideDependencyRequest(ks, src, deps) {
		return
	}
	if err := annotate(ctx, r.Publisher.Client, ks, RequestedAtAnnotation, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		log.FromContext(ctx).Info("request a reconcile of a component whose dependencies are ready", "kustomization", ks.GetNamespace()+"/"+ks.GetName(), "error", err.Error())
		return
	}
	log.FromContext(ctx).V(1).Info("asked for a reconcile of a component whose dependencies are ready", "kustomization", ks.GetNamespace()+"/"+ks.GetName())
}
