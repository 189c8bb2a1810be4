package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/edgelb/edgelb/cmd/edgelb/internal/daemon"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// cmdCheck validates a config and reads (never writes) the host: the
// node-port range against ephemeral ports, local listeners hidden by the
// DNAT, the sysctls the chosen dataplane needs, and whether the dataplane can
// do every service's forwarding method. Exit 0 when valid, 1 with every
// problem when not.
func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", "--config FILE [--no-host]", stdout)
	path := fs.String("config", "/etc/edgelb/config.yaml", "config file")
	noHost := fs.Bool("no-host", false, "validate the file only; skip the checks that read this host")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*path)
	if err != nil {
		var errs *config.Errors
		if errors.As(err, &errs) {
			fmt.Fprintf(stdout, "%s: %d error(s)\n", *path, len(errs.List))
			for _, e := range errs.List {
				fmt.Fprintf(stdout, "  %v\n", e)
			}
			return &exitError{1, errors.New("")}
		}
		return &exitError{1, err}
	}
	fmt.Fprintf(stdout, "%s: valid (%d pools, %d services)\n", *path, len(cfg.Pools), len(cfg.Services))
	if *noHost {
		return nil
	}
	findings, err := daemon.HostFindings(cfg, hostcheck.System())
	if err != nil {
		return &exitError{1, err}
	}
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	if blocking := daemon.Blocking(cfg, findings); len(blocking) > 0 {
		return &exitError{1, fmt.Errorf("host checks found %d error(s)", len(blocking))}
	}
	if hostcheck.Worst(findings) == hostcheck.Error {
		fmt.Fprintln(stdout, "dataplane.allowEphemeralOverlap is set: the daemon starts despite the overlap above")
	}
	return nil
}
