package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/ipvs"
	"github.com/edgelb/edgelb/proxy/nft"
)

// cmdCleanup removes every kernel object edgelb owns in this namespace: its
// nft table, its IPVS services and their SNAT table, and the IPVS device.
// Nothing else is touched. Used by ExecStopPost and on uninstall.
func newCleanupCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "cleanup [--config FILE]",
		Short: "remove everything edgelb programmed (nft tables, IPVS services, devices)",
		Args:  noArgs,
	}
	path := c.Flags().String("config", "", "config file (for a non-default IPVS device name); optional")
	_ = c.MarkFlagFilename("config", "yaml", "yml")
	c.RunE = func(c *cobra.Command, _ []string) error { return cleanup(c.Context(), *path, c.OutOrStdout()) }
	return c
}

func cleanup(ctx context.Context, path string, stdout io.Writer) error {
	dev := config.DefaultIPVSDevice
	if path != "" {
		cfg, err := config.Load(path)
		if err != nil {
			return err
		}
		dev = cfg.Dataplane.IPVSDevice
	}
	var errs []error
	if dp, err := nft.New(nft.Options{}); err != nil {
		errs = append(errs, fmt.Errorf("nftables: %w", err))
	} else {
		if err := dp.Cleanup(ctx); err != nil {
			errs = append(errs, fmt.Errorf("nftables: %w", err))
		} else {
			fmt.Fprintln(stdout, "nftables: edgelb's table removed (if it existed)")
		}
		dp.Close()
	}
	if err := ipvs.Available(); err != nil {
		fmt.Fprintf(stdout, "ipvs: nothing to do (%v)\n", err)
	} else if dp, err := ipvs.New(ipvs.Options{Device: dev}); err != nil {
		errs = append(errs, fmt.Errorf("ipvs: %w", err))
	} else {
		if err := dp.Cleanup(ctx); err != nil {
			errs = append(errs, fmt.Errorf("ipvs: %w", err))
		} else {
			fmt.Fprintf(stdout, "ipvs: edgelb's virtual services, SNAT table and device %s removed\n", dev)
		}
		dp.Close()
	}
	return errors.Join(errs...)
}
