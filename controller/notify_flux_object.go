package controller

import (
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// fluxInvolved is the object a Flux Alert can select for an Event about
// obj. An Alert's spec.eventSources[].kind is an enum of Flux's own kinds
// (Kustomization, GitRepository, HelmRelease, …): an event whose involved
// object is a Workload reaches notification-controller and matches no
// Alert. So an Event about a Workload or an Experiment delivered by a Flux
// Kustomization (the first of status.generatedResources.objects) is posted
// as an event of that Kustomization, which carries the labels
// scribe.dev/kind, scribe.dev/namespace and scribe.dev/name for an Alert's
// matchLabels, and the object's own event.toolkit.fluxcd.io/ annotations.
// The metadata keys then take the Kustomization's API group (the prefix
// notification-controller keeps), and object names the Scribe object.
// Anything else (a Pipeline, or a Workload Argo CD delivers) is posted as
// itself.
func fluxInvolved(obj runtime.Object) (involved runtime.Object, group, object string) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, scribev1.GroupVersion.Group, ""
	}
	var gen *scribev1.GeneratedResources
	kind := ""
	switch t := o.(type) {
	case *scribev1.Workload:
		gen, kind = t.Status.GeneratedResources, scribev1.WorkloadKind
	case *scribev1.Experiment:
		gen, kind = t.Status.GeneratedResources, scribev1.ExperimentKind
	}
	if gen == nil || len(gen.Objects) == 0 {
		return obj, scribev1.GroupVersion.Group, ""
	}
	sync := gen.Objects[0]
	if sync.Kind != kustomizev1.KustomizationKind || sync.APIVersion != kustomizev1.GroupVersion.String() || sync.Name == "" || sync.Namespace == "" {
		return obj, scribev1.GroupVersion.Group, ""
	}
	k := &unstructured.Unstructured{}
	k.SetAPIVersion(sync.APIVersion)
	k.SetKind(sync.Kind)
	k.SetNamespace(sync.Namespace)
	k.SetName(sync.Name)
	ann := map[string]string{}
	for key, v := range o.GetAnnotations() {
		if strings.HasPrefix(key, fluxEventAnnotationPrefix) {
			ann[key] = v
		}
	}
	k.SetAnnotations(ann)
	return k, kustomizev1.GroupVersion.Group, kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

// fluxEventAnnotationPrefix starts the annotations Flux's event recorder
// adds to an event's metadata.
const fluxEventAnnotationPrefix = "event.toolkit.fluxcd.io/"
