package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes of the CLI.
const (
	exitOK      = 0
	exitChanges = 1 // scribe diff: the rendered tree differs
	exitError   = 2 // bad input or any other error
)

// exitError carries a specific exit code out of a command.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// run executes the CLI with args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ce *codeError
	if errors.As(err, &ce) {
		if ce.err != nil {
			_, _ = fmt.Fprintln(stderr, "Error:", ce.err)
		}
		return ce.code
	}
	_, _ = fmt.Fprintln(stderr, "Error:", err)
	return exitError
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "scribe",
		Short:         "Scribe renders Experiments and Workloads into GitOps repositories",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRenderCmd(), newValidateCmd(), newDiffCmd(), newPublishCmd(), newControllerCmd(), newVersionCmd())
	return root
}
