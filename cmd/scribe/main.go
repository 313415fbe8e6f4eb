// Command scribe renders Scribe custom resources into GitOps repositories.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first SIGINT or SIGTERM cancels ctx: every command stops at
		// its next check, cleans up and exits 128+signal. A second one
		// exits at once.
		s := <-sigs
		cancel(interrupted{sig: s})
		s = <-sigs
		os.Exit(signalExitCode(s))
	}()
	code := runAs(ctx, os.Args[0], os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sigs)
	os.Exit(code)
}
