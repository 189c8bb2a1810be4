package ipvs

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// inNS runs fn on a thread switched into ns (or in place when ns is not
// open). The thread is thrown away if it cannot switch back.
func inNS(ns netns.NsHandle, fn func() error) error {
	if !ns.IsOpen() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("enter netns: %w", err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- ferr
			return // the thread stays locked and exits with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Sysctl is a setting the IPVS dataplane writes at start.
type Sysctl struct{ Key, Value string }

// Sysctls are what IPVS needs (systemd/sysctl.d/90-edgelb.conf ships the same):
// conntrack entries for IPVS connections (the nftables masquerade needs
// them), connections to deleted or quiesced servers expire at once, the
// gateway forwards, the kernel answers ARP only for addresses of the
// receiving interface — never for the VIPs on edgelb0 — and a TCP segment
// outside the window stays in its connection: invalid, it would miss the
// masquerade's reverse translation, reach the gateway itself and be answered
// with a RST that resets the connection (kubernetes#74839; ip_vs loads
// nf_conntrack, so the key exists).
var Sysctls = []Sysctl{
	{"net.ipv4.vs.conntrack", "1"},
	{"net.ipv4.vs.expire_nodest_conn", "1"},
	{"net.ipv4.vs.expire_quiescent_template", "1"},
	{"net.ipv4.ip_forward", "1"},
	{"net.ipv4.conf.all.arp_ignore", "1"},
	{"net.ipv4.conf.all.arp_announce", "2"},
	{"net.netfilter.nf_conntrack_tcp_be_liberal", "1"},
}

func sysctlPath(key string) string { return "/proc/sys/" + strings.ReplaceAll(key, ".", "/") }

// setSysctls writes Sysctls inside ns, skipping values already right.
func setSysctls(ns netns.NsHandle) error {
	return inNS(ns, func() error {
		for _, s := range Sysctls {
			p := sysctlPath(s.Key)
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == s.Value {
				continue
			}
			if err := os.WriteFile(p, []byte(s.Value), 0o644); err != nil {
				return fmt.Errorf("ipvs: set sysctl %s=%s: %w", s.Key, s.Value, err)
			}
		}
		return nil
	})
}
