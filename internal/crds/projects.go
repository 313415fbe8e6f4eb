package crds

// Project is one upstream project whose CustomResourceDefinitions Scribe
// renders objects for (or reads back).
type Project struct {
	// Name is what callers ask for, e.g. "flux-source".
	Name string
	// Mirror is the project's folder in an offline mirror (SCRIBE_CRDS_DIR)
	// and, for a project the repository carries, in RepoFolder. Several
	// projects may share one folder (flux, talos).
	Mirror string
	// Upstream is the repository the files come from.
	Upstream string
	// Version is the pinned upstream version: the module version when
	// Module is set, else the release tag.
	Version string
	// Module is the Go module that holds the files, or "" when the Go module
	// proxy does not serve the project: then the repository carries its
	// files (RepoFolder/Mirror), copied from Upstream at Commit.
	Module string
	// Sum is the module's go.sum hash (h1:...); a download with another hash
	// is refused. Only with Module.
	Sum string
	// Commit is the upstream commit of the Version tag the repository's
	// copies come from. Only without Module.
	Commit string
	// Path is the folder of the files inside the module, or, without
	// Module, inside the upstream repository at Commit.
	Path string
	// Files are the CRD file names, exactly as upstream names them; each
	// holds one apiextensions.k8s.io/v1 CustomResourceDefinition.
	Files []string
	// Kinds are the kinds those CRDs define, one per file, in Files order.
	Kinds []string
}

// InRepo reports whether the repository carries p's files (RepoFolder):
// those of every project the Go module proxy does not serve.
func (p Project) InRepo() bool {
	return p.Module == ""
}

// Projects returns the table of upstream projects, a fresh copy on every
// call. The module pins are the newest versions whose go.mod needs at most
// the Go version in go.mod; the other projects are pinned to the release
// the repository's copies come from (see RepoFolder/SOURCES.md). An offline
// mirror holds the same files.
func Projects() []Project {
	return []Project{
		{
			Name: "flux-source", Mirror: "flux",
			Upstream: "github.com/fluxcd/source-controller", Version: "v1.9.6",
			Module: "github.com/fluxcd/source-controller", Sum: "h1:nG534/bI6nVpyHra7ONAk6xDB3xPsVT+EOLHZHXPrrc=",
			Path: "config/crd/bases",
			Files: []string{
				"source.toolkit.fluxcd.io_gitrepositories.yaml",
				"source.toolkit.fluxcd.io_ocirepositories.yaml",
				"source.toolkit.fluxcd.io_helmrepositories.yaml",
				"source.toolkit.fluxcd.io_helmcharts.yaml",
				"source.toolkit.fluxcd.io_buckets.yaml",
			},
			Kinds: []string{"GitRepository", "OCIRepository", "HelmRepository", "HelmChart", "Bucket"},
		},
		{
			Name: "flux-kustomize", Mirror: "flux",
			Upstream: "github.com/fluxcd/kustomize-controller", Version: "v1.9.6",
			Module: "github.com/fluxcd/kustomize-controller", Sum: "h1:XB+G3A0mky0j5uVHZWv4oSlS2RvZBoNIUhstIvY0JKE=",
			Path:  "config/crd/bases",
			Files: []string{"kustomize.toolkit.fluxcd.io_kustomizations.yaml"},
			Kinds: []string{"Kustomization"},
		},
		{
			// The proxy refuses the root module.
			Name: "flux-helm", Mirror: "flux",
			Upstream: "github.com/fluxcd/helm-controller", Version: "v1.6.3",
			Commit: "372c34e2b4a455d24ef6cbb8321c82c4533dbbd8", Path: "config/crd/bases",
			Files: []string{"helm.toolkit.fluxcd.io_helmreleases.yaml"},
			Kinds: []string{"HelmRelease"},
		},
		{
			Name: "argocd", Mirror: "argocd",
			Upstream: "github.com/argoproj/argo-cd", Version: "v3.5.7",
			Module: "github.com/argoproj/argo-cd/v3", Sum: "h1:Xm1BF+I5OgDKUG3SDK49vn2/Y5AMyaNVko+/JT08gj0=",
			Path:  "manifests/crds",
			Files: []string{"application-crd.yaml", "appproject-crd.yaml"},
			Kinds: []string{"Application", "AppProject"},
		},
		{
			// The full schemas; the proxy refuses the module.
			Name: "argo-workflows", Mirror: "argo-workflows",
			Upstream: "github.com/argoproj/argo-workflows", Version: "v4.1.2",
			Commit: "16a52d67daf2f4a8a76fa8bec02a76a46aa46257", Path: "manifests/base/crds/full",
			Files: []string{
				"argoproj.io_workflows.yaml",
				"argoproj.io_workflowtemplates.yaml",
				"argoproj.io_clusterworkflowtemplates.yaml",
			},
			Kinds: []string{"Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate"},
		},
		{
			// The proxy refuses the module.
			Name: "testkube", Mirror: "testkube",
			Upstream: "github.com/kubeshop/testkube", Version: "2.12.2",
			Commit: "136add7677d3af73489a80e422c167e59c433fcc", Path: "k8s/crd",
			Files: []string{
				"testworkflows.testkube.io_testworkflows.yaml",
				"testworkflows.testkube.io_testworkflowtemplates.yaml",
				"testworkflows.testkube.io_testworkflowexecutions.yaml",
				"tests.testkube.io_testtriggers.yaml",
			},
			Kinds: []string{"TestWorkflow", "TestWorkflowTemplate", "TestWorkflowExecution", "TestTrigger"},
		},
		{
			Name: "keda", Mirror: "keda",
			Upstream: "github.com/kedacore/keda", Version: "v2.21.0",
			Module: "github.com/kedacore/keda/v2", Sum: "h1:R6z2HZvstK4RLUMxroNACzBj74xGxt3kG59b5Xc+Xps=",
			Path: "config/crd/bases",
			Files: []string{
				"keda.sh_scaledobjects.yaml",
				"keda.sh_scaledjobs.yaml",
				"keda.sh_triggerauthentications.yaml",
			},
			Kinds: []string{"ScaledObject", "ScaledJob", "TriggerAuthentication"},
		},
		{
			// The standard channel.
			Name: "gateway-api", Mirror: "gateway-api",
			Upstream: "github.com/kubernetes-sigs/gateway-api", Version: "v1.6.3",
			Module: "sigs.k8s.io/gateway-api", Sum: "h1:lKpJa5bGlraC/QeACvCpsHLdmO6y0iKfzVl6gzaFEYc=",
			Path: "config/crd/standard",
			Files: []string{
				"gateway.networking.k8s.io_httproutes.yaml",
				"gateway.networking.k8s.io_gateways.yaml",
				"gateway.networking.k8s.io_gatewayclasses.yaml",
				"gateway.networking.k8s.io_grpcroutes.yaml",
				"gateway.networking.k8s.io_referencegrants.yaml",
			},
			Kinds: []string{"HTTPRoute", "Gateway", "GatewayClass", "GRPCRoute", "ReferenceGrant"},
		},
		{
			// The rest of the same standard channel, which Scribe renders
			// nothing for but a Gateway API data plane watches (Traefik's
			// provider waits for their informers). Offline mirrors carry
			// only what Scribe renders, so this folder is looked for apart
			// from "gateway-api" and, when absent, read from the module.
			Name: "gateway-api-dataplane", Mirror: "gateway-api-dataplane",
			Upstream: "github.com/kubernetes-sigs/gateway-api", Version: "v1.6.3",
			Module: "sigs.k8s.io/gateway-api", Sum: "h1:lKpJa5bGlraC/QeACvCpsHLdmO6y0iKfzVl6gzaFEYc=",
			Path: "config/crd/standard",
			Files: []string{
				"gateway.networking.k8s.io_backendtlspolicies.yaml",
				"gateway.networking.k8s.io_tlsroutes.yaml",
			},
			Kinds: []string{"BackendTLSPolicy", "TLSRoute"},
		},
		{
			// Argo Rollouts' analysis templates, which a Workload's analysis
			// may reference (spec.rollout.analysis.templates). v1.10.2's
			// go.mod needs a newer Go than go.mod's.
			Name: "argo-rollouts", Mirror: "argo-rollouts",
			Upstream: "github.com/argoproj/argo-rollouts", Version: "v1.10.1",
			Module: "github.com/argoproj/argo-rollouts", Sum: "h1:6oyVPGiHHxu3ixkT6mngemh88HLPDoTX1IwO6KNR1Y4=",
			Path: "manifests/crds",
			Files: []string{
				"analysis-template-crd.yaml",
				"cluster-analysis-template-crd.yaml",
			},
			Kinds: []string{"AnalysisTemplate", "ClusterAnalysisTemplate"},
		},
		{
			Name: "cluster-api", Mirror: "cluster-api",
			Upstream: "github.com/kubernetes-sigs/cluster-api", Version: "v1.14.2",
			Module: "sigs.k8s.io/cluster-api", Sum: "h1:o3GFNaeNFAOEEMpDPfhCK+2CjmV6gtQ8yLEcUwCg7bA=",
			Path: "core/config/crd/bases",
			Files: []string{
				"cluster.x-k8s.io_clusters.yaml",
				"cluster.x-k8s.io_machinedeployments.yaml",
				"cluster.x-k8s.io_machinepools.yaml",
			},
			Kinds: []string{"Cluster", "MachineDeployment", "MachinePool"},
		},
		{
			Name: "capg", Mirror: "capg",
			Upstream: "github.com/kubernetes-sigs/cluster-api-provider-gcp", Version: "v1.13.1",
			Module: "sigs.k8s.io/cluster-api-provider-gcp", Sum: "h1:l4zdwsHFwcA8CP5P4NPar9fUu5kMwucKhp2IQBHduJs=",
			Path: "config/crd/bases",
			Files: []string{
				"infrastructure.cluster.x-k8s.io_gcpmanagedclusters.yaml",
				"infrastructure.cluster.x-k8s.io_gcpmanagedcontrolplanes.yaml",
				"infrastructure.cluster.x-k8s.io_gcpmanagedmachinepools.yaml",
				"infrastructure.cluster.x-k8s.io_gcpclusters.yaml",
				"infrastructure.cluster.x-k8s.io_gcpmachinetemplates.yaml",
			},
			Kinds: []string{"GCPManagedCluster", "GCPManagedControlPlane", "GCPManagedMachinePool", "GCPCluster", "GCPMachineTemplate"},
		},
		{
			// The proxy serves only older versions of the root module.
			Name: "prometheus-operator", Mirror: "prometheus-operator",
			Upstream: "github.com/prometheus-operator/prometheus-operator", Version: "v0.93.0",
			Commit: "f8fafd475f3d132e239432ae6172de60a6cb6516", Path: "example/prometheus-operator-crd",
			Files: []string{
				"monitoring.coreos.com_servicemonitors.yaml",
				"monitoring.coreos.com_podmonitors.yaml",
			},
			Kinds: []string{"ServiceMonitor", "PodMonitor"},
		},
		{
			// The proxy refuses the module.
			Name: "talos-controlplane", Mirror: "talos",
			Upstream: "github.com/siderolabs/cluster-api-control-plane-provider-talos", Version: "v0.5.12",
			Commit: "97b33e78ff1091bd143db6c428b8ed53ec3e0931", Path: "config/crd/bases",
			Files: []string{"controlplane.cluster.x-k8s.io_taloscontrolplanes.yaml"},
			Kinds: []string{"TalosControlPlane"},
		},
		{
			// The proxy refuses the module.
			Name: "talos-bootstrap", Mirror: "talos",
			Upstream: "github.com/siderolabs/cluster-api-bootstrap-provider-talos", Version: "v0.6.12",
			Commit: "065b6843501a9b9fad01133b30f98b891aa5aceb", Path: "config/crd/bases",
			Files: []string{"bootstrap.cluster.x-k8s.io_talosconfigtemplates.yaml"},
			Kinds: []string{"TalosConfigTemplate"},
		},
	}
}

// Names returns the names of every project in the table, in table order.
func Names() []string {
	ps := Projects()
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}
