package l2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// nodeState is what each gateway tells the others about itself, carried by
// memberlist: as a user message over memberlist's reliable (TCP) channel to
// every member whenever it changes, and in memberlist's periodic push/pull
// (LocalState/MergeRemoteState) as the backstop for a lost message. One
// message holds the whole state, so a receiver never sees "ready" from one
// moment and "claimed" from another.
type nodeState struct {
	Name string
	// Gen orders the states of one process: it starts at the process start
	// time (UnixNano) and grows by one per change, so a restarted gateway's
	// states supersede the old process's and a late message never rolls a
	// newer state back.
	Gen     uint64
	Healthy bool // the daemon says the dataplane serves (SetHealthy)
	Uplink  bool // the L2 interface is up with carrier
	Settled bool // member long enough to know the cluster (SettleTime)
	VIPs    []netip.Addr
	Claimed []netip.Addr
	// WantReply is a property of one message, not of the state: the sender
	// has no state of ours (it just saw us join, or come back after it
	// thought us dead) and asks for it.
	WantReply bool
}

// Ready is whether the gateway may own VIPs.
func (s nodeState) Ready() bool { return s.Healthy && s.Uplink && s.Settled }

const (
	wireMagic   = "EL2"
	wireVersion = 1
	// Limits that keep a hostile or corrupt message from allocating much.
	maxNameLen = 255
	maxAddrs   = 1 << 16
)

const (
	flagHealthy = 1 << iota
	flagUplink
	flagSettled
	flagWantReply
)

var errWire = errors.New("l2: malformed member state")

// marshal encodes the state: magic, version, flags, gen, name, VIPs, claimed.
// Addresses are 1 length byte (4 or 16) then the address.
func (s nodeState) marshal() []byte {
	b := make([]byte, 0, 16+len(s.Name)+17*(len(s.VIPs)+len(s.Claimed)))
	b = append(b, wireMagic...)
	b = append(b, wireVersion)
	var flags byte
	if s.Healthy {
		flags |= flagHealthy
	}
	if s.Uplink {
		flags |= flagUplink
	}
	if s.Settled {
		flags |= flagSettled
	}
	if s.WantReply {
		flags |= flagWantReply
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint64(b, s.Gen)
	b = append(b, byte(len(s.Name)))
	b = append(b, s.Name...)
	for _, list := range [][]netip.Addr{s.VIPs, s.Claimed} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(list)))
		for _, a := range list {
			raw := a.Unmap().AsSlice()
			b = append(b, byte(len(raw)))
			b = append(b, raw...)
		}
	}
	return b
}

// unmarshalState decodes and validates a state from the network: other
// gateways are trusted only to send well-formed data, never to make this
// one allocate without bound or panic.
func unmarshalState(b []byte) (nodeState, error) {
	var s nodeState
	if len(b) < len(wireMagic)+1+1+8+1 || string(b[:3]) != wireMagic {
		return s, fmt.Errorf("%w: bad header", errWire)
	}
	if b[3] != wireVersion {
		return s, fmt.Errorf("%w: version %d (want %d)", errWire, b[3], wireVersion)
	}
	flags := b[4]
	s.Healthy, s.Uplink, s.Settled = flags&flagHealthy != 0, flags&flagUplink != 0, flags&flagSettled != 0
	s.WantReply = flags&flagWantReply != 0
	s.Gen = binary.BigEndian.Uint64(b[5:13])
	n := int(b[13])
	b = b[14:]
	if n == 0 || len(b) < n {
		return s, fmt.Errorf("%w: name", errWire)
	}
	s.Name, b = string(b[:n]), b[n:]
	for i, dst := range []*[]netip.Addr{&s.VIPs, &s.Claimed} {
		if len(b) < 4 {
			return s, fmt.Errorf("%w: list %d truncated", errWire, i)
		}
		count := binary.BigEndian.Uint32(b)
		b = b[4:]
		if count > maxAddrs || int(count)*5 > len(b) {
			return s, fmt.Errorf("%w: list %d claims %d addresses", errWire, i, count)
		}
		list := make([]netip.Addr, 0, count)
		for range count {
			if len(b) < 1 {
				return s, fmt.Errorf("%w: address truncated", errWire)
			}
			l := int(b[0])
			if (l != 4 && l != 16) || len(b) < 1+l {
				return s, fmt.Errorf("%w: address length %d", errWire, l)
			}
			a, _ := netip.AddrFromSlice(b[1 : 1+l])
			list = append(list, a.Unmap())
			b = b[1+l:]
		}
		slices.SortFunc(list, netip.Addr.Compare)
		*dst = slices.Compact(list)
	}
	if len(b) != 0 {
		return s, fmt.Errorf("%w: %d trailing bytes", errWire, len(b))
	}
	// A gateway can only claim what it serves; a state saying otherwise is
	// corrupt and must not be trusted to reason about ownership.
	for _, c := range s.Claimed {
		if _, ok := slices.BinarySearchFunc(s.VIPs, c, netip.Addr.Compare); !ok {
			return s, fmt.Errorf("%w: claims %s it does not serve", errWire, c)
		}
	}
	if len(s.Claimed) > 0 && !s.Ready() {
		return s, fmt.Errorf("%w: claims VIPs while not ready", errWire)
	}
	return s, nil
}
