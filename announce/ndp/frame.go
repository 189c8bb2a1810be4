package ndp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"
)

// Why frames and not ndp.Conn.ReadFrom: a neighbour solicitation can be
// multicast (to the solicited-node group, when the client does not know the
// VIP yet) or unicast to the VIP itself (neighbour unreachability detection
// of a cached entry). The VIP is not a local address, so the kernel never
// delivers the unicast kind to an ICMPv6 socket; a packet socket sees both.
// The ICMPv6 body is parsed and built by github.com/mdlayher/ndp.

const (
	ethHdrLen  = 14
	ipv6HdrLen = 40
	protoICMP6 = 58
	hopLimit   = 255 // RFC 4861: every ND message has hop limit 255, else it was routed
)

var errNotND = errors.New("not a neighbour discovery message for us")

// allNodes is ff02::1 and its Ethernet multicast address.
var (
	allNodes    = netip.MustParseAddr("ff02::1")
	allNodesMAC = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
)

type msgKind int

const (
	kindSolicit msgKind = iota // who has Target? answer when we own it
	kindAdvert                 // Target is at LLA: tells us who else claims it
)

// message is a received NS or NA reduced to the fields the responder needs.
type message struct {
	kind     msgKind
	ethSrc   net.HardwareAddr
	src, dst netip.Addr
	target   netip.Addr
	lla      net.HardwareAddr // source LLA (NS) or target LLA (NA), nil if absent
}

// parseMessage parses an Ethernet frame carrying an ICMPv6 neighbour
// solicitation or advertisement, with the checks RFC 4861 §7.1 asks of a
// receiver: hop limit 255, code 0, valid checksum, no multicast target.
func parseMessage(b []byte) (message, error) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil {
		return message{}, fmt.Errorf("parse ethernet frame: %w", err)
	}
	if f.EtherType != ethernet.EtherTypeIPv6 {
		return message{}, errNotND
	}
	p := f.Payload
	if len(p) < ipv6HdrLen || p[0]>>4 != 6 {
		return message{}, errNotND
	}
	plen := int(binary.BigEndian.Uint16(p[4:6]))
	if p[6] != protoICMP6 || p[7] != hopLimit || plen > len(p)-ipv6HdrLen {
		return message{}, errNotND
	}
	src, _ := netip.AddrFromSlice(p[8:24])
	dst, _ := netip.AddrFromSlice(p[24:40])
	icmp := p[ipv6HdrLen : ipv6HdrLen+plen] // Ethernet padding dropped
	if len(icmp) < 4 || icmp[1] != 0 || checksum(src, dst, icmp) != 0 {
		return message{}, errNotND
	}
	m, err := ndp.ParseMessage(icmp)
	if err != nil {
		return message{}, fmt.Errorf("parse icmpv6: %w", err)
	}
	out := message{ethSrc: f.Source, src: src, dst: dst}
	var opts []ndp.Option
	var want ndp.Direction
	switch m := m.(type) {
	case *ndp.NeighborSolicitation:
		out.kind, out.target, opts, want = kindSolicit, m.TargetAddress, m.Options, ndp.Source
	case *ndp.NeighborAdvertisement:
		out.kind, out.target, opts, want = kindAdvert, m.TargetAddress, m.Options, ndp.Target
	default:
		return message{}, errNotND
	}
	if out.target.IsMulticast() {
		return message{}, errNotND
	}
	for _, o := range opts {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == want && len(lla.Addr) == 6 {
			out.lla = lla.Addr
		}
	}
	return out, nil
}

// checksum is the ICMPv6 checksum over the pseudo-header and body: zero for a
// body that carries a correct checksum.
func checksum(src, dst netip.Addr, body []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			sum += uint32(b[0])<<8 | uint32(b[1])
			b = b[2:]
		}
		if len(b) == 1 {
			sum += uint32(b[0]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	var l [8]byte
	binary.BigEndian.PutUint32(l[0:4], uint32(len(body)))
	l[7] = protoICMP6
	add(l[:])
	add(body)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// advertFrame builds a neighbour advertisement "vip is at mac" from vip to
// dstIP/dstMAC. Solicited answers a solicitation; Override is always set: the
// owner of a VIP is authoritative and must replace whatever is cached.
func advertFrame(mac net.HardwareAddr, vip, dstIP netip.Addr, dstMAC net.HardwareAddr, solicited bool) ([]byte, error) {
	na := &ndp.NeighborAdvertisement{
		Solicited:     solicited,
		Override:      true,
		TargetAddress: vip,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac}},
	}
	body, err := ndp.MarshalMessageChecksum(na, vip, dstIP)
	if err != nil {
		return nil, fmt.Errorf("build neighbour advertisement for %s: %w", vip, err)
	}
	ip := make([]byte, ipv6HdrLen, ipv6HdrLen+len(body))
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(body)))
	ip[6], ip[7] = protoICMP6, hopLimit
	s, d := vip.As16(), dstIP.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	f := ethernet.Frame{Destination: dstMAC, Source: mac, EtherType: ethernet.EtherTypeIPv6, Payload: append(ip, body...)}
	return f.MarshalBinary()
}

// answerFrame answers a solicitation for vip: unicast to the solicitor, or to
// all nodes when the solicitor has no address yet (duplicate address
// detection, source ::), which is how the owner defends the VIP.
func answerFrame(m message, mac net.HardwareAddr, vip netip.Addr) ([]byte, error) {
	if !m.src.IsValid() || m.src.IsUnspecified() {
		return advertFrame(mac, vip, allNodes, allNodesMAC, false)
	}
	dstMAC := m.lla
	if dstMAC == nil {
		dstMAC = m.ethSrc
	}
	return advertFrame(mac, vip, m.src.WithZone(""), dstMAC, true)
}

// unsolicitedFrame is the takeover announcement: to all nodes, Override set,
// Solicited clear (RFC 4861 §7.2.6).
func unsolicitedFrame(mac net.HardwareAddr, vip netip.Addr) ([]byte, error) {
	return advertFrame(mac, vip, allNodes, allNodesMAC, false)
}

func (m message) fromSelf(mac net.HardwareAddr) bool {
	return bytes.Equal(m.ethSrc, mac)
}

// ndFilter is a classic BPF program keeping only ICMPv6 neighbour
// solicitations and advertisements without extension headers (the socket
// already selects EtherType IPv6), so the responder is not woken for every
// IPv6 packet on the link.
func ndFilter() ([]bpf.RawInstruction, error) {
	return bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: ethHdrLen + 6, Size: 1}, // next header
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: protoICMP6, SkipTrue: 4},
		bpf.LoadAbsolute{Off: ethHdrLen + ipv6HdrLen, Size: 1}, // ICMPv6 type
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 135, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 136, SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	})
}
