package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newValidateCmd() *cobra.Command {
	var f renderFlags
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR",
		Short: "Check that custom resources are valid and render, without writing anything",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bundles, err := f.renderAll(cmd.Context())
			if err != nil {
				return &codeError{code: exitError, err: err}
			}
			for _, b := range bundles {
				if _, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (%d objects, %s)\n", b.Dir, len(b.Objects), b.Digest); err != nil {
					return &codeError{code: exitError, err: fmt.Errorf("write stdout: %w", err)}
				}
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}
