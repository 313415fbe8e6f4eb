// Package v1alpha1 contains the Scribe API: Repository, Experiment and
// Workload custom resources of the scribe.dev group.
// +kubebuilder:object:generate=true
// +groupName=scribe.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every Scribe kind.
	GroupVersion = schema.GroupVersion{Group: "scribe.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the Scribe kinds to a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Scribe kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
