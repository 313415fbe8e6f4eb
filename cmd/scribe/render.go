package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/scribe-gitops/scribe/internal/publish"
)

func newRenderCmd() *cobra.Command {
	var f renderFlags
	var out string
	cmd := &cobra.Command{
		Use:   "render -f FILE|DIR|- [-o DIR]",
		Short: "Render custom resources offline, as the controller would",
		Long: `Render validates each Experiment and Workload as the kube-apiserver would,
renders it through the embedded CUE templates, checks every object against its
schema, and writes the repository tree to -o DIR (atomically: on any error
nothing is written) or, without -o, a YAML stream to stdout. Pipelines,
Repositories and TenantPolicies in the input are validated, not rendered
(the controller renders a Pipeline's stages).

-f - reads a YAML stream from stdin. A directory is read recursively for
*.yaml, *.yml and *.json, skipping hidden files and folders.`,
		Example: `  # Render a directory of custom resources into a new tree
  scribe render -f deploy/ -o rendered/

  # Look at one Workload's objects as Argo CD would apply them
  scribe render -f checkout.yaml --applier ArgoCD --repo-url https://git.example.com/org/fleet.git

  # With a team's own catalog entries, from a stream on stdin
  kustomize build lab/ | scribe render -f - --catalog catalog/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out != "" {
				if err := checkOutput(out, f.files); err != nil {
					return &codeError{code: exitError, err: err}
				}
			}
			bundles, err := f.renderAll(cmd.Context())
			if err != nil {
				return &codeError{code: exitError, err: err}
			}
			if out != "" {
				if err := publish.WriteOutputDir(cmd.Context(), out, bundles); err != nil {
					return &codeError{code: exitError, err: err}
				}
				return nil
			}
			if err := writeStream(cmd.Context(), cmd.OutOrStdout(), bundles); err != nil {
				return &codeError{code: exitError, err: err}
			}
			return nil
		},
	}
	f.register(cmd)
	registerOutput(cmd.Flags(), &out, "DIR")
	return cmd
}

// isManifest says whether a bundle file is a Kubernetes object (not the
// kustomization.yaml or the provenance file).
func isManifest(p string) bool {
	return strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, "/kustomization.yaml")
}
