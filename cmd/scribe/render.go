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
		Use:   "render -f FILE|DIR [-o DIR]",
		Short: "Render custom resources offline, as the controller would",
		Long: `Render validates each Experiment and Workload as the kube-apiserver would,
renders it through the embedded CUE templates, checks every object against its
schema, and writes the repository tree to -o DIR (atomically: on any error
nothing is written) or, without -o, a YAML stream to stdout.`,
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
