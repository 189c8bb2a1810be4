package bgp

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb/fielderr"
	api "github.com/osrg/gobgp/v3/api"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// route is one prefix we advertise with its attributes, in canonical form
// (sorted, without duplicates) so two routes compare with equal.
type route struct {
	prefix    netip.Prefix
	comms     []Community
	large     []LargeCommunity
	localPref uint32 // 0 = unset (iBGP peers then see GoBGP's default 100)
	// peers are the names of the only peers the route goes to, sorted;
	// nil: every peer (peerpolicy.go).
	peers []string
}

func (r *route) equal(o *route) bool {
	return r.prefix == o.prefix && r.localPref == o.localPref &&
		slices.Equal(r.comms, o.comms) && slices.Equal(r.large, o.large) &&
		(r.peers == nil) == (o.peers == nil) && slices.Equal(r.peers, o.peers)
}

func (r *route) String() string {
	var b strings.Builder
	b.WriteString(r.prefix.String())
	if len(r.comms) > 0 {
		fmt.Fprintf(&b, " communities=%v", r.comms)
	}
	if len(r.large) > 0 {
		fmt.Fprintf(&b, " large=%v", r.large)
	}
	if r.localPref != 0 {
		fmt.Fprintf(&b, " local-pref=%d", r.localPref)
	}
	if r.peers != nil {
		fmt.Fprintf(&b, " peers=%v", r.peers)
	}
	return b.String()
}

// merge folds another VIP's attributes into an aggregate: the union of the
// communities and the highest local-pref, so the result does not depend on
// the order of the VIPs.
func (r *route) merge(o *route) {
	r.comms = canonical(append(r.comms, o.comms...), cmp.Compare[Community])
	r.large = canonical(append(r.large, o.large...), func(a, b LargeCommunity) int {
		if a.less(b) {
			return -1
		} else if b.less(a) {
			return 1
		}
		return 0
	})
	r.localPref = max(r.localPref, o.localPref)
}

func canonical[T comparable](s []T, cmp func(a, b T) int) []T {
	if len(s) == 0 {
		return nil
	}
	slices.SortFunc(s, cmp)
	return slices.Compact(s)
}

// attrCache parses each distinct community string once: pools carry a few
// strings that every SetVIPs repeats.
type attrCache struct {
	comm  map[string]Community
	large map[string]LargeCommunity
}

const maxCached = 4096 // pools carry a handful; this only bounds a pathological input

func newAttrCache() *attrCache {
	return &attrCache{comm: map[string]Community{}, large: map[string]LargeCommunity{}}
}

func (c *attrCache) community(s string) (Community, bool) {
	if v, ok := c.comm[s]; ok {
		return v, true
	}
	v, ok := parseCommunity(s)
	if ok {
		if len(c.comm) >= maxCached {
			clear(c.comm)
		}
		c.comm[s] = v
	}
	return v, ok
}

func (c *attrCache) largeCommunity(s string) (LargeCommunity, bool) {
	if v, ok := c.large[s]; ok {
		return v, true
	}
	v, ok := parseLargeCommunity(s)
	if ok {
		if len(c.large) >= maxCached {
			clear(c.large)
		}
		c.large[s] = v
	}
	return v, ok
}

// routeFor turns one VIP into its route: the host prefix, or the prefix of
// AggregationLen bits around it when that is shorter. A length beyond the
// family's (a dual-stack pool's IPv6 length on an IPv4 VIP) means host route.
func (c *attrCache) routeFor(v announce.VIP) (*route, error) {
	if !v.Addr.IsValid() || v.Addr.IsUnspecified() {
		return nil, &fielderr.Error{Field: "vip", Value: addrString(v.Addr), Err: errors.New("not a unicast address")}
	}
	addr := v.Addr.Unmap().WithZone("")
	bits := addr.BitLen()
	if l := v.AggregationLen; l > 0 && l < bits {
		bits = l
	}
	prefix, err := addr.Prefix(bits)
	if err != nil {
		return nil, &fielderr.Error{Field: fmt.Sprintf("vip %s: aggregationLength", addr), Value: fmt.Sprint(v.AggregationLen), Err: err}
	}
	r := &route{prefix: prefix, localPref: v.LocalPref}
	var errs []error
	for i, s := range v.Communities {
		cm, ok := c.community(s)
		if !ok {
			errs = append(errs, &fielderr.Error{Field: fmt.Sprintf("vip %s (pool %q): communities[%d]", addr, v.Pool, i), Value: s, Err: errCommunity})
			continue
		}
		r.comms = append(r.comms, cm)
	}
	for i, s := range v.LargeCommunities {
		lc, ok := c.largeCommunity(s)
		if !ok {
			errs = append(errs, &fielderr.Error{Field: fmt.Sprintf("vip %s (pool %q): largeCommunities[%d]", addr, v.Pool, i), Value: s, Err: errLargeCommunity})
			continue
		}
		r.large = append(r.large, lc)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r.merge(&route{}) // canonical order
	if len(v.Peers) > 0 {
		r.peers = canonical(slices.Clone(v.Peers), strings.Compare)
	}
	return r, nil
}

// desiredRoutes maps the VIPs BGP announces (VIP.ViaBGP) to the routes to
// advertise. A VIP whose attributes do not parse is left out (advertising
// it without, say, its no-export community could leak it) and reported in
// the error.
func (c *attrCache) desiredRoutes(vips []announce.VIP) (map[netip.Prefix]*route, error) {
	out := make(map[netip.Prefix]*route, len(vips))
	var errs []error
	for _, v := range vips {
		if !v.ViaBGP() {
			continue // its pool is L2 only
		}
		r, err := c.routeFor(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, ok := out[r.prefix]; ok {
			// An aggregate of VIPs of one pool (aggregation stays inside a
			// range); should two disagree, the route goes where either may.
			if prev.peers != nil && r.peers != nil {
				prev.peers = canonical(append(prev.peers, r.peers...), strings.Compare)
			} else {
				prev.peers = nil
			}
			prev.merge(r)
			continue
		}
		out[r.prefix] = r
	}
	return out, errors.Join(errs...)
}

func family(p netip.Prefix) *api.Family {
	if p.Addr().Is4() {
		return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
}

// apiPath builds the GoBGP path. The next hop is unspecified: GoBGP puts
// the session's local address there for each peer, which is what makes
// several gateways show up as several next hops (ECMP) at the router.
func (r *route) apiPath() (*api.Path, error) {
	nh := "0.0.0.0"
	if r.prefix.Addr().Is6() {
		nh = "::"
	}
	msgs := []proto.Message{
		&api.OriginAttribute{Origin: 0}, // IGP
		&api.NextHopAttribute{NextHop: nh},
	}
	if len(r.comms) > 0 {
		cs := make([]uint32, len(r.comms))
		for i, c := range r.comms {
			cs[i] = uint32(c)
		}
		msgs = append(msgs, &api.CommunitiesAttribute{Communities: cs})
	}
	if len(r.large) > 0 {
		ls := make([]*api.LargeCommunity, len(r.large))
		for i, c := range r.large {
			ls[i] = &api.LargeCommunity{GlobalAdmin: c.Global, LocalData1: c.Local1, LocalData2: c.Local2}
		}
		msgs = append(msgs, &api.LargeCommunitiesAttribute{Communities: ls})
	}
	if r.localPref != 0 {
		msgs = append(msgs, &api.LocalPrefAttribute{LocalPref: r.localPref})
	}
	attrs := make([]*anypb.Any, len(msgs))
	for i, m := range msgs {
		a, err := anypb.New(m)
		if err != nil {
			return nil, fmt.Errorf("encode %T for %s: %w", m, r.prefix, err)
		}
		attrs[i] = a
	}
	nlri, err := anypb.New(&api.IPAddressPrefix{Prefix: r.prefix.Addr().String(), PrefixLen: uint32(r.prefix.Bits())})
	if err != nil {
		return nil, fmt.Errorf("encode prefix %s: %w", r.prefix, err)
	}
	return &api.Path{Family: family(r.prefix), Nlri: nlri, Pattrs: attrs}, nil
}
