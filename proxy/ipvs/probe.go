package ipvs

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
)

// Available reports whether the running kernel has IPVS now. It looks for
// the generic-netlink family "IPVS" — the one moby/ipvs would use, which
// itself hides a missing family (New succeeds, NewService silently does
// nothing, GetConfig panics) — in a dump of the registered families. It is
// a pure probe, safe for `edgelb check`: it runs no modprobe, and it does not
// ask for the family by name either, because the kernel answers a by-name
// lookup of a missing family by loading the module whose alias names it
// (ip_vs carries net-pf-16-proto-16-family-IPVS). Loading ip_vs is the job
// of systemd/modules-load.d/edgelb.conf, or of the operator. The error
// wraps proxy.ErrKernelFeature and unix.ENOENT and names what is missing.
func Available() error {
	found, err := genlIPVS()
	if err != nil {
		return fmt.Errorf("ipvs: list the generic netlink families (looking for \"IPVS\"): %w", err)
	}
	if !found {
		return fmt.Errorf("ipvs: the kernel has no IPVS: generic netlink family \"IPVS\" not registered "+
			"(CONFIG_IP_VS is not set, or module ip_vs is not loaded: `modprobe ip_vs`, which "+
			"systemd/modules-load.d/edgelb.conf does at boot): %w: %w", proxy.ErrKernelFeature, unix.ENOENT)
	}
	return nil
}

// genlIPVS reports whether "IPVS" is among the registered generic-netlink
// families. A dump that a registration interrupted is asked again.
func genlIPVS() (bool, error) {
	var err error
	for try := 0; try < 3; try++ {
		var fams []*netlink.GenlFamily
		fams, err = netlink.GenlFamilyList()
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			continue
		}
		if err != nil {
			return false, err
		}
		for _, f := range fams {
			if f.Name == "IPVS" {
				return true, nil
			}
		}
		return false, nil
	}
	return false, err
}

// Probe decides `dataplane: auto`: IPVS when the kernel has it, nftables
// otherwise. It returns the dataplane's name ("ipvs" or "nftables") and a
// sentence for the log saying why.
func Probe() (name, why string) {
	if err := Available(); err != nil {
		return "nftables", fmt.Sprintf("dataplane auto: using nftables because IPVS is unavailable: %v", err)
	}
	return "ipvs", "dataplane auto: using ipvs (the kernel has IPVS: generic netlink family \"IPVS\" found)"
}
