package ipvs

import (
	"fmt"
	"net/netip"

	"github.com/edgelb/edgelb/proxy"
)

// vsKey identifies one IPVS virtual service: address, port, protocol; or
// a firewall mark (Mark non-zero) and its family, Addr then being the
// family's unspecified address (0.0.0.0 or ::), Port and Proto zero.
type vsKey struct {
	Addr  netip.Addr
	Port  uint16
	Proto proxy.Protocol
	Mark  uint32
}

// markKey is the key of the firewall-mark service mark of family f.
func markKey(mark uint32, f proxy.Family) vsKey {
	if f == proxy.IPv6 {
		return vsKey{Addr: netip.IPv6Unspecified(), Mark: mark}
	}
	return vsKey{Addr: netip.IPv4Unspecified(), Mark: mark}
}

func (k vsKey) String() string {
	if k.Mark != 0 {
		return fmt.Sprintf("fwmark %d/%s", k.Mark, proxy.FamilyOf(k.Addr))
	}
	return fmt.Sprintf("%s/%s", netip.AddrPortFrom(k.Addr, k.Port), k.Proto)
}

// IPVS service flags (include/uapi/linux/ip_vs.h).
const (
	flagPersistent = 0x0001
	flagHashed     = 0x0002 // set by the kernel on every listed service
	flagOnePacket  = 0x0004
	flagSched1     = 0x0008 // scheduler-specific (sh-fallback, mh-fallback)
	flagSched2     = 0x0010
	flagSched3     = 0x0020
	// flagsCompared are the flags edgelb sets or must reset; the rest are
	// kernel bookkeeping.
	flagsCompared = flagPersistent | flagOnePacket | flagSched1 | flagSched2 | flagSched3
)

// Forwarding methods of a real server (IP_VS_CONN_F_*).
const (
	fwdMasq   uint32 = 0
	fwdTunnel uint32 = 2
	fwdDR     uint32 = 3
	fwdMask   uint32 = 7
)

// virtualServer is one IPVS virtual service as edgelb reads and writes it.
type virtualServer struct {
	Key     vsKey
	Sched   string
	Flags   uint32
	Timeout uint32 // persistence timeout, seconds (only with flagPersistent)
	Netmask uint32 // persistence netmask (v4: mask, v6: prefix length)
	Stats   Counters
}

// realServer is one destination of a virtual service.
type realServer struct {
	Addr     netip.AddrPort
	Weight   int
	Fwd      uint32
	Active   int // active connections (read only)
	Inactive int // inactive connections (read only)
	Stats    Counters
}

// Counters are IPVS's per-service or per-destination counters.
type Counters struct {
	Connections           uint64
	PacketsIn, PacketsOut uint64
	BytesIn, BytesOut     uint64
	CPS                   uint64 // connections per second (2 s estimator)
}

// handle is the small slice of IPVS that the dataplane uses. The real one
// (mobyHandle) wraps github.com/moby/ipvs with one mutex and a timeout; the
// unit tests use a fake.
type handle interface {
	Services() ([]virtualServer, error)
	Dests(k vsKey) ([]realServer, error)
	AddService(s virtualServer) error
	UpdateService(s virtualServer) error
	DelService(k vsKey) error
	AddDest(k vsKey, d realServer) error
	UpdateDest(k vsKey, d realServer) error
	DelDest(k vsKey, d realServer) error
	Close() error
}

// device is the edgelb-owned local link that holds the VIPs (edgelb0): IPVS
// only sees packets addressed to a local address, and the link marks which
// virtual services are edgelb's.
type device interface {
	// Ensure creates the link (a dummy) if needed and sets it up.
	Ensure() error
	// Addrs lists the addresses on the link (none if it does not exist).
	Addrs() (map[netip.Addr]bool, error)
	AddAddr(a netip.Addr) error
	DelAddr(a netip.Addr) error
	// Delete removes the link and with it every address.
	Delete() error
}

// snatRules programs the nftables side: the frontends whose connections get
// edgelb's ct mark and the NAT frontends whose forwarded packets are
// masqueraded (IPVS only rewrites the destination).
type snatRules interface {
	// Set makes the rules hold exactly these frontends, as how says; it
	// reports whether it rebuilt the whole table.
	Set(frontends, masq map[vsKey]bool, how snatHow) (rebuilt bool, err error)
	Delete() error
	// Close releases sockets; the table stays.
	Close() error
}

// snatHow says how snatRules.Set reaches the wanted frontends.
type snatHow int

const (
	// snatDiff changes set elements against what was last programmed
	// (Apply: the table is edgelb's and was right after the last write).
	snatDiff snatHow = iota
	// snatVerify rebuilds the table if anyone may have changed it since
	// edgelb last knew it right (the ruleset generation moved by commits
	// not edgelb's), else diffs (Resync).
	snatVerify
	// snatRebuild deletes and rebuilds the table in one transaction.
	snatRebuild
)
