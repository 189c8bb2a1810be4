package ipvs

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"

	"github.com/edgelb/edgelb/proxy/hostcheck"
	"github.com/edgelb/edgelb/proxy/sysctl"
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

// ensureSysctls writes what IPVS needs inside the dataplane's namespace:
// hostcheck.IPVSSysctls, the one list `edgelb check` reports and
// systemd/sysctl.d/90-edgelb.conf ships (why each: its Why; ip_vs loads
// nf_conntrack, so nf_conntrack_tcp_be_liberal exists).
func (d *Dataplane) ensureSysctls() error {
	nsfd := 0
	if d.ns.IsOpen() {
		nsfd = int(d.ns)
	}
	if err := sysctl.Ensure(nsfd, hostcheck.IPVSSysctls); err != nil {
		return fmt.Errorf("ipvs: %w", err)
	}
	return nil
}
