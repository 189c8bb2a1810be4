package lb

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// ErrOwnAddress is wrapped by every refusal of one of the gateway's own
// addresses as a pool address, a VIP or a backend (errors.Is). A VIP on
// the gateway's own address hands its traffic (the API, SSH, BGP) to a
// backend; a backend on it loops the packet back or serves the API on a VIP.
var ErrOwnAddress = errors.New("the gateway's own traffic would be load-balanced")

// OwnAddrs is the set of addresses that belong to the gateway itself, each
// with why ("interface veth0", "api.listen"): the addresses of its
// interfaces and the subnet broadcast and network addresses of their IPv4
// prefixes, and the addresses its configuration binds to. The boundary
// (the daemon: netlink and the config; lb/config: the file alone) builds
// it; the validator only reads it, so it stays pure. A built set is never
// changed (Add on a copy from Clone), so it may be shared between
// goroutines. nil is the empty set.
type OwnAddrs struct {
	why map[netip.Addr][]string
}

// NewOwnAddrs returns an empty set to Add to.
func NewOwnAddrs() *OwnAddrs { return &OwnAddrs{why: map[netip.Addr][]string{}} }

// Add records a as an own address for reason why (an address may have
// several). Invalid addresses are ignored (an unset config field).
func (o *OwnAddrs) Add(a netip.Addr, why string) {
	if !a.IsValid() || a.IsUnspecified() {
		return
	}
	a = a.Unmap().WithZone("")
	if !slices.Contains(o.why[a], why) {
		o.why[a] = append(o.why[a], why)
	}
}

// AddPrefix records an interface address (p.Addr()) and, for an IPv4
// prefix of /30 or shorter, its subnet's broadcast and network addresses:
// a packet to either reaches every host on the segment, the gateway
// included (a /31 and a /32 have neither, RFC 3021).
func (o *OwnAddrs) AddPrefix(p netip.Prefix, why string) {
	a := p.Addr().Unmap()
	o.Add(a, why)
	if !a.Is4() || p.Bits() > 30 || p.Bits() < 1 {
		return
	}
	n := netip.PrefixFrom(a, p.Bits()).Masked()
	o.Add(n.Addr(), fmt.Sprintf("network address of %s on %s", n, why))
	o.Add(lastOf(n), fmt.Sprintf("broadcast address of %s on %s", n, why))
}

// Merge adds every address of other (nil is empty).
func (o *OwnAddrs) Merge(other *OwnAddrs) {
	if other == nil {
		return
	}
	for a, ws := range other.why {
		for _, w := range ws {
			o.Add(a, w)
		}
	}
}

// Clone returns a copy to Add to.
func (o *OwnAddrs) Clone() *OwnAddrs {
	c := NewOwnAddrs()
	c.Merge(o)
	return c
}

// Why reports whether a is an own address, and why.
func (o *OwnAddrs) Why(a netip.Addr) (string, bool) {
	if o == nil || !a.IsValid() {
		return "", false
	}
	ws, ok := o.why[a.Unmap().WithZone("")]
	return strings.Join(ws, ", "), ok
}

// Len is the number of addresses.
func (o *OwnAddrs) Len() int {
	if o == nil {
		return 0
	}
	return len(o.why)
}

// Addrs lists the addresses, sorted.
func (o *OwnAddrs) Addrs() []netip.Addr {
	if o == nil {
		return nil
	}
	return slices.SortedFunc(maps.Keys(o.why), func(a, b netip.Addr) int { return a.Compare(b) })
}

// Equal reports whether both sets hold the same addresses for the same reasons.
func (o *OwnAddrs) Equal(other *OwnAddrs) bool {
	if o.Len() != other.Len() {
		return false
	}
	for a, ws := range o.mapOrNil() {
		if !slices.Equal(ws, other.why[a]) {
			return false
		}
	}
	return true
}

func (o *OwnAddrs) mapOrNil() map[netip.Addr][]string {
	if o == nil {
		return nil
	}
	return o.why
}

// Check refuses a as use when it is an own address: the error quotes it,
// says why it is one and wraps ErrOwnAddress; callers wrap it in a
// FieldError naming the field.
func (o *OwnAddrs) Check(a netip.Addr, use AddrUse) error {
	why, ok := o.Why(a)
	if !ok {
		return nil
	}
	return fmt.Errorf("%s is this gateway's own address (%s), never usable as %s: %w", a.Unmap(), why, use, ErrOwnAddress)
}

// Conflict is the one rule both writers leave a service out by (the
// standalone engine for a ServiceSpec, the Kubernetes per-gateway stage
// for a Service): why a service with these VIPs and backends may not be
// programmed on this gateway, naming every VIP and backend that is an own
// address; "" when none. An address listed twice is named once.
func (o *OwnAddrs) Conflict(vips, backends []netip.Addr) string {
	if o.Len() == 0 {
		return ""
	}
	var why []string
	seen := map[netip.Addr]bool{}
	for _, a := range vips {
		if !seen[a] {
			seen[a] = true
			if err := o.Check(a, UseVIP); err != nil {
				why = append(why, "VIP "+err.Error())
			}
		}
	}
	for _, a := range backends {
		if !seen[a] {
			seen[a] = true
			if err := o.Check(a, UseBackend); err != nil {
				why = append(why, "backend "+err.Error())
			}
		}
	}
	if len(why) == 0 {
		return ""
	}
	return "not programmed: " + strings.Join(why, "; ")
}

// CheckRange refuses a pool range holding an own address, naming the
// lowest one (the set is small: tens of addresses, not a pool's size).
func (o *OwnAddrs) CheckRange(r Range) error {
	for _, a := range o.Addrs() {
		if r.Contains(a) {
			why, _ := o.Why(a)
			return fmt.Errorf("contains %s, this gateway's own address (%s), never usable as %s: %w", a, why, UsePool, ErrOwnAddress)
		}
	}
	return nil
}

// String lists the addresses with their reasons (logs).
func (o *OwnAddrs) String() string {
	var b strings.Builder
	for i, a := range o.Addrs() {
		if i > 0 {
			b.WriteString(", ")
		}
		why, _ := o.Why(a)
		fmt.Fprintf(&b, "%s (%s)", a, why)
	}
	return b.String()
}
