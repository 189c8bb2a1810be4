package arp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// errNotARP marks frames this responder has no business with (wrong
// EtherType, not Ethernet/IPv4 ARP). They are dropped silently.
var errNotARP = errors.New("not an Ethernet/IPv4 ARP packet")

// zeroMAC is the target hardware address of an ARP announcement (RFC 5227 §2.3).
var zeroMAC = net.HardwareAddr{0, 0, 0, 0, 0, 0}

// frameKind classifies a parsed ARP frame for the responder.
type frameKind int

const (
	kindRequest    frameKind = iota // who-has TargetIP: answer it when we own TargetIP
	kindGratuitous                  // someone announces SenderIP (sender == target): never answered
	kindReply                       // an is-at: tells us who else claims SenderIP
)

// frame is an ARP packet reduced to the fields the responder decides on.
type frame struct {
	kind     frameKind
	ethSrc   net.HardwareAddr // Ethernet source: who sent the frame
	senderHW net.HardwareAddr
	senderIP netip.Addr
	targetIP netip.Addr
}

// parseFrame parses one Ethernet frame read from the packet socket. Only
// Ethernet (hardware type 1, 6-byte addresses) over IPv4 is accepted: the
// fields are checked before they are trusted because any host on the
// segment can send anything.
func parseFrame(b []byte) (frame, error) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil {
		return frame{}, fmt.Errorf("parse ethernet frame: %w", err)
	}
	if f.EtherType != ethernet.EtherTypeARP {
		return frame{}, errNotARP
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		return frame{}, fmt.Errorf("parse arp packet: %w", err)
	}
	if p.HardwareType != 1 || p.ProtocolType != uint16(ethernet.EtherTypeIPv4) ||
		p.HardwareAddrLength != 6 || p.IPLength != 4 || !p.SenderIP.Is4() || !p.TargetIP.Is4() {
		return frame{}, errNotARP
	}
	out := frame{ethSrc: f.Source, senderHW: p.SenderHardwareAddr, senderIP: p.SenderIP, targetIP: p.TargetIP}
	switch {
	case p.Operation == arp.OperationReply:
		out.kind = kindReply
	case p.Operation == arp.OperationRequest && p.SenderIP == p.TargetIP:
		out.kind = kindGratuitous
	case p.Operation == arp.OperationRequest:
		out.kind = kindRequest
	default:
		return frame{}, errNotARP
	}
	return out, nil
}

// marshalFrame wraps an ARP packet in an Ethernet frame to dst.
func marshalFrame(p *arp.Packet, dst net.HardwareAddr) ([]byte, error) {
	pb, err := p.MarshalBinary()
	if err != nil {
		return nil, err
	}
	f := ethernet.Frame{Destination: dst, Source: p.SenderHardwareAddr, EtherType: ethernet.EtherTypeARP, Payload: pb}
	return f.MarshalBinary()
}

// replyFrame answers req: "vip is-at mac", unicast to the requester. A probe
// (sender IP 0.0.0.0, RFC 5227) gets the same answer, which is how an owner
// defends its address.
func replyFrame(req frame, mac net.HardwareAddr, vip netip.Addr) ([]byte, error) {
	p, err := arp.NewPacket(arp.OperationReply, mac, vip, req.senderHW, req.senderIP)
	if err != nil {
		return nil, fmt.Errorf("build arp reply for %s: %w", vip, err)
	}
	dst := req.ethSrc
	if len(dst) != 6 {
		dst = req.senderHW
	}
	return marshalFrame(p, dst)
}

// garpFrames are the two forms of a gratuitous ARP for vip, both broadcast:
// a request with sender == target (what Linux treats as gratuitous and lets
// override an existing neighbour entry at once, whatever its locktime) and a
// reply with target hardware == sender hardware (the form some routers only
// honour, and that Linux also recognises as gratuitous).
func garpFrames(mac net.HardwareAddr, vip netip.Addr) ([][]byte, error) {
	req, err := arp.NewPacket(arp.OperationRequest, mac, vip, zeroMAC, vip)
	if err != nil {
		return nil, fmt.Errorf("build gratuitous arp for %s: %w", vip, err)
	}
	rep, err := arp.NewPacket(arp.OperationReply, mac, vip, mac, vip)
	if err != nil {
		return nil, fmt.Errorf("build gratuitous arp for %s: %w", vip, err)
	}
	var out [][]byte
	for _, p := range []*arp.Packet{req, rep} {
		b, err := marshalFrame(p, ethernet.Broadcast)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// fromSelf reports whether a frame was sent by this interface: a packet
// socket also sees the host's outgoing frames (our own GARPs and replies,
// the kernel's requests), which must never be answered.
func (f frame) fromSelf(mac net.HardwareAddr) bool {
	return bytes.Equal(f.ethSrc, mac) || bytes.Equal(f.senderHW, mac)
}
