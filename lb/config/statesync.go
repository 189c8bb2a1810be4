package config

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy/statesync"
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

// Conntrackd is the conntrackd sync: one FTFW channel over unicast UDP to
// each other gateway, on a link the operator names (proxy/statesync runs a
// conntrackd per peer: FTFW acknowledges and resends per pair, and
// conntrackd tracks one sequence per channel, so a channel shared by three
// senders drops messages: proxy/statesync/README.md).
type Conntrackd struct {
	// Interface carries the sync traffic (a dedicated link is best).
	Interface string
	// Address is this gateway's address on Interface; invalid = the first
	// address of the peers' family found on Interface at start.
	Address netip.Addr
	// Peers are the other gateways' addresses on the link (`peer:` is the
	// one-element spelling for two gateways).
	Peers []netip.Addr
	// Port is the first UDP port: the pair of the i-th and j-th of all
	// gateways' addresses in order uses a port of its own above it
	// (statesync.PairPorts), the same at both ends.
	Port uint16
	// onePeer: the peers came as `peer:`, so errors name that field.
	onePeer bool
	// Binary is the conntrackd executable.
	Binary string
	// CommitTimeout is how long a connection entry committed at a takeover
	// lives unless a packet refreshes it (statesync.Options.CommitTimeout);
	// 0 = conntrackd's own estimate.
	CommitTimeout time.Duration
}

// Defaults of the conntrackd section.
const (
	DefaultConntrackdPort   = 3780
	DefaultConntrackdBinary = "/usr/sbin/conntrackd"
	// DefaultConntrackdCommitTimeout: three hours (statesync.DefaultCommitTimeout
	// says why: without it the connections a dead owner had just closed
	// live on for 5 days on the new owner; three hours outlast Linux's
	// default TCP keepalive).
	DefaultConntrackdCommitTimeout = statesync.DefaultCommitTimeout
	// MinConntrackdCommitTimeout and MaxConntrackdCommitTimeout bound it:
	// shorter, a connection quiet for a few seconds right after a takeover
	// loses its state; longer than the kernel's ESTABLISHED timeout (5 days)
	// means nothing.
	MinConntrackdCommitTimeout = 10 * time.Second
	MaxConntrackdCommitTimeout = 120 * time.Hour
)

// MaxConntrackdPeers bounds stateSync.conntrackd.peers: each peer is a
// conntrackd process that reads every conntrack event of the gateway.
const MaxConntrackdPeers = 15

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
	switch {
	case rc.Peer != "" && len(rc.Peers) > 0:
		c.add(path+".peer", rc.Peer, "set peer (two gateways) or peers, not both")
	case rc.Peer != "":
		if a, ok := parseAddr(c, path+".peer", rc.Peer); ok {
			ct.Peers, ct.onePeer = []netip.Addr{a}, true
		}
	default:
		for i, p := range rc.Peers {
			if a, ok := parseAddr(c, index(path+".peers", i), p); ok {
				ct.Peers = append(ct.Peers, a)
			}
		}
	}
	if rc.MulticastGroup != "" {
		// Refused, not ignored: a configuration that worked before must not
		// silently lose its sync. Measured in lab/faults gw3/*/on under
		// load: a backup held 98 of 100 streams for good.
		c.add(path+".multicastGroup", rc.MulticastGroup, "is no longer supported: conntrackd tracks one message sequence per channel, so on a group shared by three or more gateways a backup drops messages for good; list the other gateways' addresses in peers (one unicast channel per pair)")
	}
	if rc.Port != 0 {
		ct.Port = port16(c, path+".port", rc.Port, 1)
	}
	if rc.Binary != "" {
		ct.Binary = rc.Binary
	}
	if rc.Coalesce != "" {
		// Refused, not ignored, as multicastGroup: a knob that no longer
		// does anything must not look as if it did. edgelb check names it
		// before an upgrade.
		c.add(path+".coalesce", string(rc.Coalesce), "is no longer supported: edgelb no longer holds conntrackd stopped between rounds (it lost the connections a dying gateway opened in its last interval); remove the line")
	}
	ct.CommitTimeout = parseDuration(c, path+".commitTimeout", rc.CommitTimeout, DefaultConntrackdCommitTimeout)
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
	c.validateConntrackdPeers(col, ct)
	if a := ct.Address; a.IsValid() && (a.IsUnspecified() || a.IsMulticast() || a.IsLoopback()) {
		col.add(path+".address", a.String(), "want this gateway's unicast address on %s", ct.Interface)
	}
	if ct.Binary == "" {
		col.add(path+".binary", "", "required")
	}
	if d := ct.CommitTimeout; d != 0 && (d < MinConntrackdCommitTimeout || d > MaxConntrackdCommitTimeout) {
		col.add(path+".commitTimeout", d.String(), "want 0s (conntrackd's own estimate: 5 days for the connections a dead owner had just closed) or %s to %s: shorter, a connection quiet for a moment after a takeover loses its state", MinConntrackdCommitTimeout, MaxConntrackdCommitTimeout)
	}
	if c.Announce.L2 == nil {
		col.addErr(path, "", fmt.Errorf("needs announce.l2: conntrackd's failover steps follow the L2 ownership of the VIPs: %w", ErrStateSync))
	}
	if c.Dataplane.Mode == ModeIPVS {
		col.addErr(path, "", fmt.Errorf("syncs the nftables dataplane's connections; dataplane.mode is ipvs (IPVS has its own sync daemon): %w", ErrStateSync))
	}
}

// validateConntrackdPeers: one or more unicast addresses of one family (the
// address's), none twice and none this gateway's own, and few enough that
// every pair's port fits above port.
func (c *Config) validateConntrackdPeers(col *collector, ct *Conntrackd) {
	const path = "stateSync.conntrackd"
	if len(ct.Peers) == 0 {
		if !col.failed(path+".peer") && !col.failed(path+".peers") && !col.failed(path+".multicastGroup") {
			col.add(path+".peers", "", "required: the other gateways' addresses on the sync link (peer: for one)")
		}
		return
	}
	field := func(i int) string {
		if ct.onePeer {
			return path + ".peer"
		}
		return index(path+".peers", i)
	}
	if len(ct.Peers) > MaxConntrackdPeers {
		col.add(path+".peers", fmt.Sprint(len(ct.Peers)), "at most %d peers (each is a conntrackd process reading every conntrack event)", MaxConntrackdPeers)
	}
	if n := len(ct.Peers) + 1; statesync.LastPairPort(ct.Port, n) > 65535 {
		col.add(path+".port", fmt.Sprint(ct.Port), "too high for %d gateways: the %d pairs use ports %d and up", n, n*(n-1)/2, ct.Port)
	}
	seen := map[netip.Addr]int{}
	for i, a := range ct.Peers {
		switch {
		case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback():
			col.add(field(i), a.String(), "want another gateway's unicast address on the sync link")
		case a == ct.Address:
			col.add(field(i), a.String(), "is this gateway's own address (stateSync.conntrackd.address)")
		case a.Is4() != ct.Peers[0].Is4():
			col.add(field(i), a.String(), "is not of the family of %s %s: the channels are of one family", field(0), ct.Peers[0])
		}
		if j, dup := seen[a]; dup {
			col.add(field(i), a.String(), "listed twice (also %s)", field(j))
		}
		seen[a] = i
	}
	if ct.Address.IsValid() && ct.Address.Is4() != ct.Peers[0].Is4() {
		col.add(path+".address", ct.Address.String(), "is not of the family of %s %s", field(0), ct.Peers[0])
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
