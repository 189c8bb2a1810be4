package fake

import (
	"context"
	"net/netip"
	"testing"

	"github.com/edgelb/edgelb/lab/conformance"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nft"
)

// TestRefusalsLikeNFTables (issue 14): with NFTablesOptions the fake refuses
// what nftables refuses — the conformance suite's refusal checks, run root-
// free — and refuses per service, keeping a refused service's last good
// objects. The caps come from nft.Check itself, not from a copied list.
func TestRefusalsLikeNFTables(t *testing.T) {
	var caps conformance.Caps
	probe := proxy.Service{VIP: netip.MustParseAddr("203.0.113.10"), Port: 80, Protocol: proxy.TCP,
		Backends: []proxy.Backend{{Addr: netip.MustParseAddrPort("198.51.100.2:8080"), Weight: 1}}}
	for _, sc := range proxy.Schedulers {
		p := probe
		p.Scheduler = sc
		if nft.Check(p) == nil {
			caps.Schedulers = append(caps.Schedulers, sc)
		}
	}
	for _, m := range []proxy.Method{proxy.NAT, proxy.NATNoSNAT, proxy.DirectRouting, proxy.Tunnel} {
		p := probe
		p.Method = m
		if nft.Check(p) == nil {
			caps.Methods = append(caps.Methods, m)
		}
	}
	t.Logf("nftables caps from nft.Check: %+v", caps)
	if len(caps.Schedulers) == len(proxy.Schedulers) {
		t.Fatal("nft.Check accepts every scheduler: nothing to refuse")
	}
	d := New(NFTablesOptions)
	base := probe
	base.Name, base.Scheduler, base.Method = "web/http", proxy.RoundRobin, proxy.NAT
	conformance.Refusals(t, context.Background(), d, caps, base, []netip.Addr{netip.MustParseAddr("192.0.2.1")})

	// A refused change keeps the service's last good objects.
	before := d.Transcript()
	bad := base
	bad.Scheduler = proxy.LeastConn
	err := d.Apply(context.Background(), proxy.Config{Services: []proxy.Service{bad}, NodeAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}})
	if !proxy.Partial(err) {
		t.Fatalf("lc: %v, want a per-service refusal", err)
	}
	if after := d.Transcript(); after != before {
		t.Errorf("a refused change moved the service:\n%s→\n%s", before, after)
	}
}
