package arp

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Why this check exists: this responder must be the only thing answering
// ARP for a VIP, or two gateways answer at once (split brain). With the
// nftables dataplane VIPs are not assigned to any interface, so the kernel
// has nothing to answer for. But if an operator (or another tool: keepalived,
// an IPVS set-up, a listener test) puts a VIP on a local interface, Linux
// answers ARP for it on EVERY interface by default (arp_ignore=0, the "weak
// host" model) — also on the uplink, also on a gateway that does not own it.
// arp_ignore=1 limits the kernel to addresses configured on the receiving
// interface; a VIP on the uplink itself is answered whatever the setting.

// KernelWarnings returns one message per VIP the kernel of this network
// namespace would also answer ARP for on ifName, naming the sysctl to fix.
// It reads /proc and the local addresses; nothing is changed.
func KernelWarnings(ifName string, vips []netip.Addr) ([]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	where := map[netip.Addr]string{} // local address → interface holding it
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %q: %w", ifi.Name, err)
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				where[p.Addr().Unmap()] = ifi.Name
			}
		}
	}
	ignore, err := arpIgnore(ifName)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range vips {
		dev, ok := where[v.Unmap()]
		if !ok || !v.Unmap().Is4() {
			continue
		}
		switch {
		case dev == ifName:
			out = append(out, fmt.Sprintf("VIP %s is assigned to %s itself: the kernel answers ARP for it on every gateway; remove it from the interface", v, dev))
		case ignore == 0:
			out = append(out, fmt.Sprintf("VIP %s is assigned to %s and net.ipv4.conf.%s.arp_ignore=0: the kernel answers ARP for it on %s too; set net.ipv4.conf.all.arp_ignore=1", v, dev, ifName, ifName))
		}
	}
	return out, nil
}

// arpIgnore is the effective arp_ignore for ifName: the kernel uses the
// larger of conf/all and conf/IF.
func arpIgnore(ifName string) (int, error) {
	best := 0
	for _, scope := range []string{"all", ifName} {
		b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + scope + "/arp_ignore")
		if err != nil {
			return 0, fmt.Errorf("read arp_ignore of %q: %w", scope, err)
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0, fmt.Errorf("parse arp_ignore of %q: %w", scope, err)
		}
		best = max(best, v)
	}
	return best, nil
}
