// Package ndp answers IPv6 neighbour discovery for VIPs this gateway owns, on
// one interface: the IPv6 twin of announce/arp.
//
// For each owned VIP it joins the VIP's solicited-node multicast group (so a
// NIC's multicast filter and an MLD-snooping switch deliver the solicitations
// here), answers neighbour solicitations with a neighbour advertisement
// carrying the interface's MAC, and on takeover sends unsolicited neighbour
// advertisements with the Override flag so neighbours replace their cached
// entry at once. The VIPs are not assigned to the interface, so the kernel
// never answers for them.
package ndp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/edgelb/edgelb/announce/internal/l2resp"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/net/ipv6"
)

const etherTypeIPv6 = 0x86DD

// Defaults for Config: 3 rounds 250 ms apart, the same as announce/arp.
const (
	DefaultNACount    = l2resp.DefaultCount
	DefaultNAInterval = l2resp.DefaultInterval
)

// Config configures a Responder.
type Config struct {
	// Interface is the L2 interface to answer on.
	Interface string
	// NACount unsolicited advertisements are sent NAInterval apart when an
	// address starts being owned (defaults 3 and 250 ms).
	NACount    int
	NAInterval time.Duration
	Logger     *slog.Logger
}

// Stats counts what the responder did.
type Stats struct {
	Replies     uint64 // solicitations answered
	Unsolicited uint64 // unsolicited advertisements sent
	Ignored     uint64 // solicitations for addresses not owned
	Conflicts   uint64 // another MAC advertised an address we own
	Reopens     uint64
}

// packetConn is the part of a packet socket the responder uses.
type packetConn interface {
	l2resp.Link
	WriteTo(b []byte, addr net.Addr) (int, error)
}

// groupConn joins and leaves IPv6 multicast groups on the interface.
type groupConn interface {
	JoinGroup(group netip.Addr) error
	LeaveGroup(group netip.Addr) error
	Close() error
}

// sockets are the responder's link: frames in and out, and group membership.
type sockets struct {
	frames packetConn
	groups groupConn
}

func (s sockets) ReadFrom(b []byte) (int, net.Addr, error) { return s.frames.ReadFrom(b) }

func (s sockets) Close() error {
	var errs []error
	if s.frames != nil {
		errs = append(errs, s.frames.Close())
	}
	if s.groups != nil {
		errs = append(errs, s.groups.Close())
	}
	return errors.Join(errs...)
}

// opener opens the sockets on the named interface and returns them with the
// interface's MAC; replaced in tests.
type opener func(ifName string) (sockets, net.HardwareAddr, error)

func openSockets(ifName string) (sockets, net.HardwareAddr, error) {
	ifi, err := l2resp.EthernetInterface(ifName)
	if err != nil {
		return sockets{}, nil, err
	}
	filter, err := ndFilter()
	if err != nil {
		return sockets{}, nil, fmt.Errorf("assemble ND filter: %w", err)
	}
	pc, err := packet.Listen(ifi, packet.Raw, etherTypeIPv6, &packet.Config{Filter: filter})
	if err != nil {
		return sockets{}, nil, fmt.Errorf("ipv6 packet socket on %q: %w", ifName, err)
	}
	// The ICMPv6 socket is only used to join groups (the kernel then sends
	// MLD reports and programs the NIC's multicast filter); it is not bound
	// to any address, so it works before the interface has finished DAD of
	// its link-local address. It receives nothing: everything is filtered.
	gc, _, err := ndp.Listen(ifi, ndp.Unspecified)
	if err != nil {
		pc.Close()
		return sockets{}, nil, fmt.Errorf("icmpv6 socket on %q: %w", ifName, err)
	}
	var block ipv6.ICMPFilter
	block.SetAll(true)
	if err := gc.SetICMPFilter(&block); err != nil {
		pc.Close()
		gc.Close()
		return sockets{}, nil, fmt.Errorf("icmpv6 filter on %q: %w", ifName, err)
	}
	return sockets{frames: pc, groups: gc}, ifi.HardwareAddr, nil
}

// Responder answers neighbour solicitations for the owned IPv6 addresses.
type Responder struct {
	core *l2resp.Core[sockets, message]
}

// New opens the sockets on cfg.Interface and starts answering (for nothing
// until SetOwned).
func New(cfg Config) (*Responder, error) {
	return newResponder(cfg, openSockets, time.Second)
}

// newResponder takes the socket opener and the pause before a reopen, both
// shortened or faked in tests.
func newResponder(cfg Config, open opener, retry time.Duration) (*Responder, error) {
	core, err := l2resp.Start(l2resp.Config{Name: "ndp", Interface: cfg.Interface,
		Count: cfg.NACount, Interval: cfg.NAInterval, Logger: cfg.Logger, Retry: retry,
		ReadBuffer: 9216, ReadFailed: "read neighbour discovery", ReopenFailed: "reopen neighbour discovery sockets"},
		&protocol{open: open, groups: map[netip.Addr]int{}})
	if err != nil {
		return nil, err
	}
	return &Responder{core: core}, nil
}

// HardwareAddr is the MAC the responder advertises.
func (r *Responder) HardwareAddr() net.HardwareAddr { return r.core.MAC() }

// SetOwned declares the complete set of IPv6 addresses to answer for.
// Newly owned ones get their solicited-node group joined and an unsolicited
// advertisement burst (first one before SetOwned returns); removed ones are
// never advertised again once it returns. Non-IPv6 addresses are refused and
// nothing changes.
func (r *Responder) SetOwned(addrs []netip.Addr) error {
	next := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.WithZone("")
		if !a.Is6() || a.Is4In6() || a.IsMulticast() {
			return fmt.Errorf("ndp: owned address %q is not an IPv6 unicast address", a)
		}
		next = append(next, a)
	}
	return r.core.SetOwned(next)
}

// Owned returns the addresses currently answered for, sorted.
func (r *Responder) Owned() []netip.Addr { return r.core.Owned() }

// Stats returns the counters.
func (r *Responder) Stats() Stats {
	c := r.core.Counters()
	return Stats{Replies: c.Replies, Unsolicited: c.Announced, Ignored: c.Ignored, Conflicts: c.Conflicts, Reopens: c.Reopens}
}

// Close stops answering and closes the sockets (leaving the groups). Safe to call twice.
func (r *Responder) Close() error { return r.core.Close() }
