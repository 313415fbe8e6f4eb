package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newValidateCmd() *cobra.Command {
	var f renderFlags
	var strictRefs bool
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR|-",
		Short: "Check that custom resources are valid and render, without writing anything",
		Long: `Validate checks every custom resource of every kind of Scribe's API as the
kube-apiserver would admit it (the CRD's schema, unknown fields, CEL rules,
defaults): Workloads and Experiments are rendered too, as scribe render
does; Pipelines, Repositories and TenantPolicies are checked only (the
controller renders a Pipeline's stages). Errors name the custom resource
and the field.

References are checked across the input: a Workload's or Experiment's
spec.repositoryRef (unset: the Repository "default") and a Pipeline's
spec.stages[].repositoryRef that name a Repository the input does not
define in that namespace are warnings on stderr, or errors with
--strict-refs.

-f - reads a YAML stream from stdin. A directory is read recursively for
*.yaml, *.yml and *.json, skipping hidden files and folders (.git,
.golangci.yml). Exit code 0: valid; 2: invalid or any other error.`,
		Example: `  # Every custom resource of a repository, in CI
  scribe validate -f deploy/

  # Every Repository the CRs name must be in the input too
  scribe validate -f deploy/ -f platform/repositories.yaml --strict-refs

  # A stream from another tool
  kustomize build overlays/prod | scribe validate -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			crs, err := f.checkAll(cmd.Context())
			if err != nil {
				return &codeError{code: exitError, err: err}
			}
			objs := make([]map[string]any, 0, len(crs))
			for _, c := range crs {
				objs = append(objs, c.obj)
			}
			dangling := danglingRefs(objs)
			if strictRefs && len(dangling) > 0 {
				return &codeError{code: exitError, err: fmt.Errorf("--strict-refs: references to Repositories not in the input:\n  %s", strings.Join(dangling, "\n  "))}
			}
			for _, d := range dangling {
				if _, err := fmt.Fprintln(cmd.ErrOrStderr(), "warning:", d); err != nil {
					return &codeError{code: exitError, err: fmt.Errorf("write stderr: %w", err)}
				}
			}
			w := cmd.OutOrStdout()
			for _, c := range crs {
				var err error
				if b := c.bundle; b != nil {
					_, err = fmt.Fprintf(w, "%s: valid (%d objects, %s)\n", b.Dir, len(b.Objects), b.Digest)
				} else {
					where := strings.ToLower(c.kind()) + "/" + c.typed.GetName()
					if ns := c.typed.GetNamespace(); ns != "" {
						where = ns + "/" + where
					}
					_, err = fmt.Fprintf(w, "%s: valid (%s, checked, not rendered)\n", where, c.kind())
				}
				if err != nil {
					return &codeError{code: exitError, err: fmt.Errorf("write stdout: %w", err)}
				}
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&strictRefs, "strict-refs", false, "a reference to a Repository the input does not define is an error, not a warning")
	return cmd
}
