package lb

import (
	"errors"
	"testing"

	"github.com/edgelb/edgelb/lb/fielderr"
)

// Every refusal of a pool's announce: and per-family aggregation names
// its field and quotes the value; the accepted forms parse.
func TestPoolAnnounceValidation(t *testing.T) {
	an := Announcers{L2Interface: "eth0", BGP: true, BGPPeers: []string{"r1", "r2"}}
	for _, tc := range []struct {
		desc  string
		in    PoolInput
		field string
		value string
	}{
		{"ok: default", PoolInput{Addresses: []string{"192.0.2.0/24"}}, "", ""},
		{"ok: bgp to r1, aggregated", PoolInput{Addresses: []string{"192.0.2.0/24"}, Announce: &PoolAnnounceInput{Announcers: []string{"bgp"}, Peers: []string{"r1"}},
			Advertisement: &AdvertisementInput{AggregationLength: 24}}, "", ""},
		{"ok: l2 on eth0 and eth1", PoolInput{Addresses: []string{"192.0.2.0/24"}, Announce: &PoolAnnounceInput{Announcers: []string{"l2"}, Interfaces: []string{"eth1", "eth0"}}}, "", ""},
		{"ok: dual-stack per family", PoolInput{Addresses: []string{"192.0.2.0/24", "2001:db8::/64"},
			Advertisement: &AdvertisementInput{AggregationLength: 24, AggregationLengthV6: 64}}, "", ""},
		{"ok: IPv6-only as written before V6", PoolInput{Addresses: []string{"2001:db8::/64"}, Advertisement: &AdvertisementInput{AggregationLength: 64}}, "", ""},
		{"unknown announcer", PoolInput{Addresses: []string{"192.0.2.0/24"}, Announce: &PoolAnnounceInput{Announcers: []string{"ospf"}}}, "announce.announcers[0]", "ospf"},
		{"announcer twice", PoolInput{Addresses: []string{"192.0.2.0/24"}, Announce: &PoolAnnounceInput{Announcers: []string{"l2", "l2"}}}, "announce.announcers[1]", "l2"},
		{"unknown peer", PoolInput{Addresses: []string{"192.0.2.0/24"}, Announce: &PoolAnnounceInput{Peers: []string{"r9"}}}, "announce.peers[0]", "r9"},
		{"peers on l2-only", PoolInput{Addresses: []string{"192.0.2.0/24"}, Announce: &PoolAnnounceInput{Announcers: []string{"l2"}, Peers: []string{"r1"}}}, "announce.peers", "r1"},
		{"interfaces on bgp-only", PoolInput{Addresses: []string{"192.0.2.0/24"}, Announce: &PoolAnnounceInput{Announcers: []string{"bgp"}, Interfaces: []string{"eth0"}}}, "announce.interfaces", "eth0"},
		{"interfaces without ours", PoolInput{Addresses: []string{"192.0.2.0/24"}, Announce: &PoolAnnounceInput{Interfaces: []string{"eth1"}}}, "announce.interfaces", "eth1"},
		{"bad interface name", PoolInput{Addresses: []string{"192.0.2.0/24"}, Announce: &PoolAnnounceInput{Interfaces: []string{"a/b"}}}, "announce.interfaces[0]", "a/b"},
		{"route attributes on l2-only", PoolInput{Addresses: []string{"192.0.2.0/24"}, Announce: &PoolAnnounceInput{Announcers: []string{"l2"}},
			Advertisement: &AdvertisementInput{LocalPref: 100}}, "advertisement", ""},
		{"v4 length beyond 32 on dual-stack", PoolInput{Addresses: []string{"192.0.2.0/24", "2001:db8::/64"},
			Advertisement: &AdvertisementInput{AggregationLength: 64}}, "advertisement.aggregationLength", "64"},
		{"V6 length on IPv4-only", PoolInput{Addresses: []string{"192.0.2.0/24"}, Advertisement: &AdvertisementInput{AggregationLengthV6: 64}}, "advertisement.aggregationLengthV6", "64"},
		{"V6 length splits badly", PoolInput{Addresses: []string{"2001:db8::/64"}, Advertisement: &AdvertisementInput{AggregationLengthV6: 48}}, "advertisement.aggregationLengthV6", "48"},
		{"both lengths on IPv6-only", PoolInput{Addresses: []string{"2001:db8::/64"}, Advertisement: &AdvertisementInput{AggregationLength: 64, AggregationLengthV6: 64}}, "advertisement.aggregationLength", "64"},
		{"V6 length out of range", PoolInput{Addresses: []string{"2001:db8::/64"}, Advertisement: &AdvertisementInput{AggregationLengthV6: 129}}, "advertisement.aggregationLengthV6", "129"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := tc.in
			in.Name = "p"
			var c fielderr.Collector
			p := ConvertPool(&c, "", &in)
			CheckPool(&c, "", &p, nil)
			CheckPoolAnnounce(&c, "", &p, an)
			err := c.Err()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var list *Errors
			if !errors.As(err, &list) || list.List[0].Field != tc.field || list.List[0].Value != tc.value {
				t.Fatalf("want %s = %q refused, got %v", tc.field, tc.value, err)
			}
		})
	}
}

// The aggregation length a VIP's routes get, per family.
func TestAggregationFor(t *testing.T) {
	for _, tc := range []struct {
		addrs        []string
		v4, v6       int64
		want4, want6 int
	}{
		{[]string{"192.0.2.0/24", "2001:db8::/64"}, 24, 64, 24, 64},
		{[]string{"192.0.2.0/24", "2001:db8::/64"}, 24, 0, 24, 0}, // MetalLB: aggregationLength is IPv4's
		{[]string{"2001:db8::/64"}, 64, 0, 0, 64},                 // the spelling before aggregationLengthV6
		{[]string{"2001:db8::/64"}, 0, 120, 0, 120},
	} {
		p, err := ParsePool(&PoolInput{Name: "p", Addresses: tc.addrs, Advertisement: &AdvertisementInput{AggregationLength: tc.v4, AggregationLengthV6: tc.v6}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if g4, g6 := p.AggregationFor(true), p.AggregationFor(false); g4 != tc.want4 && len(tc.addrs) > 1 || g6 != tc.want6 {
			t.Errorf("%v %d/%d: got %d/%d, want %d/%d", tc.addrs, tc.v4, tc.v6, g4, g6, tc.want4, tc.want6)
		}
	}
}
