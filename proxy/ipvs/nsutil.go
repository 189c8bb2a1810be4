package ipvs

import (
	"fmt"

	"github.com/vishvananda/netns"

	"github.com/edgelb/edgelb/proxy/hostcheck"
	"github.com/edgelb/edgelb/proxy/sysctl"
)

// fdOf is ns as the fd the namespace helpers take (0: the caller's own,
// which a closed handle stands for).
func fdOf(ns netns.NsHandle) int {
	if ns.IsOpen() {
		return int(ns)
	}
	return 0
}

// ensureSysctls writes what IPVS needs inside the dataplane's namespace:
// hostcheck.IPVSSysctls, the one list `edgelb check` reports and
// systemd/sysctl.d/90-edgelb.conf ships (why each: its Why; ip_vs loads
// nf_conntrack, so nf_conntrack_tcp_be_liberal exists).
func (d *Dataplane) ensureSysctls() error {
	if err := sysctl.Ensure(fdOf(d.ns), hostcheck.IPVSSysctls); err != nil {
		return fmt.Errorf("ipvs: %w", err)
	}
	return nil
}
