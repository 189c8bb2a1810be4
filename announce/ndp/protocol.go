package ndp

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/edgelb/edgelb/announce/internal/l2resp"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
)

// protocol is the NDP half of the responder (l2resp.Protocol): the core calls
// it with its lock held, except Open and Parse, so groups needs no lock of its own.
type protocol struct {
	open   opener
	groups map[netip.Addr]int // solicited-node group → owned VIPs in it
}

type state = l2resp.State[sockets]

func (p *protocol) Open(ifName string) (sockets, net.HardwareAddr, error) { return p.open(ifName) }
func (p *protocol) Parse(b []byte) (message, error)                       { return parseMessage(b) }

// Claim joins a's solicited-node group. A failed join is reported but the
// address is still answered: unicast solicitations and links without
// multicast filtering (veth, bridges, most virtual NICs) still reach us.
func (p *protocol) Claim(s state, a netip.Addr) error {
	g, _ := ndp.SolicitedNodeMulticast(a)
	p.groups[g]++
	if p.groups[g] > 1 || s.Link.groups == nil {
		return nil
	}
	if err := s.Link.groups.JoinGroup(g); err != nil {
		return fmt.Errorf("ndp: join %s for %s: %w", g, a, err)
	}
	return nil
}

// Release leaves a's group once no owned VIP shares it.
func (p *protocol) Release(s state, a netip.Addr) error {
	g, _ := ndp.SolicitedNodeMulticast(a)
	p.groups[g]--
	if p.groups[g] > 0 {
		return nil
	}
	delete(p.groups, g)
	if s.Link.groups == nil {
		return nil
	}
	if err := s.Link.groups.LeaveGroup(g); err != nil {
		return fmt.Errorf("ndp: leave %s for %s: %w", g, a, err)
	}
	return nil
}

// Reopened joins the groups again: memberships died with the old socket.
func (p *protocol) Reopened(s state) {
	for g := range p.groups {
		if err := s.Link.groups.JoinGroup(g); err != nil {
			s.Log.Warn("rejoin group", "group", g, "err", err)
		}
	}
}

// Announce sends one unsolicited advertisement for a.
func (p *protocol) Announce(s state, a netip.Addr) {
	if s.Link.frames == nil {
		return
	}
	b, err := unsolicitedFrame(s.MAC, a)
	if err == nil {
		_, err = s.Link.frames.WriteTo(b, &packet.Addr{HardwareAddr: allNodesMAC})
	}
	if err != nil {
		s.Log.Warn("send unsolicited neighbour advertisement", "vip", a, "err", err)
		return
	}
	s.Count.Announced++
}

// Handle decides on one received solicitation or advertisement.
func (p *protocol) Handle(s state, m message) {
	if m.fromSelf(s.MAC) {
		return
	}
	switch m.kind {
	case kindAdvert:
		if s.Owns(m.target) {
			s.Count.Conflicts++
			s.Log.Warn("another host advertises an address we own", "vip", m.target, "mac", m.lla.String())
		}
	case kindSolicit:
		if !s.Owns(m.target) {
			s.Count.Ignored++
			return
		}
		out, err := answerFrame(m, s.MAC, m.target)
		if err != nil {
			s.Log.Warn("neighbour advertisement", "err", err)
			return
		}
		if s.Link.frames == nil {
			return
		}
		if _, err := s.Link.frames.WriteTo(out, &packet.Addr{HardwareAddr: out[0:6]}); err != nil {
			s.Log.Warn("send neighbour advertisement", "vip", m.target, "to", m.src, "err", err)
			return
		}
		s.Count.Replies++
	}
}
