package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/backendsetup"
)

// cmdBackendSetup prints (or, with --apply, performs in the current network
// namespace) what a backend needs so the gateway can reach it by direct
// routing or IPIP tunnel: the VIP held locally but never answered for by ARP,
// and reverse-path filtering that accepts the client's address.
func cmdBackendSetup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("backend-setup", "--method dr|tunnel --vip ADDR[,ADDR...] [--apply]", stdout)
	method := fs.String("method", "dr", "forwarding method the gateway uses for this backend: dr or tunnel")
	vips := fs.String("vip", "", "the service VIP(s), comma separated")
	apply := fs.Bool("apply", false, "apply the settings here (netlink + /proc/sys) instead of printing them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := proxy.ParseMethod(*method)
	if err != nil {
		return &exitError{2, fmt.Errorf("--method: %w", err)}
	}
	if m != proxy.DirectRouting && m != proxy.Tunnel {
		return &exitError{2, fmt.Errorf("--method %q: backends need no setup for nat; only dr and tunnel", *method)}
	}
	var addrs []netip.Addr
	for _, s := range strings.Split(*vips, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return &exitError{2, fmt.Errorf("--vip %q: %w", s, err)}
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return &exitError{2, fmt.Errorf("--vip is required")}
	}
	plan := backendsetup.Plan(m, addrs)
	if !*apply {
		fmt.Fprint(stdout, plan.Script())
		return nil
	}
	return backendsetup.Apply(plan)
}
