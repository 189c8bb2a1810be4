//go:build netns

package nft

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// TestNetnsSourceAddressSNAT: with floating source addresses, method nat
// translates to them (`snat to`) instead of masquerading, in both tables,
// nft reads the rules back, and a Resync finds nothing to repair.
func TestNetnsSourceAddressSNAT(t *testing.T) {
	ns := netns.NewT(t, "nfsrc")
	src4, src6 := netip.MustParseAddr("198.51.100.250"), netip.MustParseAddr("2001:db8:1::fa")
	d, err := New(Options{NetNS: int(ns.Handle()), SourceAddresses: []netip.Addr{src4, src6}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	cfg := proxy.Config{Services: []proxy.Service{
		{Name: "v4", VIP: netip.MustParseAddr("192.0.2.1"), Port: 80, Protocol: proxy.TCP, Method: proxy.NAT,
			Backends: []proxy.Backend{{Addr: netip.MustParseAddrPort("198.51.100.20:8080"), Weight: 1}}},
		{Name: "v6", VIP: netip.MustParseAddr("2001:db8:ff::1"), Port: 80, Protocol: proxy.TCP, Method: proxy.NAT,
			Backends: []proxy.Backend{{Addr: netip.MustParseAddrPort("[2001:db8:1::20]:8080"), Weight: 1}}},
	}}
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for fam, want := range map[string]string{"ip": "snat to " + src4.String(), "ip6": "snat to " + src6.String()} {
		out, err := ns.Exec(ctx, "nft", "list", "chain", fam, DefaultTable, chainPostrouting)
		if err != nil {
			t.Fatalf("nft list %s postrouting: %v %s", fam, err, out)
		}
		if !strings.Contains(string(out), want) || strings.Contains(string(out), "masquerade") {
			t.Errorf("%s postrouting has no %q (or still masquerades):\n%s", fam, want, out)
		}
	}
	before := d.Stats()
	if err := d.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if after := d.Stats(); after.Elements != before.Elements || after.Messages != before.Messages {
		t.Errorf("Resync rewrote a clean table: %+v → %+v", before, after)
	}
}
