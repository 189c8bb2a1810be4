package preflight

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// stateSyncFindings: what `edgelb check` can see of the state sync and of
// the routing the backends need for connections to survive a failover.
func stateSyncFindings(cfg *config.Config, linkExists func(string) bool) []hostcheck.Finding {
	var out []hostcheck.Finding
	l2 := cfg.Announce.L2
	if c := cfg.StateSync.Conntrackd; c != nil {
		if _, err := exec.LookPath(c.Binary); err != nil {
			out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "statesync-binary",
				Message: fmt.Sprintf("stateSync.conntrackd.binary %q: %v", c.Binary, err), Fix: "apt-get install conntrackd"})
		}
		if !linkExists(c.Interface) {
			out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "statesync-interface",
				Message: fmt.Sprintf("stateSync.conntrackd.interface %q: no such interface on this host", c.Interface)})
		}
	}
	if l2 != nil && l2.SourceInterface != "" && !linkExists(l2.SourceInterface) {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "source-interface",
			Message: fmt.Sprintf("announce.l2.sourceInterface %q: no such interface on this host", l2.SourceInterface)})
	}
	if l2 == nil || l2.Members == nil {
		return out // alone: nothing moves
	}
	var nat, nosnat []string
	for i, s := range cfg.Services {
		switch s.Method {
		case proxy.NAT:
			nat = append(nat, fmt.Sprintf("services[%d] (%q)", i, s.Name))
		case proxy.NATNoSNAT:
			nosnat = append(nosnat, fmt.Sprintf("services[%d] (%q)", i, s.Name))
		}
	}
	sync := cfg.StateSync.Conntrackd != nil
	switch {
	case sync && len(nat) > 0 && len(l2.SourceAddresses) == 0:
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: "statesync-no-source",
			Message: fmt.Sprintf("%s use method nat without announce.l2.sourceAddresses: backends answer the dead gateway's own address, so their connections cannot survive a failover although their state is synced", strings.Join(nat, ", ")),
			Fix:     "set announce.l2.sourceAddresses to a free address on the backend segment"})
	case !sync && len(l2.SourceAddresses) > 0:
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: "source-no-statesync",
			Message: "announce.l2.sourceAddresses is set without stateSync: the address moves on failover but the connections' state does not, so open connections are still lost",
			Fix:     "configure stateSync.conntrackd"})
	}
	if len(nosnat) > 0 && len(l2.SourceAddresses) == 0 {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: "nosnat-backend-route",
			Message: fmt.Sprintf("%s use method nat-nosnat with several gateways: backends must route replies to clients through an address that moves with the VIPs; a route via one gateway's own address blackholes them when it dies", strings.Join(nosnat, ", ")),
			Fix:     "set announce.l2.sourceAddresses and make it the backends' route to the clients"})
	}
	return out
}

// ipvsStateSyncFindings: dataplane auto chose IPVS, which neither conntrackd
// (it syncs the nftables dataplane's conntrack entries) nor the floating
// source address serves; validation refuses them with an explicit mode ipvs.
func ipvsStateSyncFindings(cfg *config.Config) []hostcheck.Finding {
	var out []hostcheck.Finding
	if cfg.StateSync.Conntrackd != nil {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "statesync-dataplane",
			Message: "stateSync.conntrackd syncs the nftables dataplane, but the IPVS dataplane would run",
			Fix:     "set dataplane.mode: nftables"})
	}
	if l2 := cfg.Announce.L2; l2 != nil && len(l2.SourceAddresses) > 0 {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "source-dataplane",
			Message: "announce.l2.sourceAddresses are translated to by the nftables dataplane, but the IPVS dataplane would run",
			Fix:     "set dataplane.mode: nftables"})
	}
	return out
}

func linkExists(name string) bool {
	_, err := netlink.LinkByName(name)
	return err == nil
}
