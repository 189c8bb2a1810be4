// Command edgelb is the gateway daemon and its tools. This file only
// dispatches subcommands; each lives in its own file and does wiring only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"run", "run the gateway daemon", cmdRun},
	{"check", "validate a config and the host without touching the kernel", cmdCheck},
	{"cleanup", "remove everything edgelb programmed (nft tables, IPVS services, devices)", cmdCleanup},
	{"backend-setup", "print or apply what a DR/tunnel backend needs", cmdBackendSetup},
	{"status", "an ipvsadm -ln-like table of VIPs, backends, connections and health from the REST API", cmdStatus},
	{"pools", "REST client: pools get|apply -f|delete", cmdPools},
	{"services", "REST client: services get|apply -f|delete", cmdServices},
	{"store", "store copy --from bbolt:PATH --to etcd:URL: move a gateway's state into a fleet's etcd", cmdStore},
	{"migrate", "convert MetalLB objects or a keepalived.conf into edgelb configuration, with a report", cmdMigrate},
	{"version", "print the version", cmdVersion},
}

// exitError carries a process exit code through the error chain.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usage(w io.Writer) {
	fmt.Fprintf(w, "edgelb: a front door for LoadBalancer and NodePort services on bare-metal gateways\n\nUsage: edgelb COMMAND [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'edgelb COMMAND --help' for a command's flags.\n")
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err := c.run(ctx, args[1:], stdout, stderr)
		var ee *exitError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ee):
			if ee.err != nil && ee.err.Error() != "" {
				fmt.Fprintf(stderr, "edgelb %s: %v\n", c.name, ee.err)
			}
			return ee.code
		default:
			fmt.Fprintf(stderr, "edgelb %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "edgelb: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// newFlags makes a FlagSet whose --help prints the command's usage to stdout.
func newFlags(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: edgelb %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}
