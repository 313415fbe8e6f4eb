package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExperimentKind is the kind name of Experiment.
const ExperimentKind = "Experiment"

// ExperimentSpec describes clusters, the components delivered to them and the
// workflow that validates the result.
// +kubebuilder:validation:XValidation:rule="self.targets.all(t, !has(t.depends) || t.depends.all(d, d != t.name && self.targets.exists(o, o.name == d)))",message="every entry of targets[].depends must name another target of this Experiment"
// +kubebuilder:validation:XValidation:rule="self.targets.map(t, has(t.components) ? size(t.components) : 0).sum() <= 256",message="an Experiment delivers at most 256 components across all its targets"
type ExperimentSpec struct {
	// Description of the experiment, for humans.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`

	// RepositoryRef names the Repository Scribe publishes to; defaults to the
	// Repository named "default" in the Experiment's namespace.
	// +optional
	RepositoryRef *LocalObjectReference `json:"repositoryRef,omitempty"`

	// Suspend stops the controller reconciling this Experiment until it is
	// false again (`scribe suspend`, `scribe resume`, as `flux
	// suspend`). A deletion is still carried out.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Targets are the clusters of the experiment and what runs on each.
	//
	// At most 32 targets, and at most 256 components across all of them
	// (each target at most 64). A render's time and memory grow with the
	// components it delivers: two Experiments of 32 targets × 32
	// components (1,024 each) took the controller from 204 to 1,413 MiB,
	// and one of 32 × 64 rendered for almost two minutes. 256 is many
	// times what a test bed of real clusters runs (the examples use at
	// most 4) and keeps one Experiment's render to a fraction of that, so
	// one namespace's Experiment cannot starve the others' of memory or
	// time.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +required
	Targets []Target `json:"targets"`

	// Workflow validates the experiment once every target is ready.
	// +optional
	Workflow *ExperimentWorkflow `json:"workflow,omitempty"`

	// Observability says where the hub receives and serves the telemetry
	// of the targets with observability enabled. Each field falls back to
	// the ConfigMap otel-config in the Experiment's namespace (keys
	// endpoint, metricsURL); a target with observability enabled and
	// either address in neither place is refused at render.
	// +optional
	Observability *HubObservability `json:"observability,omitempty"`
}

// HubObservability is the hub's side of an Experiment's telemetry: the
// collector its targets export to and the metrics backend Grafana reads the
// tenant's series from.
type HubObservability struct {
	// Endpoint is the OTLP/gRPC address of the hub's collector as the
	// targets reach it (http://host:port without TLS, https://host:port
	// with it): a name the target clusters resolve to the hub, never an
	// in-cluster Service name, which resolves inside the target. Each
	// target's collector exports there with the header X-Scope-OrgID set
	// to its tenant.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern="^https?://"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// MetricsURL is the Prometheus-compatible query URL of the hub's
	// metrics backend as Grafana reaches it (for Mimir
	// http://mimir-query-frontend.mimir.svc:8080/prometheus). Scribe
	// renders a Grafana datasource per tenant reading it with the header
	// X-Scope-OrgID.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern="^https?://"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][-+.a-zA-Z0-9]*://[^/?#]*@')",message="metricsURL must not carry user info: it is rendered into objects every reader of the Experiment sees"
	// +optional
	MetricsURL string `json:"metricsURL,omitempty"`
}

// Target is one cluster of an experiment.
type Target struct {
	// Name of the target, unique in the Experiment; a DNS label.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=40
	// +required
	Name string `json:"name"`

	// Cluster the target runs on.
	// +required
	Cluster ClusterSpec `json:"cluster"`

	// Components delivered to the cluster, each resolved through the
	// catalog. At most 64 per target (and 256 across the Experiment's
	// targets: see targets).
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Components []Component `json:"components,omitempty"`

	// Observability wires the cluster's telemetry to the hub.
	// +optional
	Observability *Observability `json:"observability,omitempty"`

	// Depends names targets that must be Ready before this one's components are delivered.
	// Each entry is a target's name, so as long as one at most (40), which
	// also bounds the cost of the rule that checks them.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=40
	// +listType=set
	// +optional
	Depends []string `json:"depends,omitempty"`
}

// ClusterType is where a target's cluster comes from.
// +kubebuilder:validation:Enum=gke;talos;vcluster;hub
type ClusterType string

// Cluster types.
const (
	ClusterGKE      ClusterType = "gke"
	ClusterTalos    ClusterType = "talos"
	ClusterVCluster ClusterType = "vcluster"
	ClusterHub      ClusterType = "hub"
)

// ClusterSpec describes a target's cluster.
// +kubebuilder:validation:XValidation:rule="self.type in ['gke', 'talos'] || !has(self.zone)",message="zone is only valid for gke and talos clusters"
// +kubebuilder:validation:XValidation:rule="self.type in ['gke', 'talos'] || !has(self.machineType)",message="machineType is only valid for gke and talos clusters"
// +kubebuilder:validation:XValidation:rule="self.type in ['gke', 'talos'] || !has(self.project)",message="project is only valid for gke and talos clusters"
type ClusterSpec struct {
	// Type: gke (Cluster API + GCP provider), talos (Cluster API + Talos on
	// GCP), vcluster (a virtual cluster on the hub, via Flux HelmRelease) or
	// hub (the cluster Scribe's applier runs on).
	// +required
	Type ClusterType `json:"type"`

	// Zone of the cluster's nodes, for example us-central1-a.
	// +kubebuilder:validation:Pattern="^[a-z]+-[a-z]+[0-9]+-[a-z]$"
	// +optional
	Zone string `json:"zone,omitempty"`

	// NodeCount is the number of worker nodes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	NodeCount *int32 `json:"nodeCount,omitempty"`

	// MachineType of the nodes, for example e2-medium.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	MachineType string `json:"machineType,omitempty"`

	// Preemptible asks for preemptible (spot) nodes.
	// +optional
	Preemptible bool `json:"preemptible,omitempty"`

	// Project is the GCP project a gke or talos cluster is created in.
	// Without it, the project the controller was given (--gcp-project,
	// chart value gcpProject); a gke or talos target with neither is
	// refused: there is no default project.
	// +kubebuilder:validation:Pattern="^[a-z][-a-z0-9]{4,28}[a-z0-9]$"
	// +optional
	Project string `json:"project,omitempty"`
}

// Component names one catalog entry to deliver to a target. Exactly one of
// app, workflow or config is set.
// +kubebuilder:validation:XValidation:rule="[has(self.app), has(self.workflow), has(self.config)].filter(x, x).size() == 1",message="exactly one of app, workflow or config must be set"
type Component struct {
	// App is the catalog name of an application (Kustomization or HelmRelease).
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +optional
	App string `json:"app,omitempty"`

	// Workflow is the catalog name of a workflow template run on the target.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +optional
	Workflow string `json:"workflow,omitempty"`

	// Config is the catalog name of a configuration bundle.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +optional
	Config string `json:"config,omitempty"`

	// Params are checked against the catalog entry's parameter schema.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Params *apiextensionsv1.JSON `json:"params,omitempty"`
}

// Observability wires a target's telemetry.
type Observability struct {
	// Enabled turns telemetry shipping on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Transport from the target to the hub's collectors: direct (the
	// cluster network). tailscale is refused at render: it is not
	// implemented.
	// +kubebuilder:validation:Enum=direct;tailscale
	// +kubebuilder:default=direct
	// +optional
	Transport string `json:"transport,omitempty"`
	// Tenant the telemetry is stored under.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +optional
	Tenant string `json:"tenant,omitempty"`
}

// ExperimentWorkflow is the validation workflow of an experiment.
// +kubebuilder:validation:XValidation:rule="self.engine == 'testkube' || !has(self.testkube)",message="testkube is only valid with engine: testkube"
// +kubebuilder:validation:XValidation:rule="self.engine != 'testkube' || has(self.testkube)",message="engine: testkube needs the testkube section"
// +kubebuilder:validation:XValidation:rule="self.engine != 'argo' || has(self.template)",message="engine: argo needs a template"
type ExperimentWorkflow struct {
	// Engine runs the workflow: Argo Workflows or Testkube.
	// +kubebuilder:default=argo
	// +optional
	Engine WorkflowEngine `json:"engine,omitempty"`

	// Template is the catalog name of the workflow template.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +optional
	Template string `json:"template,omitempty"`

	// Params are passed to the template as arguments.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Params *apiextensionsv1.JSON `json:"params,omitempty"`

	// Completion says when the experiment is Complete.
	// +optional
	Completion *Completion `json:"completion,omitempty"`

	// Testkube configures an agent evaluation run by Testkube.
	// +optional
	Testkube *TestkubeSpec `json:"testkube,omitempty"`
}

// WorkflowEngine runs an Experiment's validation workflow.
// +kubebuilder:validation:Enum=argo;testkube
type WorkflowEngine string

// DefaultTestkubeNamespace is the namespace a standard Testkube install
// runs in, the default of spec.workflow.testkube.namespace.
const DefaultTestkubeNamespace = "testkube"

// Workflow engines.
const (
	// EngineArgo runs the workflow as an Argo Workflow.
	EngineArgo WorkflowEngine = "argo"
	// EngineTestkube runs the workflow as a Testkube TestWorkflowExecution.
	EngineTestkube WorkflowEngine = "testkube"
)

// Completion says when an experiment ends.
type Completion struct {
	// Mode: workflow (when the workflow finishes) or manual (when the
	// annotation scribe.dev/complete is set).
	// +kubebuilder:default=workflow
	// +optional
	Mode CompletionMode `json:"mode,omitempty"`
	// Timeout fails the experiment when the workflow runs longer.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// CompletionMode says what completes an Experiment.
// +kubebuilder:validation:Enum=workflow;manual
type CompletionMode string

// Completion modes.
const (
	// CompletionWorkflow completes the Experiment when its workflow succeeds.
	CompletionWorkflow CompletionMode = "workflow"
	// CompletionManual completes the Experiment when the annotation
	// scribe.dev/complete is set.
	CompletionManual CompletionMode = "manual"
)

// TestkubeSpec is an agent evaluation: a dataset or inline scenarios run
// against an agent and judged by a model.
// +kubebuilder:validation:XValidation:rule="has(self.dataset) != has(self.scenarios)",message="exactly one of dataset or scenarios must be set"
type TestkubeSpec struct {
	// Dataset to evaluate, fetched by the workflow's setup step.
	// +optional
	Dataset *Dataset `json:"dataset,omitempty"`

	// Scenarios are inline test cases, written into the experiment.json ConfigMap.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=500
	// +listType=map
	// +listMapKey=name
	// +optional
	Scenarios []Scenario `json:"scenarios,omitempty"`

	// AgentRef is the Service of the agent under test.
	// +required
	AgentRef AgentReference `json:"agentRef"`

	// LLMAsAJudgeModel is the model that grades the agent's answers.
	// +kubebuilder:validation:MinLength=1
	// +required
	LLMAsAJudgeModel string `json:"llmAsAJudgeModel"`

	// JudgeURL is the OpenAI-compatible chat completions endpoint that
	// serves LLMAsAJudgeModel, for example
	// http://llm-judge.ml.svc.cluster.local/v1/chat/completions. No install
	// provides one: it is required.
	// +kubebuilder:validation:Pattern="^https?://[^\\s]+$"
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][-+.a-zA-Z0-9]*://[^/?#]*@')",message="judgeURL must not carry user info: it is stored in the Experiment for every reader"
	// +required
	JudgeURL string `json:"judgeURL"`

	// Trigger re-runs the evaluation when a Deployment of the agent
	// changes: those labelled app.kubernetes.io/name=<agentRef.name> in
	// its namespace, which matches every version's Deployment of a Scribe
	// Workload of that name.
	// +optional
	Trigger *Trigger `json:"trigger,omitempty"`

	// Namespace is Testkube's own namespace: the one its agent and
	// operator watch and run executions in, where the agent-eval
	// TestWorkflowTemplates are delivered. The TestWorkflow, its
	// experiment.json ConfigMap, the TestWorkflowExecution and the
	// TestTrigger are rendered into it; the Repository must allow it
	// unless it is the Experiment's namespace or the built-in agent-eval
	// entry's.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:default=testkube
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Dataset names an evaluation dataset.
type Dataset struct {
	// URL of the dataset: https://, which the setup step downloads (stage
	// other stores, such as s3:// or gs://, to https first).
	// +kubebuilder:validation:Pattern="^https://[^\\s]+$"
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][-+.a-zA-Z0-9]*://[^/?#]*@')",message="the dataset URL must not carry user info: it is stored in the Experiment for every reader"
	// +required
	URL string `json:"url"`
	// Format of the dataset: jsonl or csv (the setup step reads no other).
	// +kubebuilder:validation:Enum=jsonl;csv
	// +kubebuilder:default=jsonl
	// +optional
	Format string `json:"format,omitempty"`
}

// Scenario is one inline evaluation case.
type Scenario struct {
	// Name of the scenario, unique in the list.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +required
	Name string `json:"name"`
	// Input sent to the agent.
	// +kubebuilder:validation:MinLength=1
	// +required
	Input string `json:"input"`
	// ExpectedOutput the judge compares the answer with.
	// +optional
	ExpectedOutput string `json:"expectedOutput,omitempty"`
	// Tags group scenarios in reports.
	// +listType=set
	// +optional
	Tags []string `json:"tags,omitempty"`
}

// AgentReference names the Service of an agent.
type AgentReference struct {
	// Name of the agent's Service.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
	// Namespace of the Service; defaults to the Experiment's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Port of the Service.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=80
	// +optional
	Port int32 `json:"port,omitempty"`
}

// Trigger configures a Testkube TestTrigger.
type Trigger struct {
	// Enabled renders a TestTrigger watching the agent's Deployments.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// ExperimentPhase is the lifecycle phase of an Experiment.
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Running;Complete;Failed
type ExperimentPhase string

// Experiment phases.
const (
	ExperimentPending      ExperimentPhase = "Pending"
	ExperimentProvisioning ExperimentPhase = "Provisioning"
	ExperimentReady        ExperimentPhase = "Ready"
	ExperimentRunning      ExperimentPhase = "Running"
	ExperimentComplete     ExperimentPhase = "Complete"
	ExperimentFailed       ExperimentPhase = "Failed"
)

// TargetStatus is the observed state of one target.
type TargetStatus struct {
	// Name of the target.
	Name string `json:"name"`
	// Phase of the target.
	// +optional
	Phase ExperimentPhase `json:"phase,omitempty"`
	// ClusterReady says the target's cluster reported Ready.
	// +optional
	ClusterReady bool `json:"clusterReady,omitempty"`
	// KubeconfigSecret is the Secret holding the cluster's kubeconfig.
	// +optional
	KubeconfigSecret string `json:"kubeconfigSecret,omitempty"`
	// Reason is why the target is not Ready yet, when Scribe knows more
	// than its appliers say: TargetUnreachable while the cluster's API
	// server, as its kubeconfig Secret names it, does not answer.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Address is the target's address as its delivered objects report it
	// (the first of its Gateways, LoadBalancer Services and Ingresses with
	// one in its status): what `{{ targets.<name>.address }}` in workflow
	// params becomes.
	// +optional
	Address string `json:"address,omitempty"`
	// Message explains the phase.
	// +optional
	Message string `json:"message,omitempty"`
	// Components delivered to the target, as their applier reports them.
	// +optional
	Components []ComponentStatus `json:"components,omitempty"`
}

// ComponentStatus is the observed state of one catalog component delivered
// to a target.
type ComponentStatus struct {
	// Name of the catalog entry (or "observability").
	Name string `json:"name"`
	// Delivery is the applier object that installs it, as Kind/namespace/name.
	// +optional
	Delivery string `json:"delivery,omitempty"`
	// Ready says the applier reports the component installed and healthy.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// Message is the applier's own message.
	// +optional
	Message string `json:"message,omitempty"`
}

// WorkflowStatus is the observed state of the validation workflow.
type WorkflowStatus struct {
	// Kind and name of the workflow object.
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// Phase reported by the workflow engine.
	// +optional
	Phase string `json:"phase,omitempty"`
	// Message reported by the workflow engine.
	// +optional
	Message string `json:"message,omitempty"`
	// Target and Component name the workflow component a run of
	// status.runs belongs to.
	// +optional
	Target string `json:"target,omitempty"`
	// +optional
	Component string `json:"component,omitempty"`
}

// ExperimentStatus is the observed state of an Experiment.
type ExperimentStatus struct {
	CommonStatus `json:",inline"`

	// Phase of the experiment; each phase is entered only on evidence read back from the cluster.
	// +optional
	Phase ExperimentPhase `json:"phase,omitempty"`

	// Targets is the per-target state.
	// +optional
	// +listType=map
	// +listMapKey=name
	Targets []TargetStatus `json:"targets,omitempty"`

	// Workflow is the state of the validation workflow.
	// +optional
	Workflow *WorkflowStatus `json:"workflow,omitempty"`

	// Stage is the commit stage the Experiment is at: 1 clusters, 2
	// components and observability, 3 the workflow templates' deliveries,
	// 4 the workflow runs. Each stage is its own commit, made only once
	// the previous one's evidence was read back. While status.revision is
	// empty the stage is intended and its commit is being made.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4
	// +optional
	Stage int32 `json:"stage,omitempty"`

	// Stages records the commit that carried each stage, in order.
	// +listType=map
	// +listMapKey=stage
	// +optional
	Stages []StageStatus `json:"stages,omitempty"`

	// Templates are the deliveries of the workflow templates (the
	// validation workflow's and each workflow component's), as their
	// applier reports them.
	// +optional
	Templates []ComponentStatus `json:"templates,omitempty"`

	// Runs are the Workflows of the workflow components (load generators),
	// as Argo Workflows reports them.
	// +optional
	Runs []WorkflowStatus `json:"runs,omitempty"`

	// LastTriggeredRun is the newest run of the evaluation's TestWorkflow
	// that its TestTrigger (spec.workflow.testkube.trigger) started, as
	// Testkube's API lists it (GET /v1/test-workflows/<name>/executions at
	// the controller's --testkube-api-url); each one's end is an Event. It is a later re-evaluation: it never
	// changes the phase.
	// +optional
	LastTriggeredRun *TriggeredRun `json:"lastTriggeredRun,omitempty"`
}

// TriggeredRun is a TestWorkflow execution a TestTrigger started.
type TriggeredRun struct {
	// Name of the execution (Testkube's <workflow>-<number>).
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Number is the execution's sequence number.
	// +optional
	Number int32 `json:"number,omitempty"`
	// Status is Testkube's result status: queued, running, paused, ...,
	// passed, failed, aborted or canceled; or unknown when its end can no
	// longer be read (Event TriggeredRunUnobserved).
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Status string `json:"status,omitempty"`
	// ScheduledAt is when Testkube scheduled the execution.
	// +optional
	ScheduledAt *metav1.Time `json:"scheduledAt,omitempty"`
	// FinishedAt is when it finished.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// Message says which TestWorkflow and TestTrigger, and the outcome.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// Experiment commit stages.
const (
	// StageClusters: the target clusters.
	StageClusters int32 = 1
	// StageComponents: every target's components and observability wiring.
	StageComponents int32 = 2
	// StageWorkflowTemplates: the deliveries of the workflow templates.
	StageWorkflowTemplates int32 = 3
	// StageWorkflow: the workflow runs (Argo Workflows or the Testkube
	// execution); the final tree.
	StageWorkflow int32 = 4
)

// StageStatus is the commit that carried one stage.
type StageStatus struct {
	// Stage number, 1 to 4.
	Stage int32 `json:"stage"`
	// Commit that carries the stage's render.
	Commit string `json:"commit"`
	// CommittedAt is when Scribe recorded the commit.
	// +optional
	CommittedAt *metav1.Time `json:"committedAt,omitempty"`
}

// Experiment describes clusters, the apps delivered to them and a validation
// workflow. Scribe renders it to Git and drives its phases from what the
// applier reports back.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=exp
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Stage",type=integer,JSONPath=`.status.stage`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Experiment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ExperimentSpec `json:"spec"`
	// +optional
	Status ExperimentStatus `json:"status,omitempty"`
}

// ExperimentList is a list of Experiments.
// +kubebuilder:object:root=true
type ExperimentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Experiment `json:"items"`
}
