package health

import (
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// API groups of the applier objects that deliver catalog components.
const (
	groupFluxKustomize = "kustomize.toolkit.fluxcd.io"
	groupFluxHelm      = "helm.toolkit.fluxcd.io"
	kindApplication    = "Application"
	// argoRefreshAnnotation asks Argo CD to refresh an Application.
	argoRefreshAnnotation = "argocd.argoproj.io/refresh"
)

// helmFailureReasons are the Ready=False reasons with which helm-controller
// reports that a release action failed (rather than waits or retries on a
// missing dependency or chart).
var helmFailureReasons = map[string]bool{
	"InstallFailed":   true,
	"UpgradeFailed":   true,
	"TestFailed":      true,
	"RollbackFailed":  true,
	"UninstallFailed": true,
	"InitFailed":      true,
}

// Delivery decides whether the applier object that delivers one catalog
// component to a cluster has installed it: a Flux Kustomization or
// HelmRelease, or an Argo CD Application. src is the Flux source a
// Kustomization reads (nil when unknown or missing).
//
//   - Flux Kustomization: Healthy when Ready=True for the current generation
//     (the delivery has wait: true, so Ready means applied and healthy).
//     Failed on Stalled=True; on Ready=False with a failure reason
//     (ReconciliationFailed, BuildFailed, PruneFailed, HealthCheckFailed);
//     and on Ready=False with ArtifactFailed while its source is Ready=True:
//     the source's artifact is there, so the failure is in its content, for
//     example "kustomization path not found". Flux keeps retrying, so a fix
//     of the source turns the verdict back. Pending otherwise
//     (DependencyNotReady, Progressing, a source not ready yet).
//   - Flux HelmRelease: Healthy on Ready=True for the current generation;
//     Failed on Stalled=True (retries exhausted) or Ready=False with an
//     install, upgrade, test, rollback or uninstall failure; else Pending.
//   - Argo CD Application: Healthy when Synced and Healthy; Failed on a
//     ComparisonError or InvalidSpecError condition, a failed or errored
//     sync operation, or health Degraded; else Pending.
//
// Any other kind is judged by Object. A nil object is Pending (NotFound);
// Flux's or Argo CD's message is kept verbatim.
func Delivery(u, src *unstructured.Unstructured) Verdict {
	o := content(u)
	group, kind, subj := identity(u)
	v := Verdict{Subject: subj}
	if gone, ok := absent(o, v); ok {
		return gone
	}
	switch {
	case group == groupFluxKustomize && kind == "Kustomization":
		return fluxDelivery(v, o, src, func(reason string) bool {
			_, ok := fluxFailureReason(reason)
			return ok
		})
	case group == groupFluxHelm && kind == "HelmRelease":
		return fluxDelivery(v, o, nil, func(reason string) bool { return helmFailureReasons[reason] })
	case group == groupArgo && kind == kindApplication:
		return argoDelivery(v, o)
	}
	return Object(u)
}

// fluxDelivery judges a Flux Kustomization or HelmRelease by its conditions.
func fluxDelivery(v Verdict, o map[string]any, src *unstructured.Unstructured, failure func(reason string) bool) Verdict {
	failed := failed
	gen, _ := integer(o, "metadata", "generation")
	observed, _ := integer(o, "status", "observedGeneration")
	conds := conditions(o, "status", "conditions")
	current := func(c *cond) bool { return c != nil && (c.ObservedGeneration == 0 || c.ObservedGeneration == gen) }
	if b, _ := field(o, "spec", "suspend"); b == true {
		return pending(v, ReasonSuspended, "suspended")
	}
	// A reconcile requested and not handled yet (Scribe asks for one when
	// a target cluster answers again): a failure reported before is no
	// verdict on the retry.
	requested, _ := field(o, "metadata", "annotations", meta.ReconcileRequestAnnotation)
	handled, _ := field(o, "status", "lastHandledReconcileAt")
	if r, ok := requested.(string); ok && r != "" && r != handled {
		failed = func(v Verdict, _, msg string) Verdict {
			return pending(v, ReasonRetryRequested, fmt.Sprintf("a reconcile requested at %s is not handled yet; before it: %s", r, msg))
		}
	}
	if c := findCond(conds, meta.StalledCondition); current(c) && c.Status == "True" {
		return failed(v, ReasonStalled, c.Message)
	}
	ready := findCond(conds, meta.ReadyCondition)
	if !current(ready) {
		return pending(v, ReasonNotObserved, fmt.Sprintf("generation %d not yet reconciled", gen))
	}
	switch ready.Status {
	case "True":
		if observed != gen {
			return pending(v, ReasonNotObserved, fmt.Sprintf("generation %d not yet observed (observed %d)", gen, observed))
		}
		return Verdict{State: Healthy, Reason: ReasonHealthy, Subject: v.Subject, Message: ready.Message}
	case "False":
		if failure(ready.Reason) {
			return failed(v, ready.Reason, ready.Message)
		}
		if ready.Reason == meta.ArtifactFailedReason && sourceReady(src) {
			return failed(v, ready.Reason, ready.Message)
		}
	}
	reason := ready.Reason
	if reason == "" {
		reason = ReasonProgressing
	}
	return pending(v, reason, ready.Message)
}

// sourceReady reports a Flux source that is Ready=True for its generation
// and has an artifact.
func sourceReady(src *unstructured.Unstructured) bool {
	o := content(src)
	if o == nil || obj(o, "status", "artifact") == nil {
		return false
	}
	gen, _ := integer(o, "metadata", "generation")
	c := findCond(conditions(o, "status", "conditions"), meta.ReadyCondition)
	return c != nil && c.Status == "True" && (c.ObservedGeneration == 0 || c.ObservedGeneration == gen)
}

// argoDelivery judges an Argo CD Application that delivers a component.
func argoDelivery(v Verdict, o map[string]any) Verdict {
	st := obj(o, "status")
	failed := failed
	// A refresh requested and not done yet (Argo CD removes the
	// annotation when it has refreshed): a failure is no verdict on it.
	if r, ok := field(o, "metadata", "annotations", argoRefreshAnnotation); ok && r != nil && r != "" {
		failed = func(v Verdict, _, msg string) Verdict {
			return pending(v, ReasonRetryRequested, fmt.Sprintf("a refresh (%v) is requested and not done yet; before it: %s", r, msg))
		}
	}
	for _, c := range conditions(st, "conditions") {
		switch c.Type {
		case ReasonComparisonError, ReasonInvalidSpecError:
			if strings.Contains(c.Message, argoNoClusterMessage) {
				// A target cluster not registered with Argo CD (yet).
				return pending(v, ReasonDestinationNotRegistered, c.Message)
			}
			return failed(v, c.Type, c.Message)
		}
	}
	switch phase := str(st, "operationState", "phase"); phase {
	case "Failed", "Error":
		return failed(v, ReasonSyncFailed, str(st, "operationState", "message"))
	case "Running", "Terminating":
		return pending(v, ReasonOperationInProgress, str(st, "operationState", "message"))
	}
	sync, h := str(st, "sync", "status"), str(st, "health", "status")
	switch {
	case h == "Degraded":
		msg := str(st, "health", "message")
		if msg == "" {
			msg = degradedResource(st)
		}
		return failed(v, ReasonDegraded, msg)
	case sync == "Synced" && h == "Healthy":
		return Verdict{State: Healthy, Reason: ReasonHealthy, Subject: v.Subject, Message: "Synced and Healthy"}
	}
	return pending(v, ReasonNotReady, fmt.Sprintf("sync %q, health %q", sync, h))
}
