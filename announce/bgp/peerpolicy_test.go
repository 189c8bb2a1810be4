package bgp

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
)

// Two routers; VIPs of pools restricted to one peer each, one to none,
// one L2-only: each router gets exactly its routes, and moving a pool to
// the other peer moves its route (GoBGP's global export policy with a
// neighbour set per peer, peerpolicy.go).
func TestSpeakerPeerSelection(t *testing.T) {
	r1 := newTestRouter(t, 64513, routerPeer{addr: "127.0.0.1", asn: 64512})
	r2 := newTestRouterOn(t, "127.0.0.2", 64514, routerPeer{addr: "127.0.0.1", asn: 64512})
	s := newTestSpeaker(t, 64512, r1, func(c *Config) {
		c.Peers = append(c.Peers, Peer{Name: "router2", Address: netip.MustParseAddr("127.0.0.2"), ASN: r2.asn, Port: r2.port,
			SourceAddress: netip.MustParseAddr("127.0.0.1"), HoldTime: 9 * time.Second, ConnectRetry: time.Second})
	})
	ctx := context.Background()
	only := func(peers ...string) func(*announce.VIP) { return func(v *announce.VIP) { v.Peers = peers } }
	l2only := func(v *announce.VIP) { v.Announcers = []string{announce.KindL2} }
	want := func(r *testRouter, what string, exact ...string) {
		t.Helper()
		r.waitRIB(t, what, func(m map[string][]ribPath) bool { return slices.Equal(prefixes(m), exact) })
	}
	set := func(vips ...announce.VIP) {
		t.Helper()
		if err := s.SetVIPs(ctx, vips); err != nil {
			t.Fatal(err)
		}
	}
	set(vip("203.0.113.1"), vip("203.0.113.2", only("router")), vip("203.0.113.3", only("router2")), vip("203.0.113.4", l2only),
		vip("203.0.113.5", only("router", "router2")))
	waitEstablished(t, s)
	want(r1, "all, .2 and .5", "203.0.113.1/32", "203.0.113.2/32", "203.0.113.5/32")
	want(r2, "all, .3 and .5", "203.0.113.1/32", "203.0.113.3/32", "203.0.113.5/32")

	// .2 moves to router2, .3 loses its restriction, .5 leaves.
	set(vip("203.0.113.1"), vip("203.0.113.2", only("router2")), vip("203.0.113.3"), vip("203.0.113.4", l2only))
	want(r1, ".1 and .3", "203.0.113.1/32", "203.0.113.3/32")
	want(r2, ".1, .2 and .3", "203.0.113.1/32", "203.0.113.2/32", "203.0.113.3/32")
	if got := s.Advertised(); !slices.Equal(got, []string{"203.0.113.1/32", "203.0.113.2/32", "203.0.113.3/32"}) {
		t.Fatalf("advertised %v", got)
	}
}
