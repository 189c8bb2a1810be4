package config

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/edgelb/edgelb/lb"
)

// StateSync copies connection state between the gateways so that a
// connection survives its gateway's death. Nil sections are off.
type StateSync struct {
	// Conntrackd runs conntrack-tools' conntrackd (FTFW mode) beside the
	// nftables dataplane, configured and supervised by edgelb, and drives its
	// failover steps from the L2 ownership changes.
	Conntrackd *Conntrackd
	// IPVS runs the kernel's IPVS sync daemon (statesync_ipvs.go).
	IPVS *IPVSSync
}

// Conntrackd is the conntrackd sync channel: unicast UDP to one peer (two
// gateways) or a multicast group (two or more) on a link the operator names.
type Conntrackd struct {
	// Interface carries the sync traffic (a dedicated link is best).
	Interface string
	// Address is this gateway's address on Interface; invalid = the first
	// address of the channel's family found on Interface at start.
	Address netip.Addr
	// Peer is the other gateway's address (unicast UDP): conntrackd's UDP
	// channel sends to exactly one destination.
	Peer netip.Addr
	// MulticastGroup is an IPv4 multicast group every gateway joins.
	MulticastGroup netip.Addr
	// Port is the UDP port (unicast) or the multicast group port.
	Port uint16
	// Binary is the conntrackd executable.
	Binary string
}

// Defaults of the conntrackd section.
const (
	DefaultConntrackdPort   = 3780
	DefaultConntrackdBinary = "/usr/sbin/conntrackd"
)

// ErrStateSync is wrapped by the stateSync section's relation errors.
var ErrStateSync = errors.New("state sync")

func convertStateSync(r *rawStateSync, c *collector) StateSync {
	var s StateSync
	s.IPVS = convertIPVSSync(r.IPVS, c)
	rc := r.Conntrackd
	if rc == nil {
		return s
	}
	const path = "stateSync.conntrackd"
	ct := &Conntrackd{Interface: rc.Interface, Port: DefaultConntrackdPort, Binary: DefaultConntrackdBinary}
	if rc.Address != "" {
		if a, ok := parseAddr(c, path+".address", rc.Address); ok {
			ct.Address = a
		}
	}
	if rc.Peer != "" {
		if a, ok := parseAddr(c, path+".peer", rc.Peer); ok {
			ct.Peer = a
		}
	}
	if rc.MulticastGroup != "" {
		if a, ok := parseAddr(c, path+".multicastGroup", rc.MulticastGroup); ok {
			ct.MulticastGroup = a
		}
	}
	if rc.Port != 0 {
		ct.Port = port16(c, path+".port", rc.Port, 1)
	}
	if rc.Binary != "" {
		ct.Binary = rc.Binary
	}
	s.Conntrackd = ct
	return s
}

// validateStateSync checks the stateSync section and the floating source
// addresses (announce.l2.sourceAddresses), which exist for the same end.
func (c *Config) validateStateSync(col *collector) {
	if l2 := c.Announce.L2; l2 != nil {
		c.validateSourceAddresses(col, l2)
	}
	c.validateIPVSSync(col)
	ct := c.StateSync.Conntrackd
	if ct == nil {
		return
	}
	const path = "stateSync.conntrackd"
	if err := checkIfName(ct.Interface); err != nil {
		col.addErr(path+".interface", ct.Interface, err)
	}
	switch {
	case ct.Peer.IsValid() && ct.MulticastGroup.IsValid():
		col.add(path+".peer", ct.Peer.String(), "set peer (unicast, two gateways) or multicastGroup, not both")
	case !ct.Peer.IsValid() && !ct.MulticastGroup.IsValid():
		if !col.failed(path+".peer") && !col.failed(path+".multicastGroup") {
			col.add(path+".peer", "", "required: the other gateway's address, or set multicastGroup for two or more gateways")
		}
	case ct.Peer.IsValid():
		if a := ct.Peer; a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() {
			col.add(path+".peer", a.String(), "want the other gateway's unicast address (for a group use multicastGroup)")
		}
		if ct.Address.IsValid() && ct.Address.Is4() != ct.Peer.Is4() {
			col.add(path+".address", ct.Address.String(), "is not of the family of peer %s", ct.Peer)
		}
	default:
		if g := ct.MulticastGroup; !g.Is4() || !g.IsMulticast() {
			col.add(path+".multicastGroup", g.String(), "want an IPv4 multicast group (224.0.0.0/4), like 225.0.0.50")
		}
		if ct.Address.IsValid() && !ct.Address.Is4() {
			col.add(path+".address", ct.Address.String(), "the multicast channel is IPv4: want this gateway's IPv4 address on the interface")
		}
	}
	if a := ct.Address; a.IsValid() && (a.IsUnspecified() || a.IsMulticast() || a.IsLoopback()) {
		col.add(path+".address", a.String(), "want this gateway's unicast address on %s", ct.Interface)
	}
	if ct.Binary == "" {
		col.add(path+".binary", "", "required")
	}
	if c.Announce.L2 == nil {
		col.addErr(path, "", fmt.Errorf("needs announce.l2: conntrackd's failover steps follow the L2 ownership of the VIPs: %w", ErrStateSync))
	}
	if c.Dataplane.Mode == ModeIPVS {
		col.addErr(path, "", fmt.Errorf("syncs the nftables dataplane's connections; dataplane.mode is ipvs (IPVS has its own sync daemon): %w", ErrStateSync))
	}
}

// validateSourceAddresses: at most one per family, usable as a VIP (the
// address-class table's rule for floating addresses), outside every pool (an
// allocator would hand it to a service) and no service's requested VIP.
func (c *Config) validateSourceAddresses(col *collector, l2 *L2) {
	const path = "announce.l2.sourceAddresses"
	if l2.SourceInterface != "" {
		if err := checkIfName(l2.SourceInterface); err != nil {
			col.addErr("announce.l2.sourceInterface", l2.SourceInterface, err)
		}
	}
	fam := map[bool]int{}
	for i, a := range l2.SourceAddresses {
		f := index(path, i)
		if err := lb.CheckAddr(a, lb.UseSource); err != nil {
			col.addErr(f, a.String(), err)
			continue
		}
		if a.IsUnspecified() || a.IsMulticast() {
			col.add(f, a.String(), "not a unicast address")
			continue
		}
		if j, dup := fam[a.Is4()]; dup {
			col.add(f, a.String(), "a second %s address (also sourceAddresses[%d]): one per family", famName(a), j)
			continue
		}
		fam[a.Is4()] = i
		for pi := range c.Pools {
			for _, r := range c.Pools[pi].Ranges {
				if r.Contains(a) {
					col.add(f, a.String(), "inside pool %q (%s): a pool address may be given to a service", c.Pools[pi].Name, r)
				}
			}
		}
		for si := range c.Services {
			for _, v := range c.Services[si].VIPs {
				if v == a {
					col.add(f, a.String(), "is the VIP of service %q", c.Services[si].Name)
				}
			}
		}
	}
	if len(l2.SourceAddresses) > 0 && c.Dataplane.Mode == ModeIPVS {
		col.add(path, l2.SourceAddresses[0].String(), "the IPVS dataplane does not translate to a floating source address; use dataplane.mode nftables")
	}
}

func famName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
