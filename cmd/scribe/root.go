package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/scribe-gitops/scribe/internal/termtext"
)

// Exit codes of the CLI.
const (
	exitOK      = 0
	exitChanges = 1 // scribe diff: the rendered tree differs
	exitError   = 2 // bad input or any other error
)

// interrupted is the cause of the CLI context's cancellation when a signal
// stopped the CLI.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.sig.String() }

// signalExitCode is 128 plus the signal's number, as a shell reports it.
func signalExitCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return exitError
}

// exitError carries a specific exit code out of a command.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// run executes the CLI with args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runAs(ctx, "scribe", args, stdout, stderr)
}

// pluginName is the binary's name as a kubectl plugin: kubectl runs a
// kubectl-scribe found on PATH for `kubectl scribe`.
const pluginName = "kubectl-scribe"

// runAs is run for the binary invoked as prog (its argv[0]): invoked as
// kubectl-scribe, usage and help name the command `kubectl scribe`.
func runAs(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	return runIO(ctx, prog, args, nil, stdout, stderr)
}

// runIO is runAs with stdin as the commands' standard input (nil: the
// process's).
func runIO(ctx context.Context, prog string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	if stdin != nil {
		root.SetIn(stdin)
	}
	if strings.TrimSuffix(filepath.Base(prog), ".exe") == pluginName {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl scribe"}
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) {
		// Stopped by a signal: whatever the command reports, the exit code
		// says so (130 for SIGINT, 143 for SIGTERM), as a shell's would.
		var inErr interrupted
		if errors.As(err, &inErr) {
			_, _ = fmt.Fprintln(stderr, "Error:", termtext.CIText(err.Error()))
		} else {
			_, _ = fmt.Fprintf(stderr, "Error: %v: %s\n", sig, termtext.CIText(err.Error()))
		}
		return signalExitCode(sig.sig)
	}
	var ce *codeError
	if errors.As(err, &ce) {
		if ce.err != nil {
			_, _ = fmt.Fprintln(stderr, "Error:", termtext.CIText(ce.err.Error()))
		}
		return ce.code
	}
	_, _ = fmt.Fprintln(stderr, "Error:", termtext.CIText(err.Error()))
	return exitError
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "scribe",
		Short: "Scribe renders Experiments and Workloads into GitOps repositories",
		Long: `Scribe renders Experiments and Workloads into GitOps repositories.

Exit codes: 0 success; 1 scribe diff found changes, or scribe publish's
target failed; 2 bad input or any other error; 130 or 143 stopped by
SIGINT or SIGTERM (128 + the signal): the command stops at its next check,
writes nothing half-way (-o is atomic) and exits; a second signal exits at
once.`,
		Example: `  scribe validate -f deploy/ --strict-refs
  scribe diff -f deploy/ -d fleet
  scribe get wl checkout -n shop --watch`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newControlCmds()...)
	root.AddCommand(newRenderCmd(), newValidateCmd(), newDiffCmd(), newPublishCmd(), newControllerCmd(), newGetCmd(), newVersionCmd(), newCatalogCheckCmd(), newHistoryCmd())
	return root
}
