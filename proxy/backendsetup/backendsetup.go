// Package backendsetup prepares a backend host for the dr and tunnel
// forwarding methods, where the gateway rewrites only the MAC (dr) or wraps the
// packet in IPIP (tunnel) and the backend answers the client directly:
//
//   - the backend must accept packets addressed to the VIP, so it holds the
//     VIP on lo (dr) or on the IPIP device tunl0 (tunnel), as a host route;
//   - it must never answer ARP for the VIP, or clients would bypass the
//     gateway: arp_ignore=1 and arp_announce=2;
//   - for tunnel, reverse-path filtering must accept the decapsulated packet
//     whose source (the client) is not routed via tunl0: rp_filter=0 there
//     (and "all", since the kernel uses the maximum of both).
package backendsetup

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
)

// Setup is the list of changes a backend needs.
type Setup struct {
	Method  proxy.Method
	Device  string // lo or tunl0
	VIPs    []netip.Addr
	Sysctls [][2]string
}

// Plan computes the setup for method and VIPs.
func Plan(m proxy.Method, vips []netip.Addr) Setup {
	s := Setup{Method: m, Device: "lo", VIPs: vips}
	s.Sysctls = [][2]string{
		{"net.ipv4.conf.all.arp_ignore", "1"},
		{"net.ipv4.conf.all.arp_announce", "2"},
	}
	if m == proxy.Tunnel {
		s.Device = "tunl0"
		s.Sysctls = append(s.Sysctls,
			[2]string{"net.ipv4.conf.tunl0.rp_filter", "0"},
			[2]string{"net.ipv4.conf.all.rp_filter", "0"})
	}
	return s
}

// Script renders the setup as shell commands an operator can review and run
// (or put in the backend's own provisioning).
func (s Setup) Script() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# edgelb backend setup for method %s\n", s.Method)
	if s.Method == proxy.Tunnel {
		b.WriteString("modprobe ipip\nip link set tunl0 up\n")
	}
	for _, kv := range s.Sysctls {
		fmt.Fprintf(&b, "sysctl -w %s=%s\n", kv[0], kv[1])
	}
	for _, v := range s.VIPs {
		fmt.Fprintf(&b, "ip addr add %s dev %s\n", netip.PrefixFrom(v, v.BitLen()), s.Device)
	}
	b.WriteString("# persist: put the sysctl lines in /etc/sysctl.d/90-edgelb-backend.conf and the addresses in your network config\n")
	return b.String()
}

// Apply performs the setup in the current network namespace. Already
// present addresses are fine (EEXIST); it is safe to run twice.
func Apply(s Setup) error {
	var link netlink.Link
	var err error
	if s.Method == proxy.Tunnel {
		// tunl0 appears when the ipip module is loaded; creating any ipip
		// link loads it on demand.
		link, err = netlink.LinkByName("tunl0")
		if err != nil {
			return fmt.Errorf("tunl0 missing (load the ipip module: modprobe ipip): %w", err)
		}
	} else {
		link, err = netlink.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("lo: %w", err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up: %w", s.Device, err)
	}
	for _, kv := range s.Sysctls {
		p := "/proc/sys/" + strings.ReplaceAll(kv[0], ".", "/")
		if err := os.WriteFile(p, []byte(kv[1]), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", kv[0], kv[1], err)
		}
	}
	for _, v := range s.VIPs {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: v.AsSlice(), Mask: net.CIDRMask(v.BitLen(), v.BitLen())}}
		if err := netlink.AddrAdd(link, a); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add %s to %s: %w", v, s.Device, err)
		}
	}
	return nil
}
