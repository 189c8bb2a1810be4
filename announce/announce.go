// Package announce makes the network send VIP traffic to the gateways that
// can serve it: ARP/NDP on a shared L2 segment (one owner per VIP, chosen
// among live gateways), BGP routes (every serving gateway, so routers ECMP).
//
// Every announcer is declarative: SetVIPs takes the complete set of VIPs this
// gateway should announce now and converges to it.
package announce

import (
	"context"
	"net/netip"
	"slices"
	"time"
)

// VIP is an address to announce and the advertisement attributes its pool carries.
type VIP struct {
	Addr netip.Addr
	Pool string
	// Local is true when externalTrafficPolicy=Local restricts the VIP to
	// gateways with local endpoints; such VIPs are only announced where
	// there are some (the caller has already filtered).
	Local bool
	// BGP advertisement settings from the pool (ignored by L2).
	Communities      []string // "65000:100" or well-known names
	LargeCommunities []string // "65000:1:2"
	LocalPref        uint32   // 0 = unset
	AggregationLen   int      // this VIP's family's; 0 = host route (/32, /128)
	// The pool's announcement selection (empty: all). Each announcer
	// leaves out the VIPs not meant for it (ViaL2, ViaBGP), so an L2-only
	// pool is never routed and a BGP-only pool never answers ARP/NDP.
	Announcers []string // KindL2, KindBGP
	Peers      []string // BGP peers by name
	Interfaces []string // L2 interfaces
}

// Announcer kinds, as VIP.Announcers lists them.
const (
	KindL2  = "l2"
	KindBGP = "bgp"
)

// WellKnownCommunities are the BGP community names edgelb accepts (RFC
// 1997, 3765, 7611, 7999, 8326 and draft-ietf-idr-long-lived-gr, as FRR and
// GoBGP spell them) with their values: lb's validator and announce/bgp read
// this one list, so a name the validator takes is one the speaker sends.
var WellKnownCommunities = map[string]uint32{
	"graceful-shutdown":   0xFFFF0000,
	"accept-own":          0xFFFF0001,
	"llgr-stale":          0xFFFF0006,
	"no-llgr":             0xFFFF0007,
	"blackhole":           0xFFFF029A,
	"no-export":           0xFFFFFF01,
	"no-advertise":        0xFFFFFF02,
	"no-export-subconfed": 0xFFFFFF03,
	"no-peer":             0xFFFFFF04,
}

// ViaL2 reports whether the L2 announcer on ifname answers for v.
func (v *VIP) ViaL2(ifname string) bool {
	return v.via(KindL2) && (len(v.Interfaces) == 0 || slices.Contains(v.Interfaces, ifname))
}

// ViaBGP reports whether BGP announces v (to the peers in Peers, all when
// empty: announce/bgp turns them into GoBGP export policy, peerpolicy.go).
func (v *VIP) ViaBGP() bool { return v.via(KindBGP) }

func (v *VIP) via(kind string) bool {
	return len(v.Announcers) == 0 || slices.Contains(v.Announcers, kind)
}

// Announcer converges what the network is told to a set of VIPs.
type Announcer interface {
	Name() string
	// SetVIPs declares every VIP this gateway can serve right now. The
	// announcer decides (for L2: ownership among gateways) which of them it
	// actually announces.
	SetVIPs(ctx context.Context, vips []VIP) error
	// Close withdraws everything when withdraw is true, else leaves the
	// announcement in place (for a restart that keeps traffic flowing).
	Close(withdraw bool) error
}

// Status is what an announcer reports for the API and the page.
type Status struct {
	Kind  string   `json:"kind"` // "l2", "bgp"
	Owned []string `json:"owned,omitempty"`
	// Owners maps each VIP some gateway answers for to that gateway's
	// member name, as this gateway knows it (L2: its own claims and the
	// live members'); empty for announcers where every gateway announces.
	Owners map[string]string `json:"owners,omitempty"`
	Peers  []PeerState       `json:"peers,omitempty"`
}

// PeerState is one BGP session, one L2 member or one sync peer.
type PeerState struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	State   string `json:"state"` // Established, Idle, alive, suspect, dead...
	Detail  string `json:"detail,omitempty"`
	// Since is when State began (a BGP session's uptime; when an L2 member
	// was last seen alive or declared dead); zero when not known.
	Since time.Time `json:"since,omitzero"`
	// LastPacket is when the last packet from the peer was seen (zero: none
	// seen, or not tracked), and Silence how long ago that was when the
	// status was taken (the reporter's clock, so a remote reader needs no
	// synchronised clock).
	LastPacket time.Time     `json:"lastPacket,omitzero"`
	Silence    time.Duration `json:"silenceNs,omitzero,format:nano"`
	// Queue is what waits for the peer's acknowledgement (a sync peer's
	// unacknowledged messages); nil where there is no such queue.
	Queue *uint64 `json:"queue,omitempty"`
	// BFD is the peer's BFD session, for a BGP peer with BFD enabled.
	BFD *BFDState `json:"bfd,omitempty"`
}

// BFDState is one BFD session (RFC 5880) guarding a BGP session.
type BFDState struct {
	// State is up, down, init, shutdown (AdminDown), unknown while the
	// BFD daemon does not answer, or unavailable where it cannot run (the
	// diagnostic says why).
	State    string `json:"state"`
	Multihop bool   `json:"multihop"`
	// Detect is the local detection setting, "300ms x 3".
	Detect string `json:"detect"`
	// Diagnostic is why the session last went down, ours and the peer's.
	Diagnostic       string `json:"diagnostic,omitempty"`
	RemoteDiagnostic string `json:"remoteDiagnostic,omitempty"`
	// Ups and Downs count transitions; each Down reset the BGP session.
	Ups       uint64 `json:"ups"`
	Downs     uint64 `json:"downs"`
	RxPackets uint64 `json:"rxPackets"`
	TxPackets uint64 `json:"txPackets"`
	// LastDown is when edgelb saw the session go down (RFC 3339), if ever.
	LastDown string `json:"lastDown,omitempty"`
}

// Reporter is implemented by announcers that can describe their state.
type Reporter interface {
	Status() Status
}
