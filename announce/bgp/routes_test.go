package bgp

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb/fielderr"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
)

func TestDesiredRoutes(t *testing.T) {
	c := newAttrCache()
	got, err := c.desiredRoutes([]announce.VIP{
		vip("203.0.113.10", withAttrs([]string{"no-export", "65000:1", "65000:1"}, []string{"65000:1:2"}, 0)),
		vip("2001:db8::5"),
		vip("::ffff:198.51.100.7"), // 4in6 is the IPv4 VIP
		vip("203.0.113.200", func(v *announce.VIP) { v.AggregationLen, v.Communities, v.LocalPref = 24, []string{"65000:9"}, 150 }),
		vip("203.0.113.201", func(v *announce.VIP) { v.AggregationLen, v.Communities, v.LocalPref = 24, []string{"65000:8"}, 120 }),
		vip("2001:db8:1::1", func(v *announce.VIP) { v.AggregationLen = 64 }),
		vip("198.51.100.9", func(v *announce.VIP) { v.AggregationLen = 64 }), // IPv6 length on an IPv4 VIP: host route
	})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range sortedPrefixes(got) {
		keys = append(keys, got[p].String())
	}
	want := []string{
		"198.51.100.7/32",
		"198.51.100.9/32",
		"203.0.113.0/24 communities=[65000:8 65000:9] local-pref=150",
		"203.0.113.10/32 communities=[65000:1 65535:65281] large=[65000:1:2]",
		"2001:db8::5/128",
		"2001:db8:1::/64",
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("routes\n got %q\nwant %q", keys, want)
	}
}

func TestDesiredRoutesErrors(t *testing.T) {
	c := newAttrCache()
	got, err := c.desiredRoutes([]announce.VIP{
		vip("203.0.113.1", withAttrs([]string{"65000:1", "nope"}, nil, 0)),
		vip("203.0.113.2", withAttrs(nil, []string{"1:2:x"}, 0)),
		{},
		vip("203.0.113.3"),
	})
	var fe *fielderr.Error
	if !errors.As(err, &fe) {
		t.Fatalf("want a FieldError, got %v", err)
	}
	for _, s := range []string{`vip 203.0.113.1 (pool "p"): communities[1] "nope"`, `largeCommunities[0] "1:2:x"`, `vip: not a unicast address`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %s: %v", s, err)
		}
	}
	if len(got) != 1 || got[netip.MustParsePrefix("203.0.113.3/32")] == nil {
		t.Fatalf("routes %v", got)
	}
}

func TestRouteEqualAndCache(t *testing.T) {
	c := newAttrCache()
	a, _ := c.routeFor(vip("203.0.113.1", withAttrs([]string{"65000:2", "65000:1"}, nil, 5)))
	b, _ := c.routeFor(vip("203.0.113.1", withAttrs([]string{"65000:1", "65000:2", "65000:1"}, nil, 5)))
	d, _ := c.routeFor(vip("203.0.113.1", withAttrs([]string{"65000:1"}, nil, 5)))
	if !a.equal(b) || a.equal(d) {
		t.Fatalf("equal: %v %v %v", a, b, d)
	}
	if len(c.comm) != 2 {
		t.Fatalf("cache %v", c.comm)
	}
}

func TestRouteAPIPath(t *testing.T) {
	c := newAttrCache()
	for _, v := range []announce.VIP{
		vip("203.0.113.1", withAttrs([]string{"65000:1"}, []string{"1:2:3"}, 300)),
		vip("2001:db8::1", withAttrs([]string{"no-export"}, nil, 0)),
	} {
		r, err := c.routeFor(v)
		if err != nil {
			t.Fatal(err)
		}
		p, err := r.apiPath()
		if err != nil {
			t.Fatal(err)
		}
		attrs, err := apiutil.GetNativePathAttributes(p)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, a := range attrs {
			switch a := a.(type) {
			case *bgp.PathAttributeOrigin:
				kinds = append(kinds, "origin")
			case *bgp.PathAttributeNextHop:
				kinds = append(kinds, "nexthop "+a.Value.String())
			case *bgp.PathAttributeMpReachNLRI:
				kinds = append(kinds, "mpreach "+a.Nexthop.String())
			case *bgp.PathAttributeCommunities:
				kinds = append(kinds, "communities")
			case *bgp.PathAttributeLargeCommunities:
				kinds = append(kinds, "large")
			case *bgp.PathAttributeLocalPref:
				kinds = append(kinds, "local-pref")
			}
		}
		t.Logf("%s: %v", r, kinds)
		if len(kinds) < 3 {
			t.Fatalf("attributes %v", kinds)
		}
	}
}
