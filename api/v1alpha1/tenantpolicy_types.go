package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantPolicyKind is the kind name of TenantPolicy.
const TenantPolicyKind = "TenantPolicy"

// TenantPolicySpec is what the platform grants the Scribe resources of the
// namespaces it selects: everything that widens what a tenant's commits
// can do. Tenants write Repositories, Workloads, Experiments and
// Pipelines in their own namespace; a Repository may narrow what its
// namespace's policy grants (spec.allowedNamespaces), never widen it. A
// namespace no policy selects gets nothing beyond its own namespace.
type TenantPolicySpec struct {
	// NamespaceSelector selects the tenant namespaces this policy governs.
	// A namespace selected by two policies is refused (PolicyConflict)
	// until one of them no longer selects it. An empty selector selects
	// every namespace. An operator other than In, NotIn, Exists and
	// DoesNotExist, In or NotIn without values, and Exists or
	// DoesNotExist with values are refused here; a selector that cannot be
	// evaluated all the same (a key or value that is not a label's) fails
	// closed: every namespace it may select is refused (PolicyInvalid)
	// rather than given the defaults. Select on labels tenants cannot
	// write (kubernetes.io/metadata.name, or labels an admission policy
	// reserves to the platform): a tenant able to relabel its namespace
	// could otherwise move under a more generous policy.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? (has(e.values) && size(e.values) > 0) : (e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0)))",message="spec.namespaceSelector.matchExpressions: the operator must be In or NotIn with values, or Exists or DoesNotExist without"
	// +required
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`

	// DestinationNamespaces are the namespaces, besides a custom resource's
	// own, that its deliveries may install into: a user catalog entry's
	// `namespace`, and the destinations of an Argo CD AppProject. A
	// Repository's spec.allowedNamespaces may name only these.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	DestinationNamespaces []string `json:"destinationNamespaces,omitempty"`

	// ClusterResources are the cluster-scoped kinds an Experiment's Argo CD
	// AppProject allows its components to apply (their CRDs, Namespaces,
	// ClusterRoles). None by default; a Workload's AppProject allows none
	// whatever this says.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	ClusterResources []GroupKind `json:"clusterResources,omitempty"`

	// SourceRepos are the repositories (URL prefixes, bound as Secrets
	// are: same scheme and host, a path below the prefix) that a user
	// catalog entry's source (git, oci, or a Helm repository) may be fetched
	// from under Argo CD: they become the Experiment's AppProject
	// sourceRepos, and Argo CD fetches them with whatever repository
	// credentials it holds for them. The built-in catalog's sources and
	// the Repository's own are always allowed. Flux fetches a tenant's
	// sources without the platform's credentials and is not bound by it.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=2048
	// +optional
	SourceRepos []string `json:"sourceRepos,omitempty"`

	// Applier says where the tenant's sync objects may live and what they
	// apply as.
	// +optional
	Applier *TenantApplier `json:"applier,omitempty"`

	// CatalogSources are the Flux sources outside the tenant's namespace
	// that a Repository's spec.catalog may name (a catalog the platform
	// publishes in flux-system, say). A source in the tenant's own
	// namespace needs no entry.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	CatalogSources []CatalogSourceReference `json:"catalogSources,omitempty"`
}

// GroupKind names a kind; "*" matches every group or kind, as in an Argo
// CD AppProject.
type GroupKind struct {
	// Group of the kind ("" for the core group).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Group string `json:"group"`
	// Kind name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Kind string `json:"kind"`
}

// TenantApplier is what a tenant's deliveries apply through.
type TenantApplier struct {
	// Namespaces where a Repository's spec.applier.namespace may put the
	// tenant's sync objects (its Flux Kustomizations and GitRepositories,
	// its Argo CD AppProjects). Without a policy, the controller's
	// --applier-namespaces are allowed.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// ServiceAccountName, with Flux, is the service account every Flux
	// Kustomization and HelmRelease Scribe renders for the tenant applies
	// as (looked up in each object's own namespace: the applier's for the
	// per-custom-resource sync Kustomization, the tenant's for an
	// Experiment's components): Flux's multi-tenancy lockdown. A
	// Repository's spec.applier.serviceAccountName must be empty or this
	// same name.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// CatalogSourceReference names a Flux source a catalog may be read from.
type CatalogSourceReference struct {
	// Kind of the Flux source.
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository
	// +required
	Kind string `json:"kind"`
	// Namespace of the source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Namespace string `json:"namespace"`
	// Name of the source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=stenant
// +kubebuilder:printcolumn:name="Destinations",type=string,JSONPath=`.spec.destinationNamespaces`
// +kubebuilder:printcolumn:name="Account",type=string,JSONPath=`.spec.applier.serviceAccountName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TenantPolicy is written by the platform team, never by a tenant: it is
// cluster-scoped, and tenants get no rights on it. It bounds what the
// Scribe resources of the namespaces it selects may make Flux or Argo CD
// do.
type TenantPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TenantPolicySpec `json:"spec"`
}

// +kubebuilder:object:root=true

// TenantPolicyList is a list of TenantPolicies.
type TenantPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TenantPolicy `json:"items"`
}

// AllowedURLsAnnotation binds a Secret to the URLs Scribe may send its
// credentials to (or, for a signing key, push commits it signed to): URL
// prefixes separated by commas or new lines. Scribe uses a Secret a
// Repository names only when the remote, forge API or registry is within
// one of them.
const AllowedURLsAnnotation = "scribe.dev/allowed-urls"
