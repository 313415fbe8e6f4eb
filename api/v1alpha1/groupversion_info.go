// Package v1alpha1 contains the Scribe API: Repository, Experiment,
// Workload and Pipeline custom resources of the scribe.dev group, and the
// platform's cluster-scoped TenantPolicy.
// +kubebuilder:object:generate=true
// +groupName=scribe.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of every Scribe kind.
var GroupVersion = schema.GroupVersion{Group: "scribe.dev", Version: "v1alpha1"}

// AddToScheme adds the Scribe kinds to a runtime.Scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Repository{}, &RepositoryList{},
		&Experiment{}, &ExperimentList{},
		&Workload{}, &WorkloadList{},
		&Pipeline{}, &PipelineList{},
		&TenantPolicy{}, &TenantPolicyList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
