package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PipelineKind is the kind name of Pipeline.
const PipelineKind = "Pipeline"

// PipelineSpec promotes the versions of one Workload through ordered
// stages. Each stage runs its own Workload, `<pipeline>-<stage>`, rendered
// from the template into the stage's Repository and rolled out by the
// template's rollout there; a version enters the first stage and moves to
// the next once it has been stable and healthy in the previous one for
// that stage's soak.
// +kubebuilder:validation:XValidation:rule="!has(self.template.repositoryRef)",message="spec.template.repositoryRef cannot be set: each stage names its Repository in spec.stages[].repositoryRef"
type PipelineSpec struct {
	// Template is the Workload every stage runs. Its versions are the
	// candidates: the last entry is the newest, and it enters the first
	// stage at once; a later stage gets only versions the stage before it
	// verified. A version's entry is best left unchanged once added: an
	// edit reaches every stage that already runs it.
	// +required
	Template WorkloadSpec `json:"template"`

	// Suspend stops the controller reconciling this Pipeline until it is
	// false again (`scribe suspend`, `scribe resume`, as `flux
	// suspend`). A deletion is still carried out.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Stages in promotion order, for example dev, staging and prod.
	// Removing a stage deletes its Workload, and with it what Scribe
	// committed for it.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +listType=map
	// +listMapKey=name
	// +required
	Stages []PipelineStage `json:"stages"`
}

// PipelineStage is one environment a version passes through.
type PipelineStage struct {
	// Name of the stage, a DNS label; the stage's Workload is
	// `<pipeline>-<stage>`.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=15
	// +required
	Name string `json:"name"`

	// RepositoryRef names the Repository the stage's Workload is
	// committed to: a repository, branch or path, and the applier that
	// applies it.
	// +required
	RepositoryRef LocalObjectReference `json:"repositoryRef"`

	// Soak is how long a version must stay stable and healthy in this
	// stage, its analysis passing, before it is proposed to the next
	// stage. Default 0: as soon as its rollout here completed.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	Soak *metav1.Duration `json:"soak,omitempty"`

	// Review: auto commits the stage's rollout steps; pullRequest opens a
	// pull request per step, the first carrying the evidence of the
	// previous stage (it needs the Repository's spec.git.pullRequest).
	// Empty: the template's spec.rollout.promotion.
	// +optional
	Review PromotionMode `json:"review,omitempty"`
}

// PipelineStageStatus is where one stage stands.
type PipelineStageStatus struct {
	// Name of the stage.
	Name string `json:"name"`

	// Workload is the stage's Workload.
	// +optional
	Workload string `json:"workload,omitempty"`

	// WorkloadDigest is the digest of the spec and promotion annotations
	// the Pipeline last wrote to the stage's Workload, as the API server
	// stored them. The Workload is rendered and committed only while its
	// own match it: a change the Pipeline did not make is never
	// published, and its promotion evidence is trusted only then.
	// +optional
	WorkloadDigest string `json:"workloadDigest,omitempty"`

	// Admitted is the newest version the pipeline let into the stage: the
	// newest template version for the first stage, the last version the
	// previous stage verified for the others. It is saved before the
	// stage's Workload is changed.
	// +optional
	Admitted string `json:"admitted,omitempty"`

	// Stable is the stage's stable version.
	// +optional
	Stable string `json:"stable,omitempty"`

	// InFlight is the version rolling out in the stage, if any.
	// +optional
	InFlight string `json:"inFlight,omitempty"`

	// Step is the in-flight version's step (index in the template's
	// rollout steps); -1 when nothing is in flight.
	// +optional
	Step int32 `json:"step,omitempty"`

	// Phase of the stage's Workload.
	// +optional
	Phase WorkloadPhase `json:"phase,omitempty"`

	// Revision is the commit that carries the stage's last render.
	// +optional
	Revision string `json:"revision,omitempty"`

	// PullRequest proposes the in-flight step when the stage's review is pullRequest.
	// +optional
	PullRequest *PullRequestStatus `json:"pullRequest,omitempty"`

	// HealthySince is when the admitted version was first seen stable and
	// healthy in the stage; its soak counts from here.
	// +optional
	HealthySince *metav1.Time `json:"healthySince,omitempty"`

	// Verified is the newest version that completed its soak in the
	// stage; the next stage receives it.
	// +optional
	Verified string `json:"verified,omitempty"`

	// Evidence is what the verified version showed in the stage; it goes
	// into the next stage's pull request.
	// +optional
	Evidence string `json:"evidence,omitempty"`

	// Failed is the version the stage rolled back; it goes no further.
	// +optional
	Failed string `json:"failed,omitempty"`

	// Message explains where the stage stands.
	// +optional
	Message string `json:"message,omitempty"`
}

// PipelineStatus is the observed state of a Pipeline.
type PipelineStatus struct {
	// ObservedGeneration is the last generation Scribe acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastHandledReconcileAt is the last `reconcile.fluxcd.io/requestedAt`
	// annotation value Scribe acted on.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`

	// Version is the newest template version, the one walking the stages.
	// +optional
	Version string `json:"version,omitempty"`

	// Summary shows every stage at a glance: `dev=v2 staging=v1>v2(1/3,#4) prod=v1`
	// (stable, then `>` the version in flight, its step and pull request;
	// `!` a version the stage rolled back).
	// +optional
	Summary string `json:"summary,omitempty"`

	// Stages, in spec order.
	// +listType=map
	// +listMapKey=name
	// +optional
	Stages []PipelineStageStatus `json:"stages,omitempty"`
}

// Pipeline promotes a Workload's versions through ordered stages, each
// with its own Repository, applier, canary and review.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pl
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 30",message="metadata.name must be at most 30 characters: stage Workloads are named <pipeline>-<stage>"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Stages",type=string,JSONPath=`.status.summary`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Pipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PipelineSpec `json:"spec"`
	// +optional
	Status PipelineStatus `json:"status,omitempty"`
}

// PipelineList is a list of Pipelines.
// +kubebuilder:object:root=true
type PipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Pipeline `json:"items"`
}

// GetConditions returns the status conditions.
func (in *Pipeline) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *Pipeline) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// SetLastHandledReconcileRequest records the reconcile.fluxcd.io/requestedAt
// value a reconcile handled.
func (in *Pipeline) SetLastHandledReconcileRequest(v string) { in.Status.LastHandledReconcileAt = v }
