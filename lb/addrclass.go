package lb

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrAddressClass is wrapped by every refusal from the address-class table
// (errors.Is), so callers can tell "wrong kind of address" from syntax.
var ErrAddressClass = errors.New("special-purpose address")

// AddrUse is what an address is being used as.
type AddrUse uint8

const (
	UsePool    AddrUse = iota // inside a pool's range
	UseVIP                    // a service's VIP
	UseBackend                // a backend address
	UseSource                 // a floating source address (announce.l2.sourceAddresses)
)

func (u AddrUse) String() string {
	switch u {
	case UsePool:
		return "a pool address"
	case UseVIP:
		return "a VIP"
	case UseSource:
		return "a floating source address"
	default:
		return "a backend"
	}
}

// AddrClass is one row of the special-purpose table: a prefix and whether
// an address in it may be a pool address, a VIP, a backend.
type AddrClass struct {
	Prefix             netip.Prefix
	Name               string
	Pool, VIP, Backend bool
}

// AddrClasses follows the IANA IPv4 and IPv6 Special-Purpose Address
// Registries (RFC 6890 and successors). Rows not listed here (global
// unicast, and the registry rows that are plain unicast for our purpose:
// 100.64/10 shared, 192.0.0/24 protocol assignments, 198.18/15 benchmarking,
// 2001::/23, 64:ff9b::/96, fc00::/7 unique-local) are usable for all three.
// The documentation ranges stay usable: the labs and the examples live there.
// The most specific matching prefix wins (169.254.169.254/32 before
// 169.254.0.0/16).
var AddrClasses = []AddrClass{
	// IPv4
	{Prefix: pfx("0.0.0.0/8"), Name: "\"this network\" (RFC 791)"},
	{Prefix: pfx("10.0.0.0/8"), Name: "private-use (RFC 1918)", Pool: true, VIP: true, Backend: true},
	{Prefix: pfx("127.0.0.0/8"), Name: "loopback (RFC 1122)"},
	{Prefix: pfx("169.254.0.0/16"), Name: "link-local (RFC 3927)"},
	{Prefix: pfx("169.254.169.254/32"), Name: "the cloud instance metadata address (link-local)"},
	{Prefix: pfx("172.16.0.0/12"), Name: "private-use (RFC 1918)", Pool: true, VIP: true, Backend: true},
	{Prefix: pfx("192.0.2.0/24"), Name: "documentation TEST-NET-1 (RFC 5737)", Pool: true, VIP: true, Backend: true},
	{Prefix: pfx("192.168.0.0/16"), Name: "private-use (RFC 1918)", Pool: true, VIP: true, Backend: true},
	{Prefix: pfx("198.51.100.0/24"), Name: "documentation TEST-NET-2 (RFC 5737)", Pool: true, VIP: true, Backend: true},
	{Prefix: pfx("203.0.113.0/24"), Name: "documentation TEST-NET-3 (RFC 5737)", Pool: true, VIP: true, Backend: true},
	{Prefix: pfx("224.0.0.0/4"), Name: "multicast (RFC 5771)"},
	{Prefix: pfx("240.0.0.0/4"), Name: "reserved (RFC 1112)"},
	{Prefix: pfx("255.255.255.255/32"), Name: "limited broadcast (RFC 919)"},
	// IPv6
	{Prefix: pfx("::/128"), Name: "the unspecified address (RFC 4291)"},
	{Prefix: pfx("::1/128"), Name: "loopback (RFC 4291)"},
	{Prefix: pfx("::ffff:0:0/96"), Name: "IPv4-mapped (RFC 4291): write the IPv4 address"},
	{Prefix: pfx("2001:db8::/32"), Name: "documentation (RFC 3849)", Pool: true, VIP: true, Backend: true},
	{Prefix: pfx("fe80::/10"), Name: "link-local unicast (RFC 4291)"},
	{Prefix: pfx("ff00::/8"), Name: "multicast (RFC 4291)"},
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// ClassOf returns the most specific row containing a, or false for
// ordinary unicast.
func ClassOf(a netip.Addr) (AddrClass, bool) {
	best := -1
	for i := range AddrClasses {
		p := AddrClasses[i].Prefix
		if p.Contains(a) && (best < 0 || p.Bits() > AddrClasses[best].Prefix.Bits()) {
			best = i
		}
	}
	if best < 0 {
		return AddrClass{}, false
	}
	return AddrClasses[best], true
}

// CheckAddr reports whether a may be used as u. The error wraps
// ErrAddressClass and names the class; callers wrap it in a FieldError.
// IPv4-mapped IPv6 is judged as the IPv4 address it maps (the parsers
// unmap), so only a zone makes an otherwise good address bad here.
func CheckAddr(a netip.Addr, u AddrUse) error {
	if !a.IsValid() {
		return fmt.Errorf("not an IP address: %w", ErrAddressClass)
	}
	if a.Zone() != "" {
		return fmt.Errorf("a zone is not allowed in %s: %w", u, ErrAddressClass)
	}
	c, ok := ClassOf(a.Unmap())
	if !ok {
		return nil
	}
	// A floating source address is answered for like a VIP: the same rows.
	// (A switch, not a map literal: this runs for every backend of a
	// 10,000-service config at start-up.)
	var allowed bool
	switch u {
	case UsePool:
		allowed = c.Pool
	case UseVIP, UseSource:
		allowed = c.VIP
	case UseBackend:
		allowed = c.Backend
	}
	if allowed {
		return nil
	}
	return fmt.Errorf("%s is not usable as %s (%w)", c.Name, u, ErrAddressClass)
}

// CheckRange refuses a pool range that holds any address not usable as a
// pool address: the first and last are checked, and every table row that
// starts inside the range (a range can straddle a special prefix).
func CheckRange(r Range) error {
	if err := CheckAddr(r.First, UsePool); err != nil {
		return fmt.Errorf("first address %s: %w", r.First, err)
	}
	if err := CheckAddr(r.Last, UsePool); err != nil {
		return fmt.Errorf("last address %s: %w", r.Last, err)
	}
	for _, c := range AddrClasses {
		if c.Pool || c.Prefix.Addr().Is4() != r.First.Is4() {
			continue
		}
		if r.Contains(c.Prefix.Addr()) {
			return fmt.Errorf("contains %s (%s), not usable as %s: %w", c.Prefix, c.Name, UsePool, ErrAddressClass)
		}
	}
	return nil
}

// ValidateAggregation checks a pool's BGP aggregation length against its
// ranges: at most the family's bits (32 when the pool has an IPv4 range),
// and every range must split into whole /n blocks, or the aggregate would
// announce addresses outside the pool. 0 = one host route per VIP.
func ValidateAggregation(n int, ranges []Range) error {
	if n == 0 {
		return nil
	}
	max := MaxAggregationLen
	for _, r := range ranges {
		if r.Is4() {
			max = 32
		}
	}
	if n < 0 || n > max {
		return fmt.Errorf("out of range 0-%d (0 announces one host route per VIP)", max)
	}
	for _, r := range ranges {
		first := netip.PrefixFrom(r.First, n).Masked()
		last := netip.PrefixFrom(r.Last, n).Masked()
		next := r.Last.Next()
		if first.Addr() != r.First || next.IsValid() && last.Contains(next) {
			return fmt.Errorf("range %q does not split into /%d blocks, so the aggregate would announce addresses outside the pool", r.String(), n)
		}
	}
	return nil
}
