// Package lb is edgelb's domain: IP pools, the allocator (pure: no kernel,
// no client-go, no clock), the stores and the one writer that owns all
// mutation of pools, services and assignments.
package lb

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
)

// Range is an inclusive range of addresses of one family.
type Range struct {
	First, Last netip.Addr
}

// ParseRange accepts a CIDR ("192.0.2.0/24", "2001:db8::/120") or an
// inclusive first-last range ("192.0.2.10-192.0.2.20", spaces allowed around
// the dash). A CIDR must not have host bits set; the error quotes the input.
func ParseRange(s string) (Range, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return Range{}, fmt.Errorf("empty address range")
	}
	if strings.Contains(in, "/") {
		p, err := netip.ParsePrefix(in)
		if err != nil {
			return Range{}, fmt.Errorf("invalid CIDR %q: %w", s, err)
		}
		if p.Addr().Zone() != "" {
			return Range{}, fmt.Errorf("invalid CIDR %q: zones are not allowed", s)
		}
		if p.Masked() != p {
			return Range{}, fmt.Errorf("invalid CIDR %q: host bits set (did you mean %s?)", s, p.Masked())
		}
		if p.Addr().Is4In6() {
			// An IPv4-mapped IPv6 prefix is an IPv4 range (as in the
			// first-last form); a masked one always has at least 96 bits.
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return checkMapped(s, Range{First: p.Addr(), Last: lastOf(p)})
	}
	first, last, ok := strings.Cut(in, "-")
	if !ok {
		a, err := netip.ParseAddr(in)
		if err != nil {
			return Range{}, fmt.Errorf("invalid address range %q: want CIDR, first-last or a single address", s)
		}
		first, last = a.String(), a.String()
	}
	f, err := netip.ParseAddr(strings.TrimSpace(first))
	if err != nil {
		return Range{}, fmt.Errorf("invalid address range %q: first address: %w", s, err)
	}
	l, err := netip.ParseAddr(strings.TrimSpace(last))
	if err != nil {
		return Range{}, fmt.Errorf("invalid address range %q: last address: %w", s, err)
	}
	// Check zones before unmapping: Unmap drops the zone of ::ffff:a.b.c.d%eth0.
	if f.Zone() != "" || l.Zone() != "" {
		return Range{}, fmt.Errorf("invalid address range %q: zones are not allowed", s)
	}
	f, l = f.Unmap(), l.Unmap()
	if f.Is4() != l.Is4() {
		return Range{}, fmt.Errorf("invalid address range %q: mixes IPv4 and IPv6", s)
	}
	if l.Less(f) {
		return Range{}, fmt.Errorf("invalid address range %q: last address is before the first", s)
	}
	return checkMapped(s, Range{First: f, Last: l})
}

// The IPv4-mapped block: its addresses are IPv4 addresses everywhere else
// in edgelb (they are unmapped on input), so an IPv6 range may not reach into it.
var (
	mappedFirst = netip.MustParseAddr("::ffff:0.0.0.0")
	mappedLast  = netip.MustParseAddr("::ffff:255.255.255.255")
)

func checkMapped(s string, r Range) (Range, error) {
	if r.First.Is6() && r.First.Compare(mappedLast) <= 0 && mappedFirst.Compare(r.Last) <= 0 {
		return Range{}, fmt.Errorf("invalid address range %q: reaches into the IPv4-mapped block ::ffff:0:0/96 (write IPv4 addresses as IPv4)", s)
	}
	return r, nil
}

func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// String renders a CIDR when the range is exactly one, else first-last.
func (r Range) String() string {
	if !r.First.IsValid() {
		return ""
	}
	if r.First == r.Last {
		return r.First.String()
	}
	for bits := 0; bits <= r.First.BitLen(); bits++ {
		p := netip.PrefixFrom(r.First, bits)
		if p.Masked().Addr() == r.First && lastOf(p) == r.Last {
			return p.String()
		}
	}
	return r.First.String() + "-" + r.Last.String()
}

// Is4 reports whether the range holds IPv4 addresses.
func (r Range) Is4() bool { return r.First.Is4() }

// Contains reports whether a is inside the range.
func (r Range) Contains(a netip.Addr) bool {
	a = a.Unmap()
	return a.Is4() == r.First.Is4() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Overlaps reports whether two ranges share an address.
func (r Range) Overlaps(o Range) bool {
	return r.First.Is4() == o.First.Is4() && r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

// Size is the number of addresses in the range (a big.Int: IPv6 ranges overflow uint64).
func (r Range) Size() *big.Int {
	f := new(big.Int).SetBytes(r.First.AsSlice())
	l := new(big.Int).SetBytes(r.Last.AsSlice())
	return l.Sub(l, f).Add(l, big.NewInt(1))
}

// Pool is a named set of ranges the allocator hands VIPs out of.
type Pool struct {
	Name   string  `json:"name"`
	Ranges []Range `json:"-"`
	// AutoAssign lets services without an explicit pool or IP draw from this pool.
	AutoAssign bool `json:"autoAssign"`
	// AvoidBuggyIPs skips IPv4 addresses ending in .0 and .255, which some
	// old client stacks treat as network/broadcast even inside larger subnets.
	AvoidBuggyIPs bool `json:"avoidBuggyIPs"`
	// Advertisement holds the BGP attributes routes for this pool's VIPs carry.
	Advertisement Advertisement `json:"advertisement"`
	// Announce selects which announcers, BGP peers and L2 interfaces carry
	// the pool's VIPs (MetalLB's advertisement selectors); zero: all.
	Announce Announce `json:"announce"`
	// Allocation narrows which services the pool serves and orders it
	// (MetalLB's serviceAllocation); nil: every service, after the pools
	// that have one.
	Allocation *ServiceAllocation `json:"serviceAllocation,omitempty"`
}

// Advertisement is how a pool's VIPs are announced over BGP.
type Advertisement struct {
	Communities      []string `json:"communities,omitempty"`
	LargeCommunities []string `json:"largeCommunities,omitempty"`
	LocalPref        uint32   `json:"localPref,omitempty"`
	// AggregationLen is the IPv4 routes' length (and, as before there was
	// AggregationLenV6, an IPv6-only pool's); AggregationLenV6 the IPv6
	// routes'. 0: one host route per VIP.
	AggregationLen   int `json:"aggregationLength,omitempty"`
	AggregationLenV6 int `json:"aggregationLengthV6,omitempty"`
}

// AggregationFor is the aggregation length of a's routes for a VIP of
// the family is4 in pool p: aggregationLength for IPv4, aggregationLengthV6
// for IPv6 — or aggregationLength on a pool with no IPv4 range, which is
// how an IPv6 pool wrote it before aggregationLengthV6 existed.
func (p *Pool) AggregationFor(is4 bool) int {
	a := &p.Advertisement
	switch {
	case is4:
		return a.AggregationLen
	case a.AggregationLenV6 != 0 || p.hasV4():
		return a.AggregationLenV6
	}
	return a.AggregationLen
}

func (p *Pool) hasV4() bool {
	for _, r := range p.Ranges {
		if r.Is4() {
			return true
		}
	}
	return false
}

// Announcer names, as a pool's announce.announcers lists them.
const (
	AnnounceL2  = "l2"
	AnnounceBGP = "bgp"
)

// Announce is a pool's announcement selection. Empty lists select all:
// every configured announcer, every BGP peer, the L2 interface.
type Announce struct {
	// Announcers: l2, bgp (empty: both, or whichever is configured).
	Announcers []string `json:"announcers,omitempty"`
	// Peers are BGP peers by name (empty: every peer).
	Peers []string `json:"peers,omitempty"`
	// Interfaces are the L2 interfaces the VIPs may be answered on (empty:
	// announce.l2.interface); a gateway whose L2 interface is not listed
	// does not answer for them.
	Interfaces []string `json:"interfaces,omitempty"`
}

// Via reports whether announcer kind (AnnounceL2, AnnounceBGP) carries
// the pool's VIPs.
func (a *Announce) Via(kind string) bool {
	return len(a.Announcers) == 0 || slices.Contains(a.Announcers, kind)
}

// IsZero reports whether nothing is selected (every announcer, peer, interface).
func (a *Announce) IsZero() bool {
	return len(a.Announcers) == 0 && len(a.Peers) == 0 && len(a.Interfaces) == 0
}

// Contains reports whether a is inside one of the pool's ranges.
func (p *Pool) Contains(a netip.Addr) bool {
	for _, r := range p.Ranges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// Usable reports whether the pool may hand out a (inside, and not a buggy IP).
func (p *Pool) Usable(a netip.Addr) bool {
	if !p.Contains(a) {
		return false
	}
	if p.AvoidBuggyIPs && a.Is4() {
		b := a.As4()
		if b[3] == 0 || b[3] == 255 {
			return false
		}
	}
	return true
}

// UsableSize is the number of addresses the pool may hand out: every
// address of its ranges but, with AvoidBuggyIPs, the IPv4 .0 and .255 ones
// (what the allocator counts; a /27 avoiding them has 31, not 32).
func (p *Pool) UsableSize() *big.Int {
	n := new(big.Int)
	for _, r := range p.Ranges {
		n.Add(n, r.Size())
		if p.AvoidBuggyIPs {
			n.Sub(n, new(big.Int).SetUint64(buggyIn(r)))
		}
	}
	return n
}

// CheckOverlap returns a ConflictError when any range of p overlaps one of
// another pool in others (pools of the same name are skipped: an update).
func CheckOverlap(p *Pool, others []Pool) error {
	for _, o := range others {
		if o.Name == p.Name {
			continue
		}
		for _, r := range p.Ranges {
			for _, q := range o.Ranges {
				if r.Overlaps(q) {
					return &ConflictError{Field: "addresses", Value: r.String(),
						Reason: fmt.Sprintf("range %q of pool %q overlaps range %q of pool %q", r.String(), p.Name, q.String(), o.Name)}
				}
			}
		}
	}
	return nil
}

// RangeStrings renders the ranges for display and storage.
func (p *Pool) RangeStrings() []string {
	out := make([]string, len(p.Ranges))
	for i, r := range p.Ranges {
		out[i] = r.String()
	}
	return out
}

// ValidateName accepts DNS-label-like names (what Kubernetes object names allow),
// so a pool or service name is valid in both modes.
func ValidateName(s string) error {
	if s == "" {
		return fmt.Errorf("name is required")
	}
	if len(s) > 253 {
		return fmt.Errorf("name %q is longer than 253 characters", s)
	}
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.'
		if !ok || (i == 0 || i == len(s)-1) && (c == '-' || c == '.') {
			return fmt.Errorf("name %q must be lower-case letters, digits, '-' or '.', starting and ending with a letter or digit", s)
		}
	}
	return nil
}
