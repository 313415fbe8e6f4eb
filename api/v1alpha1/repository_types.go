package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RepositoryKind is the kind name of Repository.
const RepositoryKind = "Repository"

// RepositorySpec says where Scribe publishes rendered manifests and which
// GitOps applier (Flux or Argo CD) applies them.
// +kubebuilder:validation:XValidation:rule="has(self.git) != has(self.oci)",message="exactly one of git or oci must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.git) || !has(self.git.artifacts) || !has(self.applier.kind) || self.applier.kind == 'Flux'",message="spec.git.artifacts needs spec.applier.kind Flux: Argo CD reads the branch"
type RepositorySpec struct {
	// Git publishes rendered manifests as commits to a Git branch.
	// +optional
	Git *GitRepositorySpec `json:"git,omitempty"`

	// OCI publishes rendered manifests as a Flux OCI artifact.
	// +optional
	OCI *OCIRepositorySpec `json:"oci,omitempty"`

	// Applier is the GitOps tool that applies what Scribe publishes, and the
	// name of its source object that Scribe asks to reconcile after a push.
	// +required
	Applier ApplierSpec `json:"applier"`

	// Catalog is the Flux source where the platform team publishes the
	// component catalog: Scribe's catalog/ directory of its release, whose
	// manifests the built-in app, config and workflow entries deliver (an
	// Experiment using one of them without spec.catalog fails to render),
	// and the team's own entries (the CUE files at path) added to the
	// built-in ones. An entry of the user catalog that replaces a built-in
	// entry must say `override: true`. Scribe evaluates the catalog's CUE in
	// a child process bounded in time and memory first; a catalog that
	// exceeds the bound is CatalogInvalid.
	// +optional
	Catalog *CatalogSource `json:"catalog,omitempty"`

	// AllowedNamespaces are the namespaces, besides an Experiment's own,
	// that components of a user catalog (spec.catalog) may install into
	// through their entry's `namespace`. A component whose entry names no
	// namespace installs into its Experiment's namespace; the built-in
	// catalog's entries keep their own namespaces. An entry naming any
	// other namespace is a render error.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
}

// GitRepositorySpec describes a Git remote.
// +kubebuilder:validation:XValidation:rule="!has(self.artifacts) || !has(self.pullRequest)",message="spec.git.artifacts cannot be used with spec.git.pullRequest: a merge on the forge would push no artifact"
type GitRepositorySpec struct {
	// URL of the remote: https://, http:// or ssh://. It carries no
	// credentials (they belong in secretRef): no user info in an https or
	// http URL, no password in an ssh URL (ssh://git@host/... is fine).
	// +kubebuilder:validation:Pattern="^(https?|ssh)://.+$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[hH][tT][tT][pP][sS]?://[^/?#]*@') && !self.matches('^[sS][sS][hH]://[^/?#@]*:[^/?#]*@')",message="the URL must not carry credentials: put them in spec.git.secretRef (an ssh login such as git@ is fine)"
	// +required
	URL string `json:"url"`

	// Branch Scribe commits to.
	// +kubebuilder:default=main
	// +kubebuilder:validation:MinLength=1
	// +optional
	Branch string `json:"branch,omitempty"`

	// Path in the repository under which Scribe writes
	// `<namespace>/<kind>/<name>/`. Scribe never writes outside its own paths.
	// +kubebuilder:default="."
	// +kubebuilder:validation:Pattern="^[^/].*$|^\\.$"
	// +kubebuilder:validation:XValidation:rule="!self.contains('\\\\')",message="path must not hold a backslash: use / between directories"
	// +kubebuilder:validation:XValidation:rule="!self.lowerAscii().matches('(^|/)[.]git[. ]*(/|$)')",message="path must not have a .git component (in any case): Git refuses it in a tree and every clone would fail"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="path must stay inside the repository (no .. component)"
	// +optional
	Path string `json:"path,omitempty"`

	// SecretRef holds credentials: `username`+`password` or `bearerToken`
	// for HTTPS; `identity` (private key) and `known_hosts` for SSH.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Author of Scribe's commits.
	// +optional
	Author *CommitAuthor `json:"author,omitempty"`

	// Signing signs Scribe's commits with a GPG or SSH key.
	// +optional
	Signing *CommitSigning `json:"signing,omitempty"`

	// CommitTemplate is a Go text/template for the subject and body of
	// Scribe's commits, executed with .Branch, .Path and .Changes (each with
	// .Action, .Object, .Kind, .Namespace, .Name, .Generation, .Digest,
	// .Reason, .Dir). Scribe always appends the Scribe-Object,
	// Scribe-Generation and Scribe-Digest trailers, so every commit traces
	// back to its custom resource whatever the template says; the template
	// may not write them. Its execution is bounded (2s, 64 KiB of output):
	// a range must be over the data (such as .Changes), at most two deep,
	// and a template cannot invoke another.
	// +kubebuilder:validation:MaxLength=16384
	// +optional
	CommitTemplate string `json:"commitTemplate,omitempty"`

	// PullRequest, when set, makes Scribe push each change to its own branch
	// and open a pull request instead of committing to Branch.
	// +optional
	PullRequest *PullRequestSpec `json:"pullRequest,omitempty"`

	// Artifacts, with Flux, makes Scribe also push each custom resource's
	// directory as an OCI artifact of its own, right after the commit
	// that changed it (the commit stays the record: the artifact's
	// org.opencontainers.image.revision names it), and gives each custom
	// resource a Flux OCIRepository reading that artifact instead of a
	// GitRepository cloning the branch. Flux's fetch then costs a
	// manifest and one small layer whatever the repository's size.
	// +optional
	Artifacts *ArtifactsSpec `json:"artifacts,omitempty"`
}

// ArtifactsSpec is where Scribe pushes the per-custom-resource artifacts
// that Flux applies (spec.git.artifacts).
// +kubebuilder:validation:XValidation:rule="!self.url.matches('^oci://[^/]*@')",message="the URL must not carry credentials: put them in spec.git.artifacts.secretRef"
type ArtifactsSpec struct {
	// URL is the OCI repository prefix, oci://host[:port]/path: each
	// custom resource's artifact is <url>/<key>/<its sync object's
	// name>:latest, where <key> is 8 hex digits of a hash of spec.git's
	// url, branch and path (so Repositories that share a prefix never
	// share an artifact) and the sync object's name is
	// workload.<namespace>.<name>, as its Flux Kustomization is named.
	// Flux pulls from the same URL. HTTPS, or plain HTTP to a loopback
	// registry (127.0.0.1, localhost), as for spec.oci.
	// +kubebuilder:validation:Pattern="^oci://[^/]+/[^:@]+$"
	// +kubebuilder:validation:MaxLength=180
	// +required
	URL string `json:"url"`
	// SecretRef is a docker-config Secret (`.dockerconfigjson`) Scribe
	// pushes with, bound to the URL by its scribe.dev/allowed-urls
	// annotation. Flux pulls as the Repository's Flux service account
	// (spec.applier.serviceAccountName and its imagePullSecrets), or
	// anonymously.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// CommitAuthor is the name and email on Scribe's commits.
type CommitAuthor struct {
	// Name of the author.
	// +kubebuilder:default=scribe
	// +optional
	Name string `json:"name,omitempty"`
	// Email of the author.
	// +kubebuilder:default="scribe@scribe.dev"
	// +optional
	Email string `json:"email,omitempty"`
}

// CommitSigning names the key that signs commits.
type CommitSigning struct {
	// Format of the signature.
	// +kubebuilder:validation:Enum=gpg;ssh
	// +required
	Format string `json:"format"`
	// SecretRef holds the key (`git.asc` for GPG, `identity` for SSH) and an
	// optional `passphrase`.
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`
}

// PullRequestSpec configures promotion by pull request.
type PullRequestSpec struct {
	// Provider is the forge's API flavour.
	// +kubebuilder:validation:Enum=github;gitlab;gitea
	// +required
	Provider string `json:"provider"`
	// Base is the branch pull requests target; defaults to the Git branch.
	// +optional
	Base string `json:"base,omitempty"`
	// APIURL overrides the forge API endpoint (GitHub Enterprise, self-hosted GitLab or Gitea),
	// without user info: the token belongs in secretRef.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][-+.a-zA-Z0-9]*://[^/?#]*@')",message="spec.git.pullRequest.apiURL must not carry user info: the token belongs in spec.git.pullRequest.secretRef"
	// +optional
	APIURL string `json:"apiURL,omitempty"`
	// SecretRef holds the forge API `token`.
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`
}

// OCIRepositorySpec describes an OCI repository.
type OCIRepositorySpec struct {
	// URL of the OCI repository, oci://host/path.
	// +kubebuilder:validation:Pattern="^oci://.+$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^oci://[^/]*@')",message="the URL must not carry credentials: put them in spec.oci.secretRef"
	// +required
	URL string `json:"url"`
	// SecretRef is a docker-config Secret (`.dockerconfigjson`) for the registry.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// ApplierKind is the GitOps tool that applies what Scribe publishes.
// +kubebuilder:validation:Enum=Flux;ArgoCD
type ApplierKind string

// Appliers Scribe publishes for.
const (
	// ApplierFlux: a Flux GitRepository or OCIRepository syncs the
	// repository and a Kustomization per custom resource applies it.
	ApplierFlux ApplierKind = "Flux"
	// ApplierArgoCD: an Argo CD Application per custom resource syncs and
	// applies it.
	ApplierArgoCD ApplierKind = "ArgoCD"
)

// ApplierSpec names the GitOps tool that applies the published manifests.
type ApplierSpec struct {
	// Kind of applier.
	// +kubebuilder:default=Flux
	// +optional
	Kind ApplierKind `json:"kind,omitempty"`
	// Namespace of the applier's objects: where Scribe's rendered Flux
	// Kustomizations or Argo CD Applications live (flux-system, argocd).
	// +kubebuilder:validation:MinLength=1
	// +required
	Namespace string `json:"namespace"`
	// Name of the source object that syncs this repository: the Flux
	// GitRepository/OCIRepository, or the Argo CD repository URL's Application.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
	// ServiceAccountName, with Flux, is the service account (in the
	// Experiment's or Workload's namespace for their objects, in Namespace
	// for the per-custom-resource sync Kustomization) that every Flux
	// Kustomization and HelmRelease Scribe renders for this Repository
	// applies as: Flux's multi-tenancy lockdown, so applied objects get that
	// account's rights instead of kustomize-controller's and
	// helm-controller's own (cluster-admin). Deliveries to a target cluster
	// apply with that cluster's kubeconfig instead. Ignored with Argo CD
	// (use an AppProject's destination service accounts).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// CatalogSource references a user catalog kept in a Flux source.
type CatalogSource struct {
	// Kind of the Flux source.
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository
	// +required
	Kind string `json:"kind"`
	// Name of the Flux source.
	// +required
	Name string `json:"name"`
	// Namespace of the Flux source; defaults to the Repository's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Path of the catalog inside the source artifact: the directory of
	// its CUE files, and the root the built-in entries' paths (and user
	// entries of `type: "catalog"`) resolve against.
	// +kubebuilder:default="."
	// +optional
	Path string `json:"path,omitempty"`
}

// RepositoryStatus is the observed state of a Repository.
type RepositoryStatus struct {
	CommonStatus `json:",inline"`

	// LastAccessCheck is when Scribe last reached the remote successfully.
	// +optional
	LastAccessCheck *metav1.Time `json:"lastAccessCheck,omitempty"`

	// Catalog is the user catalog (spec.catalog) Scribe last loaded; the
	// CatalogReady condition says whether it is current.
	// +optional
	Catalog *CatalogStatus `json:"catalog,omitempty"`
}

// CatalogReadyCondition reports whether a Repository's spec.catalog could be
// loaded from its Flux source. It does not affect Ready: Workloads do not
// use the catalog.
const CatalogReadyCondition = "CatalogReady"

// CatalogStatus is the user catalog Scribe renders Experiments with.
type CatalogStatus struct {
	// Revision of the Flux source artifact the catalog was read from.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Digest of that artifact.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Entries are the components Experiments can use, as kind/name: the
	// user catalog's and the built-in ones.
	// +optional
	Entries []string `json:"entries,omitempty"`
}

// Repository is where Scribe publishes rendered manifests, and who applies them.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=srepo
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.git.url`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Catalog",type=string,JSONPath=`.status.catalog.revision`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Repository struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec RepositorySpec `json:"spec"`
	// +optional
	Status RepositoryStatus `json:"status,omitempty"`
}

// RepositoryList is a list of Repositories.
// +kubebuilder:object:root=true
type RepositoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Repository `json:"items"`
}
