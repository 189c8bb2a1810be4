package main

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/backendsetup"
)

// cmdBackendSetup prints (or, with --apply, performs in the current network
// namespace) what a backend needs so the gateway can reach it by direct
// routing or IPIP tunnel: the VIP held locally but never answered for by ARP,
// and reverse-path filtering that accepts the client's address.
func newBackendSetupCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "backend-setup --vip ADDR[,ADDR...] [--method dr|tunnel] [--apply]",
		Short: "print or apply what a DR/tunnel backend needs",
		Args:  noArgs,
	}
	method := c.Flags().String("method", "dr", "forwarding method the gateway uses for this backend: dr or tunnel")
	vips := c.Flags().String("vip", "", "the service VIP(s), comma separated")
	apply := c.Flags().Bool("apply", false, "apply the settings here (netlink + /proc/sys) instead of printing them")
	_ = c.RegisterFlagCompletionFunc("method", cobra.FixedCompletions([]string{"dr", "tunnel"}, cobra.ShellCompDirectiveNoFileComp))
	c.RunE = func(c *cobra.Command, _ []string) error { return backendSetup(*method, *vips, *apply, c.OutOrStdout()) }
	return c
}

func backendSetup(method, vips string, apply bool, stdout io.Writer) error {
	m, err := proxy.ParseMethod(method)
	if err != nil {
		return &exitError{exitUsage, fmt.Errorf("--method: %w", err)}
	}
	if m != proxy.DirectRouting && m != proxy.Tunnel {
		return &exitError{exitUsage, fmt.Errorf("--method %q: backends need no setup for nat; only dr and tunnel", method)}
	}
	var addrs []netip.Addr
	for _, s := range strings.Split(vips, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return &exitError{exitUsage, fmt.Errorf("--vip %q: %w", s, err)}
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return &exitError{exitUsage, fmt.Errorf("--vip is required")}
	}
	plan := backendsetup.Plan(m, addrs)
	if !apply {
		fmt.Fprint(stdout, plan.Script())
		return nil
	}
	return backendsetup.Apply(plan)
}
