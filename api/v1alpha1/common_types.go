package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types and reasons shared by every Scribe kind. Ready, Reconciling
// and Stalled follow the kstatus conventions that Flux uses.
const (
	// ReadyCondition says whether the object's rendered state is published
	// and, where the kind reads health back, applied and healthy.
	ReadyCondition = "Ready"
	// ReconcilingCondition is True while Scribe works towards the desired state.
	ReconcilingCondition = "Reconciling"
	// StalledCondition is True when Scribe cannot progress without a change
	// to the object (for example a render error).
	StalledCondition = "Stalled"

	// RenderFailedReason: the object's spec does not render.
	RenderFailedReason = "RenderFailed"
)

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// Name of the referent.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// SecretKeyReference names a Secret in the same namespace and, optionally, a key in it.
type SecretKeyReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Key in the Secret's data; when empty the consumer's documented default key is used.
	// +optional
	Key string `json:"key,omitempty"`
}

// ObjectIdentity identifies one rendered Kubernetes object.
type ObjectIdentity struct {
	// APIVersion of the object, for example apps/v1.
	APIVersion string `json:"apiVersion"`
	// Kind of the object, for example Deployment.
	Kind string `json:"kind"`
	// Namespace of the object; empty for cluster-scoped kinds.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
}

// GeneratedResources lists what Scribe rendered for an object and where.
type GeneratedResources struct {
	// Path of the object's directory in the repository, relative to the repository root.
	Path string `json:"path"`
	// Objects rendered into Path, in file order.
	// +optional
	// +listType=atomic
	Objects []ObjectIdentity `json:"objects,omitempty"`
}

// CommonStatus holds the status fields every Scribe kind shares.
type CommonStatus struct {
	// ObservedGeneration is the last generation Scribe acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Revision is the Git commit SHA (or OCI manifest digest, `sha256:…`)
	// that carries the last published render; empty while a new intent is
	// being committed. Appliers report `<branch>@sha1:<sha>`; Scribe compares
	// on the hash.
	// +optional
	Revision string `json:"revision,omitempty"`

	// Digest is the content digest of the last rendered bundle (sha256:…).
	// +optional
	Digest string `json:"digest,omitempty"`

	// GeneratedResources lists the repository path and object identities of the last render.
	// +optional
	GeneratedResources *GeneratedResources `json:"generatedResources,omitempty"`

	// PullRequest is the pull request that proposes the last render when
	// it goes to the repository by pull request: a Workload's step under
	// spec.rollout.promotion pullRequest, an Experiment's stage when its
	// Repository takes changes by pull request. A Repository leaves it empty.
	// +optional
	PullRequest *PullRequestStatus `json:"pullRequest,omitempty"`

	// LastHandledReconcileAt is the last `reconcile.fluxcd.io/requestedAt`
	// annotation value Scribe acted on.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// PullRequestStatus is the pull request that proposes a step.
type PullRequestStatus struct {
	// Number of the pull request.
	Number int `json:"number"`
	// URL of the pull request.
	// +optional
	URL string `json:"url,omitempty"`
	// Head is the commit on the pull request's branch.
	Head string `json:"head"`
	// State: open, closed or merged.
	// +optional
	State string `json:"state,omitempty"`
}
