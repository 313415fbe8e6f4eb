package render

import (
	"fmt"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render/contract"
)

// fluxDeliveryKind is the Flux object that delivers a resolved component:
// a HelmRelease for a Helm entry, a Kustomization for any other (a git or
// oci source, or a catalog component Scribe hydrated).
func fluxDeliveryKind(r contract.Resolved) string {
	if s, _ := r.Entry["source"].(map[string]any); s != nil && s["type"] == "helm" {
		return "HelmRelease"
	}
	return "Kustomization"
}

// crossKindDepends refuses, under Flux, a target's component whose
// delivery would depend (spec.targets[i].depends) on a delivery of
// another kind: Flux resolves dependsOn within one kind only, so a
// Kustomization depending on a HelmRelease never becomes ready. The
// template keeps only the same-kind names in dependsOn; what is refused
// here is a dependency that would then be silently lost. A workflow
// component is not refused: the controller commits it (stage 3) only once
// every target's components are ready, which orders it after them
// whatever their kind. targets are the resolved components of
// x.Spec.Targets, index for index.
func crossKindDepends(x *scribev1.Experiment, targets []contract.TargetInput, applier scribev1.ApplierKind) []FieldError {
	if applier != scribev1.ApplierFlux || len(targets) != len(x.Spec.Targets) {
		return nil
	}
	index := make(map[string]int, len(x.Spec.Targets))
	for i, t := range x.Spec.Targets {
		index[t.Name] = i
	}
	var errs []FieldError
	for i, t := range x.Spec.Targets {
		for k, dep := range t.Depends {
			j, ok := index[dep]
			if !ok {
				continue // the CRD's rule names it
			}
		check:
			for _, c := range targets[i].Components {
				if c.Kind == contract.ComponentWorkflow {
					continue
				}
				for _, d := range targets[j].Components {
					if d.Kind == contract.ComponentWorkflow || fluxDeliveryKind(c) == fluxDeliveryKind(d) {
						continue
					}
					errs = append(errs, FieldError{Path: fmt.Sprintf("spec.targets[%d].depends[%d]", i, k), Message: fmt.Sprintf(
						"target %q depends on target %q, whose component %q Flux delivers as a %s, while this target's component %q is a %s: Flux orders objects of one kind only (dependsOn), so it would wait forever. Scribe builds catalog (kustomize) components itself, not yet Helm charts: keep Helm components and the components that depend on them in targets of one kind, or apply this Repository with Argo CD (sync waves)",
						t.Name, dep, d.Name, fluxDeliveryKind(d), c.Name, fluxDeliveryKind(c))})
					break check
				}
			}
		}
	}
	return errs
}
