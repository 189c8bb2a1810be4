// Command edgelb is the gateway daemon and its tools. This file only runs
// the command line (root.go, spf13/cobra) and turns its outcome into an
// exit code; each command lives in its own file and does wiring only.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code through the error chain.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitUsage is the exit code of a command line that cannot be run as
// written: an unknown command or flag, a bad flag value, a missing argument.
const exitUsage = 2

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runMain(ctx, args, os.Stdin, stdout, stderr)
}

// runMain runs one command line and prints its error; it returns the exit
// code: 0, 1 for a failure, 2 for a usage error, or the command's own.
func runMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd, err := execute(ctx, args, stdin, stdout, stderr)
	// Under systemd the error is filed at err priority (journal.go).
	prio := ""
	if toJournal(stderr) {
		prio = "<3>"
	}
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintf(stderr, "%s%s: %v\n", prio, cmd.CommandPath(), ee.err)
		}
		return ee.code
	default:
		fmt.Fprintf(stderr, "%s%s: %v\n", prio, cmd.CommandPath(), err)
		return 1
	}
}

// execute runs one command line and returns the command it ran (for the
// error's prefix) and its error; an *exitError in it sets the exit code.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (*cobra.Command, error) {
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContextC(ctx)
}
