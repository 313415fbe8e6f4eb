// Package contract holds the types that cross between Go and the CUE
// templates: the `input` each template reads, and the `readBack` section
// each template emits next to its objects, naming what the controller must
// read back. `make generate` turns these Go types (and the api/v1alpha1
// types they embed) into CUE definitions under
// schemas/github.com/scribe-gitops/scribe/, which the templates import: a
// field renamed here or in api/v1alpha1 fails the CUE build instead of
// silently rendering nothing.
//
// Nothing here is computed: these are plain data shapes. The render
// package fills the inputs from typed custom resources and decodes the
// read-back section of every render into a Bundle.
package contract

import (
	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// Metadata is the part of a custom resource's metadata the templates see.
type Metadata struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// SourceKind is the Flux source kind that syncs the repository.
type SourceKind string

const (
	// SourceGitRepository is a Flux GitRepository (the Git sink).
	SourceGitRepository SourceKind = "GitRepository"
	// SourceOCIRepository is a Flux OCIRepository (the OCI sink).
	SourceOCIRepository SourceKind = "OCIRepository"
)

// Publish says where a bundle is published and which applier applies it.
type Publish struct {
	// Path in the repository under which `<namespace>/<kind>/<name>/` lives.
	Path    string  `json:"path"`
	Applier Applier `json:"applier"`
	// AllowedNamespaces are the namespaces, besides an Experiment's own,
	// that a component from a user catalog may install into through its
	// entry's namespace (the Repository's spec.allowedNamespaces). Render
	// checks them; the templates do not read them.
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
	// ClusterResources are the cluster-scoped kinds an Experiment's Argo
	// CD AppProject allows its components (the TenantPolicy's
	// spec.clusterResources): none unless the platform grants them.
	ClusterResources []scribev1.GroupKind `json:"clusterResources,omitempty"`
	// SourceRepos are the URL prefixes a user catalog entry's source may
	// be fetched from under Argo CD (the TenantPolicy's spec.sourceRepos).
	// Render checks them; the templates do not read them.
	SourceRepos []string `json:"sourceRepos,omitempty"`
	// SyncName is the name the custom resource's sync objects carry today,
	// if any (the controller reads it from status, publish from the sync
	// file). The templates keep it only when it is the name chart 0.2
	// and earlier gave them, so upgrading renames no working object; any other
	// value is ignored.
	SyncName string `json:"syncName,omitempty"`
}

// Applier is the GitOps tool that applies the bundle.
type Applier struct {
	// Kind is Flux or ArgoCD.
	Kind scribev1.ApplierKind `json:"kind"`
	// Namespace of the applier objects (flux-system, argocd).
	Namespace string `json:"namespace"`
	// Name of the Flux source that syncs the repository.
	Name string `json:"name"`
	// SourceKind is GitRepository or OCIRepository (Flux).
	SourceKind SourceKind `json:"sourceKind"`
	// RepoURL and Revision are the repository and branch (Argo CD; with
	// FluxSource, Revision is the branch each per-CR GitRepository follows).
	RepoURL  string `json:"repoURL"`
	Revision string `json:"revision"`
	// FluxSource, when set (Flux with a GitRepository), gives every custom
	// resource its own GitRepository, a sparse checkout of its directory
	// copied from the GitRepository Name: a commit then changes the
	// artifact of the sources Scribe asks to reconcile, not of every
	// Kustomization in the repository.
	FluxSource *FluxGitSource `json:"fluxSource,omitempty"`
	// FluxArtifact, when set (Flux, the Repository's spec.git.artifacts),
	// gives every custom resource its own Flux OCIRepository instead of a
	// GitRepository: Scribe pushes the custom resource's directory to
	// <URL>/<sync object name>:latest after each commit that changes it.
	FluxArtifact *FluxArtifactSource `json:"fluxArtifact,omitempty"`
	// ServiceAccountName, when set (Flux), is the service account every
	// rendered Flux Kustomization and HelmRelease applies as, in its own
	// namespace (the Repository's spec.applier.serviceAccountName): Flux's
	// multi-tenancy lockdown, instead of the controllers' own rights.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// FluxGitSource is what each per-CR Flux GitRepository copies from the
// GitRepository a Repository names (spec.applier.name): how Flux, not
// Scribe, reaches the repository.
type FluxGitSource struct {
	// URL Flux fetches from.
	URL string `json:"url"`
	// SecretRef names the Secret with Flux's credentials, in the applier's
	// namespace.
	SecretRef string `json:"secretRef,omitempty"`
	// ProxySecretRef names the Secret with Flux's proxy settings.
	ProxySecretRef string `json:"proxySecretRef,omitempty"`
	// Provider is the OIDC provider Flux authenticates with (generic,
	// azure, github).
	Provider string `json:"provider,omitempty"`
	// Timeout of Git operations (a duration such as 60s).
	Timeout string `json:"timeout,omitempty"`
}

// FluxArtifactSource is where each custom resource's own OCIRepository
// pulls the artifact Scribe pushes for it (spec.git.artifacts).
type FluxArtifactSource struct {
	// URL is the repository prefix, oci://host[:port]/path.
	URL string `json:"url"`
	// Insecure lets Flux pull over plain HTTP.
	Insecure bool `json:"insecure,omitempty"`
}

// Workload is the `input` of templates/workload.
type Workload struct {
	Metadata Metadata              `json:"metadata"`
	Spec     scribev1.WorkloadSpec `json:"spec"`
	// Traffic holds one weight per rendered version; the weights add up
	// to 100.
	Traffic []scribev1.VersionWeight `json:"traffic"`
	// Stable is the version the stable Service selects.
	Stable  string  `json:"stable"`
	Publish Publish `json:"publish"`
}

// ComponentKind is the kind of a catalog entry.
type ComponentKind string

const (
	// ComponentApp is an application delivered to a target cluster.
	ComponentApp ComponentKind = "app"
	// ComponentWorkflow is a WorkflowTemplate delivered to the hub.
	ComponentWorkflow ComponentKind = "workflow"
	// ComponentConfig is configuration delivered to a target cluster.
	ComponentConfig ComponentKind = "config"
)

// Resolved is one catalog component as the render resolved it: the
// catalog entry (with #Entry's defaults) and its params checked against
// the entry's #Params.
type Resolved struct {
	Name   string         `json:"name"`
	Kind   ComponentKind  `json:"kind"`
	Entry  map[string]any `json:"entry"`
	Params map[string]any `json:"params"`
}

// Experiment is the `input` of templates/experiment.
type Experiment struct {
	Metadata Metadata                `json:"metadata"`
	Spec     scribev1.ExperimentSpec `json:"spec"`
	Publish  Publish                 `json:"publish"`
	// Targets holds, per target in spec order, what the render resolved
	// for it.
	Targets []TargetInput `json:"targets"`
	// Workflow is the resolved validation workflow, or null.
	Workflow *Resolved `json:"workflow"`
	// Project is the GCP project of gke and talos clusters.
	Project string `json:"project"`
	// SpecHash is the first 8 hex digits of sha256 over the validated
	// spec's JSON (keys sorted): run objects carry it in their names, so a
	// new spec starts new runs.
	SpecHash string `json:"specHash"`
	// OTELEndpoint is the OTLP endpoint targets ship telemetry to, when the
	// cluster names one.
	OTELEndpoint string `json:"otelEndpoint,omitempty"`
	// Datasources are the Grafana datasources of the targets' tenants,
	// committed with the observability wiring (stage 2).
	Datasources []Datasource `json:"datasources"`
	// Stage is the commit stage to render, 1 to 4 (see
	// v1alpha1.ExperimentStatus.Stage): each stage's tree holds the
	// previous stage's and what the stage adds; stage 4 is the final tree.
	Stage int32 `json:"stage"`
}

// TargetInput is what the render resolved for one target.
type TargetInput struct {
	// Components are the target's components, resolved, in spec order.
	Components []Resolved `json:"components"`
	// Observability is the resolved observability wiring, or null where
	// it is off.
	Observability *Resolved `json:"observability"`
}

// Datasource is the Grafana datasource of one tenant: a provisioning file
// the template puts into a ConfigMap Grafana's sidecar picks up.
type Datasource struct {
	// Tenant the datasource reads.
	Tenant string `json:"tenant"`
	// Name of the ConfigMap.
	Name string `json:"name"`
	// Key of the file in the ConfigMap (unique among every ConfigMap the
	// sidecar reads: it writes them into one directory).
	Key string `json:"key"`
	// File is the provisioning file (YAML).
	File string `json:"file"`
}

// ObjectRef names one object the controller reads back. A template names
// it by Key, the object's key in its `objects`; render fills in the
// object's identity from what it rendered under that key.
type ObjectRef struct {
	// Key of the object in the template's objects.
	Key        string `json:"key"`
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
}

// Identity is the ref as the API's ObjectIdentity.
func (r ObjectRef) Identity() scribev1.ObjectIdentity {
	return scribev1.ObjectIdentity{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// ReadBack is the `readBack` section a template emits: every object whose
// status moves the custom resource on, named once, by the template that
// named the object. No controller computes a rendered object's name.
type ReadBack struct {
	// Sync is the applier object written next to the bundle's directory
	// (Flux Kustomization or Argo CD Application); render fills it in
	// from the template's sync object.
	Sync ObjectRef `json:"sync,omitempty"`
	// Deployments are a Workload's Deployments, one per rendered version.
	Deployments []VersionDeployment `json:"deployments,omitempty"`
	// Targets are an Experiment's targets, in spec order.
	Targets []TargetReadBack `json:"targets,omitempty"`
	// Workflow is an Experiment's validation run (Argo Workflow or Testkube
	// TestWorkflowExecution), when it has one and the stage renders it.
	Workflow *ObjectRef `json:"workflow,omitempty"`
	// Templates are an Experiment's workflow template deliveries (the
	// validation workflow's, then each workflow component's), when the
	// stage renders them.
	Templates []ComponentReadBack `json:"templates,omitempty"`
	// Runs are the Workflows of an Experiment's workflow components (load
	// generators), when the stage renders them.
	Runs []RunReadBack `json:"runs,omitempty"`
}

// RunReadBack is the Workflow of one workflow component.
type RunReadBack struct {
	// Target and Component name the workflow component.
	Target    string    `json:"target"`
	Component string    `json:"component"`
	Workflow  ObjectRef `json:"workflow"`
}

// VersionDeployment is the Deployment of one Workload version.
type VersionDeployment struct {
	Version    string    `json:"version"`
	Deployment ObjectRef `json:"deployment"`
}

// TargetReadBack is what tells one Experiment target is ready.
type TargetReadBack struct {
	// Name of the target in spec.targets.
	Name string `json:"name"`
	// Cluster is the object that reports the cluster ready: a Cluster API
	// Cluster (gke, talos) or the vcluster HelmRelease; null for the hub.
	Cluster *ObjectRef `json:"cluster"`
	// KubeconfigSecret is the Secret, in the Experiment's namespace, the
	// applier reaches the cluster with; empty for the hub.
	KubeconfigSecret string `json:"kubeconfigSecret,omitempty"`
	// KubeconfigKey is the key of the kubeconfig in KubeconfigSecret.
	KubeconfigKey string `json:"kubeconfigKey,omitempty"`
	// ArgoCDCluster is the name the target's Argo CD Applications give
	// their destination cluster, which the controller registers with Argo
	// CD from the kubeconfig Secret; empty for the hub and with Flux.
	ArgoCDCluster string `json:"argoCDCluster,omitempty"`
	// Addressable are the target's delivered objects that may report its
	// address (`{{ targets.<name>.address }}` in workflow params): its
	// hydrated components' Gateways, Services of type LoadBalancer and
	// Ingresses, in that order of preference. Filled by render, not by the
	// templates.
	Addressable []scribev1.ObjectIdentity `json:"addressable,omitempty"`
	// Components are the target's deliveries, in spec order, then the
	// observability wiring.
	Components []ComponentReadBack `json:"components,omitempty"`
}

// ComponentReadBack is the applier object that delivers one component.
type ComponentReadBack struct {
	// Name of the component (its catalog name, or "observability").
	Name string `json:"name"`
	// Delivery is the Flux Kustomization or HelmRelease, or Argo CD
	// Application, that installs it; null when the render has none.
	Delivery *ObjectRef `json:"delivery"`
}
