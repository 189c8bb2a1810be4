package ipvs

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/edgelb/edgelb/proxy/hostcheck"
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

func sysctlPath(key string) string { return "/proc/sys/" + strings.ReplaceAll(key, ".", "/") }

// setSysctls writes what IPVS needs inside ns, skipping values already
// right: hostcheck.IPVSSysctls, the one list `edgelb check` reports and
// systemd/sysctl.d/90-edgelb.conf ships (why each: its Why; ip_vs loads
// nf_conntrack, so nf_conntrack_tcp_be_liberal exists).
func setSysctls(ns netns.NsHandle) error {
	return inNS(ns, func() error {
		for _, s := range hostcheck.IPVSSysctls {
			p := sysctlPath(s.Name)
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == s.Want {
				continue
			}
			if err := os.WriteFile(p, []byte(s.Want), 0o644); err != nil {
				return fmt.Errorf("ipvs: set sysctl %s=%s: %w", s.Name, s.Want, err)
			}
		}
		return nil
	})
}
