//go:build netns

package nft

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/conformance"
	"github.com/edgelb/edgelb/proxy"
)

// TestNetnsNodePortPerFamily (issue 14): a dual-stack node port is two
// services told apart by Key.Family, each answering in its own family with
// its own family's backends. It starts from the shape the engine rendered
// before (the node port on the IPv4 VIP's service), as a daemon upgraded in
// place does: the node port moves to the new per-family services in one
// Apply, with no refusal.
func TestNetnsNodePortPerFamily(t *testing.T) {
	topo := conformance.NewTopology(t, "nfam")
	d := newDP(t, topo.Gateway)
	ctx := context.Background()
	nodes := []netip.Addr{conformance.GatewayAddr4, conformance.GatewayAddr6}
	const np = 30080
	vip := netip.MustParseAddr("203.0.113.10")
	be := func(ap ...netip.AddrPort) []proxy.Backend {
		var out []proxy.Backend
		for _, a := range ap {
			out = append(out, proxy.Backend{Addr: a, Weight: 1})
		}
		return out
	}
	b4 := be(topo.Backend4(0, conformance.HTTPPort), topo.Backend4(1, conformance.HTTPPort))
	b6 := be(topo.Backend6(1, conformance.HTTPPort), topo.Backend6(2, conformance.HTTPPort))
	old := proxy.Service{Name: "web/http", VIP: vip, Port: 80, NodePort: np, Protocol: proxy.TCP, Backends: b4}
	if err := d.Apply(ctx, proxy.Config{Services: []proxy.Service{old}, NodeAddrs: nodes}); err != nil {
		t.Fatalf("the old shape: %v", err)
	}
	front4 := netip.AddrPortFrom(conformance.GatewayAddr4, np)
	front6 := netip.AddrPortFrom(conformance.GatewayAddr6, np)
	if r, err := topo.GetHTTP(ctx, netip.Addr{}, front4, 2*time.Second); err != nil || (r.Backend != "be1" && r.Backend != "be2") {
		t.Fatalf("old shape, %s: %+v %v", front4, r, err)
	}

	cfg := proxy.Config{NodeAddrs: nodes, Services: []proxy.Service{
		{Name: "web/http", VIP: vip, Port: 80, Protocol: proxy.TCP, Backends: b4},
		{Name: "web/http/nodeport", Port: 80, NodePort: np, Protocol: proxy.TCP, Family: proxy.IPv4, Backends: b4},
		{Name: "web/http/nodeport", Port: 80, NodePort: np, Protocol: proxy.TCP, Family: proxy.IPv6, Backends: b6},
	}}
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatalf("node port per family, from the old shape: %v", err)
	}
	for _, c := range []struct {
		front netip.AddrPort
		want  map[string]bool
	}{{front4, map[string]bool{"be1": true, "be2": true}}, {front6, map[string]bool{"be2": true, "be3": true}}} {
		hits := map[string]int{}
		for i := 0; i < 20; i++ {
			r, err := topo.GetHTTP(ctx, netip.Addr{}, c.front, 2*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", c.front, err)
			}
			if !c.want[r.Backend] {
				t.Fatalf("%s answered by %s, not a backend of its family", c.front, r.Backend)
			}
			hits[r.Backend]++
		}
		t.Logf("MEASURED node port %s: 20/20 answered by its family's backends %v", c.front, hits)
	}
	if err := d.Resync(ctx); err != nil {
		t.Errorf("resync: %v", err)
	}
	if err := d.Apply(ctx, cfg); err != nil {
		t.Errorf("the same Config again: %v", err)
	}
}
