package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadKind is the kind name of Workload.
const WorkloadKind = "Workload"

// WorkloadSpec describes a versioned service: its versions, how it scales,
// where it is scheduled, how traffic reaches it and how a new version rolls out.
// +kubebuilder:validation:XValidation:rule="!has(self.scaling) || !has(self.replicas)",message="replicas cannot be set together with scaling"
// +kubebuilder:validation:XValidation:rule="has(self.traffic) || !has(self.rollout) || !has(self.rollout.steps) || self.rollout.steps.size() <= 1 || (has(self.rollout.strategy) && self.rollout.strategy != 'canary')",message="a canary with steps needs spec.traffic: its weights are backend weights of the HTTPRoute spec.traffic renders, and without one no traffic would move; set spec.traffic or use strategy rolling",fieldPath=".traffic"
type WorkloadSpec struct {
	// RepositoryRef names the Repository Scribe publishes to; defaults to the
	// Repository named "default" in the Workload's namespace.
	// +optional
	RepositoryRef *LocalObjectReference `json:"repositoryRef,omitempty"`

	// Versions of the service. The last entry is the newest; adding an entry
	// starts a rollout to it, removing one decommissions it.
	//
	// At most 8: a rollout runs two versions at once and a drained one
	// stays until it is decommissioned, so 8 leaves room for several
	// rollouts in a row while bounding what one Workload renders (a
	// Deployment, Service and route backend per version it still runs).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +required
	Versions []Version `json:"versions"`

	// Replicas of each version when scaling is not set.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Service exposes every version under one stable DNS name and each version under its own.
	// +required
	Service ServiceSpec `json:"service"`

	// Scaling autoscales each version with an HPA or a KEDA ScaledObject.
	// +optional
	Scaling *Scaling `json:"scaling,omitempty"`

	// Scheduling places the pods: node selection, tolerations, affinity, GPU and TEE nodes.
	// +optional
	Scheduling *Scheduling `json:"scheduling,omitempty"`

	// Traffic routes requests through the Gateway API; backend weights come from the rollout.
	// A canary with more than one step needs it: its weights are the
	// HTTPRoute's backend weights (splitting by replicas is not offered).
	// +optional
	Traffic *Traffic `json:"traffic,omitempty"`

	// Rollout says how a new version takes over traffic.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`

	// Decommission says when a drained version is removed.
	// +optional
	Decommission *Decommission `json:"decommission,omitempty"`

	// Suspend stops the controller reconciling this Workload: nothing is
	// rendered, committed or read back and a rollout holds where it is,
	// until it is false again (`scribe suspend`, `scribe resume`, as
	// `flux suspend`). A deletion is still carried out.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Paused holds a rollout at its current step: it neither advances nor
	// promotes, while its analysis goes on and can still roll it back
	// (`scribe pause`, `scribe resume`, as Argo Rollouts' spec.paused).
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// Version is one release of the service.
type Version struct {
	// Name of the version, a DNS label (for example v2 or 2024-06-01).
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=30
	// +required
	Name string `json:"name"`

	// Image reference, pinned by tag or digest.
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image"`

	// Command overrides the image's entrypoint.
	// +listType=atomic
	// +optional
	Command []string `json:"command,omitempty"`

	// Args to the entrypoint.
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`

	// Env are plain environment variables. Secrets are referenced with
	// valueFrom, never inlined.
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Config is rendered into a ConfigMap mounted at /etc/config.
	// +optional
	Config map[string]string `json:"config,omitempty"`

	// Resources of the container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// Probes of the container.
	// +optional
	Probes *Probes `json:"probes,omitempty"`

	// Scaling overrides the Workload's scaling for this version.
	// +optional
	Scaling *Scaling `json:"scaling,omitempty"`
}

// Probes are the container's health probes.
type Probes struct {
	// +optional
	Readiness *corev1.Probe `json:"readiness,omitempty"`
	// +optional
	Liveness *corev1.Probe `json:"liveness,omitempty"`
	// +optional
	Startup *corev1.Probe `json:"startup,omitempty"`
}

// ServiceSpec describes the Services of a Workload.
type ServiceSpec struct {
	// Name of the stable Service; defaults to the Workload's name. Each
	// version also gets `<name>-<version>`.
	// +kubebuilder:validation:Pattern="^[a-z]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=50
	// +optional
	Name string `json:"name,omitempty"`

	// Ports the service listens on.
	// +kubebuilder:validation:MinItems=1
	// +listType=map
	// +listMapKey=name
	// +required
	Ports []ServicePort `json:"ports"`
}

// ServicePort is one port of the service.
type ServicePort struct {
	// Name of the port.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=15
	// +required
	Name string `json:"name"`
	// Port the Service listens on.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`
	// TargetPort the container listens on; defaults to Port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	TargetPort int32 `json:"targetPort,omitempty"`
	// Protocol of the port.
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	// +kubebuilder:default=TCP
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`
	// AppProtocol, for example http, h2c or grpc.
	// +optional
	AppProtocol string `json:"appProtocol,omitempty"`
}

// Scaling chooses one autoscaler.
// +kubebuilder:validation:XValidation:rule="has(self.hpa) != has(self.keda)",message="exactly one of hpa or keda must be set"
type Scaling struct {
	// HPA scales on CPU and memory utilisation.
	// +optional
	HPA *HPAScaling `json:"hpa,omitempty"`
	// KEDA scales on external triggers with a ScaledObject.
	// +optional
	KEDA *KEDAScaling `json:"keda,omitempty"`
}

// HPAScaling configures a HorizontalPodAutoscaler (autoscaling/v2).
// +kubebuilder:validation:XValidation:rule="self.maxReplicas >= self.minReplicas",message="maxReplicas must be >= minReplicas"
// +kubebuilder:validation:XValidation:rule="has(self.cpu) || has(self.memory)",message="at least one of cpu or memory must be set"
type HPAScaling struct {
	// MinReplicas of each version.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	MinReplicas int32 `json:"minReplicas,omitempty"`
	// MaxReplicas of each version.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +required
	MaxReplicas int32 `json:"maxReplicas"`
	// CPU is the target average CPU utilisation, in percent of requests.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	CPU *int32 `json:"cpu,omitempty"`
	// Memory is the target average memory utilisation, in percent of requests.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Memory *int32 `json:"memory,omitempty"`
}

// KEDAScaling configures a KEDA ScaledObject.
// +kubebuilder:validation:XValidation:rule="self.maxReplicaCount >= self.minReplicaCount",message="maxReplicaCount must be >= minReplicaCount"
type KEDAScaling struct {
	// MinReplicaCount of each version; 0 allows scale to zero.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=0
	// +optional
	MinReplicaCount int32 `json:"minReplicaCount,omitempty"`
	// MaxReplicaCount of each version.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +required
	MaxReplicaCount int32 `json:"maxReplicaCount"`
	// Triggers of the ScaledObject.
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	// +required
	Triggers []KEDATrigger `json:"triggers"`
}

// KEDATrigger is one KEDA scaler.
type KEDATrigger struct {
	// Type of the scaler, for example prometheus, kafka or cpu.
	// +kubebuilder:validation:MinLength=1
	// +required
	Type string `json:"type"`
	// Metadata of the scaler.
	// +required
	Metadata map[string]string `json:"metadata"`
	// AuthenticationRef names a KEDA TriggerAuthentication.
	// +optional
	AuthenticationRef *LocalObjectReference `json:"authenticationRef,omitempty"`
}

// Scheduling places the pods.
type Scheduling struct {
	// NodeSelector of the pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the pods.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity of the pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// GPU requests GPUs (nvidia.com/gpu) and tolerates the nvidia.com/gpu
	// taint (unless Tolerations already do). Without a NodeSelector it also
	// selects GKE's GPU node label, cloud.google.com/gke-accelerator=<type>;
	// with one, placement is the NodeSelector's (for example a node label
	// such as accelerator or nvidia.com/gpu.product off GKE).
	// +optional
	GPU *GPU `json:"gpu,omitempty"`
	// TEE schedules onto confidential-computing nodes.
	// +optional
	TEE *TEE `json:"tee,omitempty"`
}

// GPU asks for GPUs.
type GPU struct {
	// Type of GPU, for example nvidia-l4: on GKE the value of the node
	// label cloud.google.com/gke-accelerator, selected when the Workload
	// has no nodeSelector.
	// +kubebuilder:validation:MinLength=1
	// +required
	Type string `json:"type"`
	// Count of GPUs per pod.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +kubebuilder:default=1
	// +optional
	Count int32 `json:"count,omitempty"`
}

// TEE asks for a trusted execution environment.
type TEE struct {
	// Type of TEE.
	// +kubebuilder:validation:Enum=amd-sev-snp;intel-tdx;nvidia-cc
	// +required
	Type string `json:"type"`
}

// Traffic routes requests to the Workload through the Gateway API.
type Traffic struct {
	// ParentRefs are the Gateways the HTTPRoute attaches to.
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	// +required
	ParentRefs []ParentReference `json:"parentRefs"`
	// Hostnames the route matches.
	// +listType=set
	// +optional
	Hostnames []string `json:"hostnames,omitempty"`
	// PathPrefix the route matches.
	// +kubebuilder:default="/"
	// +kubebuilder:validation:Pattern="^/.*$"
	// +optional
	PathPrefix string `json:"pathPrefix,omitempty"`
	// Port of the service that receives the traffic; defaults to the first port.
	// +optional
	Port *int32 `json:"port,omitempty"`
}

// ParentReference is a Gateway API parent reference.
type ParentReference struct {
	// Name of the Gateway.
	// +required
	Name string `json:"name"`
	// Namespace of the Gateway; defaults to the Workload's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// SectionName is the Gateway listener.
	// +optional
	SectionName string `json:"sectionName,omitempty"`
}

// Rollout says how a new version takes over.
type Rollout struct {
	// Strategy: canary shifts traffic in steps, blueGreen switches at once
	// after checks, rolling replaces the version without traffic split.
	// +kubebuilder:default=canary
	// +optional
	Strategy RolloutStrategy `json:"strategy,omitempty"`

	// Steps of a canary: each sets the new version's traffic weight and holds
	// for pause. Weights rise and end at 100. More than one step needs
	// spec.traffic.
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || self[self.size() - 1].weight == 100",message="the last step's weight must be 100"
	// +kubebuilder:validation:XValidation:rule="self.map(s, s.weight).isSorted() && self.all(s, self.exists_one(o, o.weight == s.weight))",message="step weights must rise strictly"
	// +listType=atomic
	// +optional
	Steps []RolloutStep `json:"steps,omitempty"`

	// Analysis checks the new version while a step holds.
	// +optional
	Analysis *Analysis `json:"analysis,omitempty"`

	// Webhooks are the team's HTTP endpoints the rollout asks at its
	// gates, as Flagger's webhooks are.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	Webhooks []RolloutWebhook `json:"webhooks,omitempty"`

	// Promotion: auto commits each step; pullRequest opens a pull request
	// per step. pullRequest needs the Repository's spec.git.pullRequest:
	// without it the Workload is Stalled (PullRequestsNotConfigured), never
	// committed directly.
	// +kubebuilder:default=auto
	// +optional
	Promotion PromotionMode `json:"promotion,omitempty"`

	// Rollback: how a rollback (failed step or analysis) reaches the
	// repository. direct (the default) commits it at once, whatever the
	// promotion: a rollback is an emergency, and its commit message says
	// why. pullRequest opens a pull request for it like any step, and the
	// traffic stays on the failed version until someone merges it; it
	// needs the Repository's spec.git.pullRequest.
	// +kubebuilder:default=direct
	// +optional
	Rollback RollbackMode `json:"rollback,omitempty"`
}

// RollbackMode is how a rollback reaches the repository.
// +kubebuilder:validation:Enum=direct;pullRequest
type RollbackMode string

// Rollback modes.
const (
	// RollbackDirect commits the rollback to the branch at once.
	RollbackDirect RollbackMode = "direct"
	// RollbackPullRequest opens a pull request for the rollback.
	RollbackPullRequest RollbackMode = "pullRequest"
)

// RolloutStrategy is how a new version takes over traffic.
// +kubebuilder:validation:Enum=canary;blueGreen;rolling
type RolloutStrategy string

// Rollout strategies.
const (
	// StrategyCanary shifts traffic to the new version in spec.rollout.steps.
	StrategyCanary RolloutStrategy = "canary"
	// StrategyBlueGreen runs the new version without traffic (weight 0),
	// then switches all traffic to it.
	StrategyBlueGreen RolloutStrategy = "blueGreen"
	// StrategyRolling replaces the version at once, without a traffic split.
	StrategyRolling RolloutStrategy = "rolling"
)

// PromotionMode is how each rollout step reaches the repository.
// +kubebuilder:validation:Enum=auto;pullRequest
type PromotionMode string

// Promotion modes.
const (
	// PromotionAuto commits each step to the branch.
	PromotionAuto PromotionMode = "auto"
	// PromotionPullRequest opens a pull request per step and moves on
	// once it is merged.
	PromotionPullRequest PromotionMode = "pullRequest"
)

// RolloutStep is one canary step.
type RolloutStep struct {
	// Weight of the new version, in percent.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +required
	Weight int32 `json:"weight"`
	// Pause holds the step once it is applied and healthy: for
	// pause.duration, or with `pause: {}` until it is promoted (`scribe
	// promote`, the annotation scribe.dev/promote).
	// +optional
	Pause *RolloutPause `json:"pause,omitempty"`
}

// PauseFor is a pause of d.
func PauseFor(d time.Duration) *RolloutPause {
	return &RolloutPause{Duration: &metav1.Duration{Duration: d}}
}

// RolloutPause holds a step once it is applied and healthy.
type RolloutPause struct {
	// Duration of the hold; without it the step is held until promoted.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// WebhookType is the gate a webhook is asked at.
// +kubebuilder:validation:Enum=confirm-promotion;pre-rollout;rollback
type WebhookType string

// Webhook types.
const (
	// WebhookConfirmPromotion is asked before a step moves on (the next
	// step or the promotion): until it answers 2xx the step holds, and it
	// is asked again at the next analysis interval.
	WebhookConfirmPromotion WebhookType = "confirm-promotion"
	// WebhookPreRollout is asked once the canary is available at weight
	// 0, before it gets traffic: any answer but 2xx counts as a failed
	// analysis round.
	WebhookPreRollout WebhookType = "pre-rollout"
	// WebhookRollback is asked at each analysis round while a step holds:
	// a 2xx answer rolls the canary back now.
	WebhookRollback WebhookType = "rollback"
)

// RolloutWebhook is an HTTP endpoint the rollout asks at a gate: a POST
// of a JSON body naming the Workload, the gate, the versions, the step
// and the weights, and metadata.
type RolloutWebhook struct {
	// Name of the webhook, a DNS label.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
	// Type is the gate it is asked at.
	// +required
	Type WebhookType `json:"type"`
	// URL, http or https, without user info: a token there would be
	// stored in the Workload for every reader; it belongs in secretRef.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern="^https?://"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][-+.a-zA-Z0-9]*://[^/?#]*@')",message="the webhook URL must not carry user info: credentials belong in the webhook's secretRef"
	// +required
	URL string `json:"url"`
	// Timeout of a call (default 10s, at most 30s).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Metadata is sent in the body.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`
	// SecretRef names a Secret in the Workload's namespace, bound to the
	// URL by its annotation scribe.dev/allowed-urls: `hmac-key` signs the
	// body (the header X-Scribe-Signature: sha256=<hex HMAC-SHA256>), and
	// `token`, `username`/`password`, `ca.crt` and `header.<Name>` are
	// used as an analysis check's are.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// Analysis checks a new version.
type Analysis struct {
	// Interval between checks.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:default="30s"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Threshold is the number of failed checks that rolls back.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=3
	// +optional
	Threshold int32 `json:"threshold,omitempty"`
	// InconclusiveLimit is the number of inconclusive rounds in a row (a
	// provider answered with no sample, as for a version that has not
	// served a request yet) after which the rollout is rolled back. An
	// inconclusive round holds the step without counting as failed.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=10
	// +optional
	InconclusiveLimit int32 `json:"inconclusiveLimit,omitempty"`
	// Checks run every interval.
	// +listType=map
	// +listMapKey=name
	// +optional
	Checks []Check `json:"checks,omitempty"`
	// Templates are Argo Rollouts AnalysisTemplates (in the Workload's
	// namespace) or ClusterAnalysisTemplates whose metrics run as checks
	// at every round, beside checks: prometheus, web, datadog and
	// newRelic metrics, with their successCondition and failureCondition;
	// a template with another provider fails the round, naming it.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Templates []AnalysisTemplateRef `json:"templates,omitempty"`
	// Args fill the templates' `{{args.NAME}}`. An argument named version
	// that is not given here is the version under analysis; namespace and
	// workload are always the Workload's namespace and name (or the
	// template's default) and cannot be given, and neither can an arg the
	// template pins with the annotation scribe.dev/pinned-args.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(a, a.name != 'namespace' && a.name != 'workload')",message="namespace and workload are always the Workload's own and cannot be given as args"
	// +listType=map
	// +listMapKey=name
	// +optional
	Args []AnalysisArg `json:"args,omitempty"`
}

// AnalysisTemplateRef names an Argo Rollouts analysis template.
type AnalysisTemplateRef struct {
	// TemplateName is the AnalysisTemplate's (or ClusterAnalysisTemplate's) name.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=253
	// +required
	TemplateName string `json:"templateName"`
	// ClusterScope names a ClusterAnalysisTemplate.
	// +optional
	ClusterScope bool `json:"clusterScope,omitempty"`
}

// AnalysisArg is a value for a template's argument.
type AnalysisArg struct {
	// Name of the argument.
	// +kubebuilder:validation:Pattern="^[a-zA-Z0-9]([-_a-zA-Z0-9.]*[a-zA-Z0-9])?$"
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
	// Value of the argument.
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Value string `json:"value"`
}

// Check is one analysis check.
// +kubebuilder:validation:XValidation:rule="self.type != 'prometheus' || (has(self.query) && has(self.address))",message="a prometheus check needs query and address"
// +kubebuilder:validation:XValidation:rule="self.type != 'web' || (has(self.url) && has(self.jsonPath))",message="a web check needs url and jsonPath"
// +kubebuilder:validation:XValidation:rule="self.type != 'datadog' || (has(self.query) && has(self.secretRef))",message="a datadog check needs query and secretRef"
// +kubebuilder:validation:XValidation:rule="self.type != 'newrelic' || (has(self.query) && has(self.accountID) && has(self.secretRef))",message="a newrelic check needs query, accountID and secretRef"
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || double(self.min) <= double(self.max)",message="min must be <= max"
type Check struct {
	// Name of the check.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
	// Type: availability (Deployment available), restarts (container
	// restarts at most max), prometheus (a PromQL query), web (a JSON
	// answer from an HTTP endpoint), datadog (a Datadog metrics query),
	// newrelic (an NRQL query through New Relic's NerdGraph API). The
	// value the query yields must lie within [min, max].
	// +required
	Type CheckType `json:"type"`
	// Address is the provider's http(s) base URL, without user info, query
	// or fragment: the Prometheus server (`/api/v1/query` is appended),
	// Datadog's API site (default https://api.datadoghq.com;
	// `/api/v1/query` is appended) or New Relic's NerdGraph endpoint
	// (default https://api.newrelic.com/graphql). The controller never
	// queries a link-local address and follows no redirect.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[hH][tT][tT][pP][sS]?://[^/?#@\s]+(/[^?#\s]*)?$`
	// +optional
	Address string `json:"address,omitempty"`
	// Query run at each analysis round: PromQL (an instant query), a
	// Datadog metrics query (over the last window) or NRQL. Before it
	// runs, `{{version}}` is replaced with the name of the version under
	// analysis, `{{namespace}}` with the Workload's namespace and
	// `{{workload}}` with its name (for example
	// `sum(rate(http_requests_total{namespace="{{namespace}}",version="{{version}}",code=~"5.."}[1m]))`);
	// any other `{{...}}` fails the check, naming it. The first value of
	// the answer is the check's value.
	// +kubebuilder:validation:MaxLength=8192
	// +optional
	Query string `json:"query,omitempty"`
	// URL of a web check: an http(s) URL that answers GET with JSON. It may
	// have a query and the placeholders of query; no user info or fragment.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[hH][tT][tT][pP][sS]?://[^/?#@\s]+([/?][^#\s]*)?$`
	// +optional
	URL string `json:"url,omitempty"`
	// JSONPath selects the value in the answer (Kubernetes JSONPath, as
	// kubectl's -o jsonpath and Argo Rollouts' web provider, e.g.
	// `{.data.errorRate}`): required for web; for newrelic it selects a
	// field of the first result row (default: the row's only field).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	JSONPath string `json:"jsonPath,omitempty"`
	// AccountID is the New Relic account the NRQL query runs in.
	// +kubebuilder:validation:Pattern="^[0-9]{1,19}$"
	// +optional
	AccountID string `json:"accountID,omitempty"`
	// Window is how far back a datadog query reads (default 5m).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`
	// SecretRef names a Secret in the Workload's namespace with the
	// provider's credentials: `token` (a bearer token) or `username` and
	// `password` (basic auth) for prometheus and web; `api-key` and
	// `app-key` for datadog; `personal-api-key` for newrelic; `ca.crt` to
	// trust a private CA; and any key `header.<Name>` is sent as the
	// header Name. The Secret must be bound to the check's URL with the
	// annotation scribe.dev/allowed-urls, as a Repository's credentials
	// are: a Workload cannot send a Secret to a server of its choosing.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// InsecureSkipVerify skips the TLS verification of the provider's
	// certificate. Prefer `ca.crt` in the Secret.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// Min of the accepted range, a decimal number.
	// +kubebuilder:validation:Pattern="^-?[0-9]+(\\.[0-9]+)?$"
	// +optional
	Min string `json:"min,omitempty"`
	// Max of the accepted range, a decimal number.
	// +kubebuilder:validation:Pattern="^-?[0-9]+(\\.[0-9]+)?$"
	// +optional
	Max string `json:"max,omitempty"`
}

// CheckType is what an analysis check measures.
// +kubebuilder:validation:Enum=availability;restarts;prometheus;web;datadog;newrelic
type CheckType string

// Analysis check types.
const (
	// CheckAvailability passes while the version's Deployment is available.
	CheckAvailability CheckType = "availability"
	// CheckRestarts passes while the version's containers restarted at most max times.
	CheckRestarts CheckType = "restarts"
	// CheckPrometheus passes while a PromQL query's result is within [min, max].
	CheckPrometheus CheckType = "prometheus"
	// CheckWeb passes while the value a JSONPath selects in an HTTP
	// endpoint's JSON answer is within [min, max].
	CheckWeb CheckType = "web"
	// CheckDatadog passes while a Datadog metrics query's last point is within [min, max].
	CheckDatadog CheckType = "datadog"
	// CheckNewRelic passes while an NRQL query's value is within [min, max].
	CheckNewRelic CheckType = "newrelic"
)

// Decommission configures removal of drained versions.
type Decommission struct {
	// GracePeriod a version stays deployed after it stops receiving traffic.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:default="10m"
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// WorkloadPhase is the lifecycle phase of a Workload.
// +kubebuilder:validation:Enum=Pending;Progressing;Healthy;RolledBack;Failed;Deleting
type WorkloadPhase string

// Workload phases.
const (
	WorkloadPending     WorkloadPhase = "Pending"
	WorkloadProgressing WorkloadPhase = "Progressing"
	WorkloadHealthy     WorkloadPhase = "Healthy"
	WorkloadRolledBack  WorkloadPhase = "RolledBack"
	WorkloadFailed      WorkloadPhase = "Failed"
	// WorkloadDeleting: the removal is committed; the finalizer waits for
	// the applier to prune.
	WorkloadDeleting WorkloadPhase = "Deleting"
)

// VersionWeight is the share of traffic a version receives.
type VersionWeight struct {
	// Version name.
	Version string `json:"version"`
	// Weight in percent.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
}

// WorkloadStatus is the observed state of a Workload.
type WorkloadStatus struct {
	CommonStatus `json:",inline"`

	// Phase of the Workload.
	// +optional
	Phase WorkloadPhase `json:"phase,omitempty"`

	// StableVersion receives the traffic the canary does not.
	// +optional
	StableVersion string `json:"stableVersion,omitempty"`

	// CanaryVersion is the version being rolled out, if any.
	// +optional
	CanaryVersion string `json:"canaryVersion,omitempty"`

	// Step is the index in spec.rollout.steps of the committed step; -1 before the first.
	// +optional
	Step int32 `json:"step"`

	// Traffic is the traffic split Scribe last committed. The render uses it;
	// without it the newest version receives all traffic.
	// +listType=map
	// +listMapKey=version
	// +optional
	Traffic []VersionWeight `json:"traffic,omitempty"`

	// StepHealthyAt is when the committed step was first read back applied
	// and healthy; the step's pause counts from here.
	// +optional
	StepHealthyAt *metav1.Time `json:"stepHealthyAt,omitempty"`

	// FailedChecks counts the failed analysis rounds of the current step.
	// +optional
	FailedChecks int32 `json:"failedChecks,omitempty"`

	// InconclusiveChecks counts the inconclusive analysis rounds in a row.
	// +optional
	InconclusiveChecks int32 `json:"inconclusiveChecks,omitempty"`

	// LastAnalysisAt is when the analysis checks last ran.
	// +optional
	LastAnalysisAt *metav1.Time `json:"lastAnalysisAt,omitempty"`

	// Checks are the results of the last analysis round: the evidence a
	// step moves on.
	// +listType=map
	// +listMapKey=name
	// +optional
	Checks []CheckResult `json:"checks,omitempty"`

	// RolledBackVersion is the version the last rollback abandoned. It is not
	// rolled out again until spec.versions names a newer version.
	// +optional
	RolledBackVersion string `json:"rolledBackVersion,omitempty"`

	// Message explains the phase, e.g. why a rollback happened.
	// +optional
	Message string `json:"message,omitempty"`

	// Evidence is what the previous step showed (when it was applied, how
	// long it held, the check results); it goes into the next step's pull
	// request and commit message.
	// +optional
	Evidence string `json:"evidence,omitempty"`

	// DrainStartedAt is when the versions other than the stable one stopped
	// receiving traffic (a promotion or a rollback); they are removed from
	// the rendered output spec.decommission.gracePeriod later.
	// +optional
	DrainStartedAt *metav1.Time `json:"drainStartedAt,omitempty"`

	// RolloutStartedAt is when the rollout of canaryVersion started.
	// +optional
	RolloutStartedAt *metav1.Time `json:"rolloutStartedAt,omitempty"`

	// PromotedStep is the step whose pause a promote request lifted.
	// +optional
	PromotedStep *int32 `json:"promotedStep,omitempty"`

	// Requests are the values of the manual request annotations
	// (scribe.dev/promote, promote-full, abort, retry) last handled: a
	// request is carried out once, when its annotation's value changes.
	// +optional
	Requests *HandledRequests `json:"requests,omitempty"`

	// History is the outcome of the last rollouts, newest first.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	History []RolloutRecord `json:"history,omitempty"`
}

// HandledRequests are the values of the manual request annotations last
// handled.
type HandledRequests struct {
	// +optional
	Promote string `json:"promote,omitempty"`
	// +optional
	PromoteFull string `json:"promoteFull,omitempty"`
	// +optional
	Abort string `json:"abort,omitempty"`
	// +optional
	Retry string `json:"retry,omitempty"`
}

// RolloutOutcome is how a rollout ended.
// +kubebuilder:validation:Enum=Promoted;RolledBack;Aborted;Superseded
type RolloutOutcome string

// Rollout outcomes.
const (
	// OutcomePromoted: the version became the stable one.
	OutcomePromoted RolloutOutcome = "Promoted"
	// OutcomeRolledBack: a failed step or analysis sent the traffic back.
	OutcomeRolledBack RolloutOutcome = "RolledBack"
	// OutcomeAborted: someone aborted it (`scribe abort`).
	OutcomeAborted RolloutOutcome = "Aborted"
	// OutcomeSuperseded: a newer version started rolling out first.
	OutcomeSuperseded RolloutOutcome = "Superseded"
)

// RolloutRecord is one past rollout of a Workload.
type RolloutRecord struct {
	// Version rolled out.
	Version string `json:"version"`
	// Outcome of the rollout.
	Outcome RolloutOutcome `json:"outcome"`
	// StartedAt is when the rollout started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// FinishedAt is when its outcome was decided.
	FinishedAt metav1.Time `json:"finishedAt"`
	// Step is the step it reached (0-based; -1 for none).
	Step int32 `json:"step"`
	// Revision is the last commit of the rollout applied before the
	// outcome (the outcome's own commit follows it on the branch).
	// +optional
	Revision string `json:"revision,omitempty"`
	// PullRequest is the rollout's last pull request, if any.
	// +optional
	PullRequest int `json:"pullRequest,omitempty"`
	// Message says why: a rollback's reason, who aborted and why.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// Manual request annotations on a Workload: each is carried out once
// when its value changes (the CLI writes the time of the request), as
// Flux's reconcile.fluxcd.io/requestedAt is.
const (
	// PromoteAnnotation lifts the pause of the current step.
	PromoteAnnotation = "scribe.dev/promote"
	// PromoteFullAnnotation promotes the rollout now, past its remaining
	// steps, pauses and analysis.
	PromoteFullAnnotation = "scribe.dev/promote-full"
	// AbortAnnotation rolls the rollout back now.
	AbortAnnotation = "scribe.dev/abort"
	// RetryAnnotation starts a rolled-back (aborted or failed) version's
	// rollout again from its first step.
	RetryAnnotation = "scribe.dev/retry"
	// RequestedByAnnotation names who made the request, as their client
	// reported it (the CLI asks the API server: SelfSubjectReview).
	RequestedByAnnotation = "scribe.dev/requested-by"
	// RequestReasonAnnotation says why.
	RequestReasonAnnotation = "scribe.dev/request-reason"
)

// CheckResult is the outcome of one analysis check.
type CheckResult struct {
	// Name of the check.
	Name string `json:"name"`
	// Passed is true when the check held.
	Passed bool `json:"passed"`
	// Inconclusive says the provider answered with no value (no sample
	// yet): the round neither passes nor fails.
	// +optional
	Inconclusive bool `json:"inconclusive,omitempty"`
	// Provider is the check's type.
	// +optional
	Provider CheckType `json:"provider,omitempty"`
	// Value is the measured value, when there is one.
	// +optional
	Value string `json:"value,omitempty"`
	// Condition is what the value had to satisfy, e.g. `<= 0.05`.
	// +optional
	Condition string `json:"condition,omitempty"`
	// Message gives the measured value or the failure.
	// +optional
	Message string `json:"message,omitempty"`
}

// The printer columns of the rollout's step and weight, apart from the doc
// comment so that they stay out of the CUE schemas (and the templates' version).
// +kubebuilder:printcolumn:name="Step",type=integer,JSONPath=`.status.step`,description="Index of the committed step in spec.rollout.steps (0 is the first), -1 when no rollout is in progress"
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.status.traffic[1].weight`,description="The canary's share of traffic, in percent (status.traffic lists the stable version first)"
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`

// Workload is a versioned service with autoscaling and canary rollouts.
// Scribe renders it to Git and moves traffic only on health read back.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wl
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Stable",type=string,JSONPath=`.status.stableVersion`
// +kubebuilder:printcolumn:name="Canary",type=string,JSONPath=`.status.canaryVersion`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WorkloadSpec `json:"spec"`
	// +optional
	Status WorkloadStatus `json:"status,omitempty"`
}

// WorkloadList is a list of Workloads.
// +kubebuilder:object:root=true
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}

// PinnedArgsAnnotation, on an Argo Rollouts AnalysisTemplate or
// ClusterAnalysisTemplate, names args (separated by commas, spaces or new
// lines) a Workload's spec.rollout.analysis.args may not give: the
// template's default, or Scribe's own value for version, is always used.
// namespace and workload are never given by a Workload, pinned or not.
const PinnedArgsAnnotation = "scribe.dev/pinned-args"
