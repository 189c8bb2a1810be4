// Package arp answers ARP for IPv4 VIPs this gateway owns, on one interface.
//
// The VIPs are not assigned to any interface (the nftables dataplane
// catches them in prerouting), so the kernel never answers ARP for them: this
// responder is the only voice for a VIP on the segment, and it speaks only
// for the addresses it was told it owns (SetOwned). When it starts owning an
// address it sends a short burst of gratuitous ARP so neighbours and switches
// move to this gateway at once; when it stops, it falls silent at once.
package arp

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/edgelb/edgelb/announce/internal/l2resp"
	"github.com/mdlayher/packet"
)

// EtherType of ARP (the packet socket's protocol).
const etherTypeARP = 0x0806

// Defaults for Config: 3 rounds 250 ms apart, the same as announce/ndp.
const (
	DefaultGARPCount    = l2resp.DefaultCount
	DefaultGARPInterval = l2resp.DefaultInterval
)

// Config configures a Responder.
type Config struct {
	// Interface is the L2 interface to answer on (e.g. "eth0").
	Interface string
	// GARPCount gratuitous ARP rounds are sent when an address starts being
	// owned, GARPInterval apart (defaults 3 and 250 ms): the first moves
	// neighbours at once, the others cover a lost frame or a switch that
	// was still learning.
	GARPCount    int
	GARPInterval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Stats counts what the responder did, for tests, metrics and the page.
type Stats struct {
	Replies   uint64 // requests answered
	GARPs     uint64 // gratuitous ARP rounds sent
	Ignored   uint64 // requests for addresses not owned
	Conflicts uint64 // another MAC announced or answered for an address we own
	Reopens   uint64 // packet socket reopened after an error
}

// packetConn is the part of a packet socket the responder uses (a fake in tests).
type packetConn interface {
	l2resp.Link
	WriteTo(b []byte, addr net.Addr) (int, error)
}

// opener opens the packet socket on the named interface and returns it with
// the interface's MAC; replaced in tests.
type opener func(ifName string) (packetConn, net.HardwareAddr, error)

func openPacket(ifName string) (packetConn, net.HardwareAddr, error) {
	ifi, err := l2resp.EthernetInterface(ifName)
	if err != nil {
		return nil, nil, err
	}
	c, err := packet.Listen(ifi, packet.Raw, etherTypeARP, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("arp packet socket on %q: %w", ifName, err)
	}
	return c, ifi.HardwareAddr, nil
}

// Responder answers ARP requests for the owned IPv4 addresses.
type Responder struct {
	core *l2resp.Core[packetConn, frame]
}

// New opens the packet socket on cfg.Interface and starts answering (for
// nothing until SetOwned). It fails when the interface does not exist.
func New(cfg Config) (*Responder, error) {
	return newResponder(cfg, openPacket, time.Second)
}

// newResponder takes the socket opener and the pause before a reopen, both
// shortened or faked in tests.
func newResponder(cfg Config, open opener, retry time.Duration) (*Responder, error) {
	core, err := l2resp.Start(l2resp.Config{Name: "arp", Interface: cfg.Interface,
		Count: cfg.GARPCount, Interval: cfg.GARPInterval, Logger: cfg.Logger, Retry: retry,
		ReadBuffer: 1518, ReadFailed: "read arp", ReopenFailed: "reopen arp socket"}, &protocol{open: open})
	if err != nil {
		return nil, err
	}
	return &Responder{core: core}, nil
}

// HardwareAddr is the MAC the responder answers with.
func (r *Responder) HardwareAddr() net.HardwareAddr { return r.core.MAC() }

// SetOwned declares the complete set of IPv4 addresses to answer for. Newly
// owned addresses get a gratuitous ARP burst (the first round before SetOwned
// returns); removed ones are never answered again once it returns. Non-IPv4
// addresses are refused and nothing changes.
func (r *Responder) SetOwned(addrs []netip.Addr) error {
	next := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if !a.Is4() {
			return fmt.Errorf("arp: owned address %q is not IPv4", a)
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
	return Stats{Replies: c.Replies, GARPs: c.Announced, Ignored: c.Ignored, Conflicts: c.Conflicts, Reopens: c.Reopens}
}

// Close stops answering for everything and closes the socket. Safe to call twice.
func (r *Responder) Close() error { return r.core.Close() }
