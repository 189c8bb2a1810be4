//go:build netns

package nft

import (
	"context"
	"testing"

	gnft "github.com/google/nftables"

	"github.com/edgelb/edgelb/lab/conformance"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// nftCaps is what the nftables dataplane declares to the conformance suite.
var nftCaps = conformance.Caps{
	Schedulers: []proxy.Scheduler{proxy.RoundRobin, proxy.WeightedRoundRobin, proxy.SourceHash, proxy.DestinationHash, proxy.MaglevHash},
	Methods:    []proxy.Method{proxy.NAT, proxy.NATNoSNAT},
	IPv6:       true,
	CTMark:     true,
}

// TestNetnsConformance runs the shared dataplane suite against nftables.
func TestNetnsConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		New: func(t testing.TB, topo *conformance.Topology) proxy.Dataplane {
			d, err := New(Options{NetNS: int(topo.Gateway.Handle()), SetSysctls: true})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Tamper: func(t testing.TB, topo *conformance.Topology, svc proxy.Service) {
			// Delete the service's frontend element by hand, as `nft delete
			// element inet edgelb vip4 { ... }` would.
			c := rawConn(t, topo.Gateway)
			set := vipSet(svc)
			key := encVIPKey(svc.VIP, svc.Protocol, svc.Port)
			if err := c.SetDeleteElements(set, []gnft.SetElement{{Key: key}}); err != nil {
				t.Fatal(err)
			}
			if err := c.Flush(); err != nil {
				t.Fatalf("tamper: delete %s element of %s: %v", set.Name, svc.Key(), err)
			}
			t.Logf("tampered: deleted %s's element from %s by hand", svc.Key(), set.Name)
		},
		Caps:   nftCaps,
		Prefix: "nfc",
	})
}

// rawConn is a plain nftables connection inside ns, for reading and
// tampering behind the dataplane's back.
func rawConn(t testing.TB, ns *netns.NS) *gnft.Conn {
	t.Helper()
	c, err := gnft.New(gnft.WithNetNSFd(int(ns.Handle())))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func vipSet(svc proxy.Service) *gnft.Set {
	f := famOf(svc.VIP.Is6())
	return &gnft.Set{Table: &gnft.Table{Family: f.family, Name: DefaultTable}, Name: setVIP}
}

var _ = context.Background
