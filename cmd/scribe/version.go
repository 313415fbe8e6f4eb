package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/scribe-gitops/scribe/render"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of scribe and of its embedded templates",
		Example: `  # The templates line is the templateVersion in each .scribe.json
  scribe version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := render.New()
			if err != nil {
				return &codeError{code: exitError, err: err}
			}
			goVersion := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				goVersion = bi.GoVersion
			}
			if _, err := fmt.Fprintf(cmd.OutOrStdout(), "scribe %s\ntemplates %s\ngo %s\n", version, e.TemplateVersion(), goVersion); err != nil {
				return &codeError{code: exitError, err: fmt.Errorf("write stdout: %w", err)}
			}
			return nil
		},
	}
}
