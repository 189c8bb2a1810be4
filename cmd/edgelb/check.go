package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	bolt "go.etcd.io/bbolt"

	"github.com/edgelb/edgelb/cmd/edgelb/internal/daemon"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/lb/preflight"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// cmdCheck validates a config and reads (never writes) the host: the
// node-port range against ephemeral ports, local listeners hidden by the
// DNAT, the sysctls the chosen dataplane needs, and whether the dataplane can
// do every service's forwarding method; and the standalone state file,
// read-only. Exit 0 when valid, 1 with every problem when not; a state file
// edgelb run would refuse exits with run's own code (3 untrusted, 4 gone),
// so a script tells "fix the config" from "restore the state".
func newCheckCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "check [--config FILE] [--no-host]",
		Short: "validate a config and the host without touching the kernel",
		Args:  noArgs,
	}
	path := c.Flags().String("config", "/etc/edgelb/config.yaml", "config file")
	noHost := c.Flags().Bool("no-host", false, "validate the file only; skip the checks that read this host")
	_ = c.MarkFlagFilename("config", "yaml", "yml")
	c.RunE = func(c *cobra.Command, _ []string) error {
		return check(c.Context(), *path, *noHost, c.OutOrStdout())
	}
	return c
}

func check(ctx context.Context, path string, noHost bool, stdout io.Writer) error {
	cfg, err := config.Load(path)
	if err != nil {
		var errs *config.Errors
		if errors.As(err, &errs) {
			fmt.Fprintf(stdout, "%s: %d error(s)\n", path, len(errs.List))
			for _, e := range errs.List {
				fmt.Fprintf(stdout, "  %v\n", e)
			}
			return &exitError{1, errors.New("")}
		}
		return &exitError{1, err}
	}
	fmt.Fprintf(stdout, "%s: valid (%d pools, %d services)\n", path, len(cfg.Pools), len(cfg.Services))
	for _, f := range preflight.APIFindings(cfg) {
		fmt.Fprintln(stdout, f)
	}
	state, err := checkStore(cfg, !noHost, stdout)
	if err != nil {
		code, ee := 1, (*exitError)(nil)
		if errors.As(runExit(err), &ee) {
			code = ee.code
		}
		return &exitError{code, errors.New("")}
	}
	// With host checks the engine knows this host's addresses, as run's
	// does: a VIP, pool or backend on one fails here as it fails run.
	own := cfg.OwnAddrs()
	if !noHost {
		if own, err = daemon.OwnAddresses(cfg); err != nil {
			return &exitError{1, err}
		}
	}
	unmet, err := unmetRequests(ctx, cfg, state, own)
	if err != nil {
		fmt.Fprintf(stdout, "edgelb run would refuse this config here: %v\n", err)
		return &exitError{1, errors.New("")}
	}
	if len(unmet) > 0 {
		fmt.Fprintf(stdout, "%d service(s) would get no address:\n", len(unmet))
		for _, u := range unmet {
			fmt.Fprintf(stdout, "  %s\n", u)
		}
		return &exitError{1, errors.New("")}
	}
	if noHost {
		return nil
	}
	findings, err := preflight.HostFindings(cfg, hostcheck.System())
	if err != nil {
		return &exitError{1, err}
	}
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	if blocking := preflight.Blocking(cfg, findings); len(blocking) > 0 {
		return &exitError{1, fmt.Errorf("host checks found %d error(s)", len(blocking))}
	}
	if hostcheck.Worst(findings) == hostcheck.Error {
		fmt.Fprintln(stdout, "dataplane.allowEphemeralOverlap is set: the daemon starts despite the overlap above")
	}
	return nil
}

// unmetRequests allocates the config's services as the daemon would at its
// next start — its own engine on an in-memory copy of the stored state (or
// an empty one) and with the gateway's own addresses, so the same rules
// (requested VIPs before automatic ones, sharing keys, pool sizes, never an
// own address) — and lists every service that would stay pending, with the
// reason: two services requesting one address without a sharing key, a
// request outside every pool, an exhausted pool. An error is what run's
// start would fail on.
func unmetRequests(ctx context.Context, cfg *config.Config, from store.State, own *lb.OwnAddrs) ([]string, error) {
	eng, err := engine.NewEngine(store.NewMemFrom(from), engine.Options{OwnAddrs: own})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); eng.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := eng.SyncConfig(ctx, cfg.Pools, cfg.Services); err != nil {
		return nil, err
	}
	st, err := eng.Services(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range st {
		if s.Pending != "" {
			out = append(out, fmt.Sprintf("services %q: %s", s.Spec.Name, s.Pending))
		}
	}
	return out, nil
}

// checkStore reads the standalone state file read-only and reports what it
// finds: records and their checksums, conflicting assignments (through the
// engine's own restore, on a copy); a missing file, and with host checks
// whether edgelb's tables say it ran here before. It returns the state to
// allocate from, or (already reported on out) why the daemon would refuse
// to start on it: an error matching store.ErrDamaged/ErrVersion/ErrConflict
// or daemon.ErrStateGone, which runExit maps to run's exit codes.
func checkStore(cfg *config.Config, host bool, out io.Writer) (store.State, error) {
	empty := store.NewState()
	if cfg.Kubernetes.Enabled {
		return empty, nil // cluster mode keeps its state in the API server
	}
	if cfg.State.Type == config.StateEtcd {
		// A fleet's state is shared and changes under other gateways: not
		// read here (no bbolt file, and edgelb's tables in the kernel say
		// nothing about it). GET /api/v1/fleet on a gateway shows it.
		fmt.Fprintf(out, "state: shared by a fleet in etcd %v prefix %s: not read by check\n", cfg.State.Etcd.Endpoints, cfg.State.Etcd.Prefix)
		return empty, nil
	}
	path := filepath.Join(cfg.State.Dir, "edgelb.db")
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && st.Size() == 0) {
		what := "missing"
		if err == nil {
			what = "empty"
		}
		if host {
			if tables, kerr := checkKernelState(); kerr == nil && len(tables) > 0 {
				fmt.Fprintf(out, "state: %s is %s, but edgelb's tables are in the kernel (%v): edgelb ran here and its state is lost; "+
					"edgelb run refuses to start (exit 4). Restore the file, or run \"edgelb cleanup\" to start over\n", path, what, tables)
				return empty, daemon.ErrStateGone
			}
		}
		fmt.Fprintf(out, "state: %s is %s: a first start (services allocate from scratch)\n", path, what)
		return empty, nil
	}
	b, err := store.OpenBoltReadOnly(path, time.Second)
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			fmt.Fprintf(out, "state: %s is locked by a running edgelb (it checked the file when it started); allocating from an empty state\n", path)
			return empty, nil
		}
		fmt.Fprintf(out, "state: %v\n", err)
		return empty, err
	}
	defer b.Close()
	state, err := b.Load()
	if err == nil {
		// Conflicting assignments are found by the engine's restore.
		if _, err = engine.NewEngine(store.NewMemFrom(state), engine.Options{}); err != nil {
			err = fmt.Errorf("%s: %w", path, err) // the copy has no file name
		}
	}
	if err != nil {
		fmt.Fprintf(out, "state: %v\n", err)
		return empty, err
	}
	asg := 0
	for _, ips := range state.Assignments {
		asg += len(ips)
	}
	if b.Legacy {
		fmt.Fprintf(out, "state: %s: %d pools, %d services, %d assigned addresses; written before checksums (schema 1): "+
			"edgelb run frames every record with a checksum when it opens the file\n", path, len(state.Pools), len(state.Services), asg)
		return state, nil
	}
	fmt.Fprintf(out, "state: %s: %d pools, %d services, %d assigned addresses; every record's checksum matches\n", path, len(state.Pools), len(state.Services), asg)
	return state, nil
}

// checkKernelState is daemon.KernelState; a unit test replaces it (no root,
// no namespace).
var checkKernelState = daemon.KernelState
