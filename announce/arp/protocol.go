package arp

import (
	"net"
	"net/netip"

	"github.com/edgelb/edgelb/announce/internal/l2resp"
	"github.com/mdlayher/packet"
)

// protocol is the ARP half of the responder (l2resp.Protocol): the core calls
// it with its lock held, except Open and Parse.
type protocol struct{ open opener }

type state = l2resp.State[packetConn]

func (p *protocol) Open(ifName string) (packetConn, net.HardwareAddr, error) { return p.open(ifName) }
func (p *protocol) Parse(b []byte) (frame, error)                            { return parseFrame(b) }

// ARP has no group membership to follow the owned set with.
func (p *protocol) Claim(state, netip.Addr) error   { return nil }
func (p *protocol) Release(state, netip.Addr) error { return nil }
func (p *protocol) Reopened(state)                  {}

// Announce sends one gratuitous ARP round (both forms) for a.
func (p *protocol) Announce(s state, a netip.Addr) {
	if s.Link == nil {
		return // socket being reopened; the next rounds will go out
	}
	frames, err := garpFrames(s.MAC, a)
	if err != nil {
		s.Log.Warn("gratuitous arp", "vip", a, "err", err)
		return
	}
	for _, b := range frames {
		if _, err := s.Link.WriteTo(b, &packet.Addr{HardwareAddr: broadcast}); err != nil {
			s.Log.Warn("send gratuitous arp", "vip", a, "err", err)
			return
		}
	}
	s.Count.Announced++
}

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Handle decides on one received frame.
func (p *protocol) Handle(s state, f frame) {
	if f.fromSelf(s.MAC) {
		return
	}
	switch f.kind {
	case kindGratuitous, kindReply:
		if s.Owns(f.senderIP) {
			s.Count.Conflicts++
			s.Log.Warn("another host claims an address we own", "vip", f.senderIP, "mac", f.senderHW.String())
		}
	case kindRequest:
		if !s.Owns(f.targetIP) {
			s.Count.Ignored++
			return
		}
		out, err := replyFrame(f, s.MAC, f.targetIP)
		if err != nil {
			s.Log.Warn("arp reply", "err", err)
			return
		}
		if s.Link == nil {
			return
		}
		if _, err := s.Link.WriteTo(out, &packet.Addr{HardwareAddr: f.ethSrc}); err != nil {
			s.Log.Warn("send arp reply", "vip", f.targetIP, "to", f.senderIP, "err", err)
			return
		}
		s.Count.Replies++
	}
}
