package fake

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

// TestChooseMaglev: the rules of scheduler mh, as the conformance suite's
// MaglevHash scenario checks them on nftables and IPVS, on two fakes: the
// same flow reaches the same backend on both, flows spread, a weight-0
// backend takes none, and removing one of 4 backends moves its flows and
// few others (Maglev at M = 4,093: ~1 % of the survivors' slots; the flow
// hash is fixed, so the count is too).
func TestChooseMaglev(t *testing.T) {
	svc := proxy.Service{Name: "mh", VIP: netip.MustParseAddr("203.0.113.10"), Port: 80, Protocol: proxy.TCP, Scheduler: proxy.MaglevHash}
	for i := 1; i <= 5; i++ {
		svc.Backends = append(svc.Backends, proxy.Backend{Addr: netip.MustParseAddrPort(fmt.Sprintf("198.51.100.%d:8080", i)), Weight: 1})
	}
	svc.Backends[4].Weight = 0
	a, b := New(NFTablesOptions), New(Options{})
	for _, d := range []*Dataplane{a, b} {
		if err := d.Apply(context.Background(), proxy.Config{Services: []proxy.Service{svc}}); err != nil {
			t.Fatal(err)
		}
	}
	flows := make([]netip.AddrPort, 400)
	for i := range flows {
		flows[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 200)}), uint16(30000+i))
	}
	before := map[netip.AddrPort]netip.AddrPort{}
	per := map[netip.AddrPort]int{}
	for _, f := range flows {
		x, err := a.Choose(svc.Key(), f)
		if err != nil {
			t.Fatal(err)
		}
		if y, _ := b.Choose(svc.Key(), f); y != x {
			t.Errorf("flow %s: %s on one fake, %s on the other", f, x, y)
		}
		before[f] = x
		per[x]++
	}
	t.Logf("400 flows: %v", per)
	if len(per) != 4 || per[svc.Backends[4].Addr] != 0 {
		t.Errorf("400 flows over %v: want the 4 weighted backends, none on weight 0", per)
	}
	gone := svc.Backends[0].Addr
	svc.Backends = svc.Backends[1:]
	if err := a.Apply(context.Background(), proxy.Config{Services: []proxy.Service{svc}}); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, f := range flows {
		x, _ := a.Choose(svc.Key(), f)
		switch {
		case x == gone:
			t.Errorf("flow %s still on removed %s", f, gone)
		case before[f] != gone && x != before[f]:
			moved++
		}
	}
	t.Logf("removed %s (%d flows); flows of the other backends that moved: %d of %d", gone, per[gone], moved, 400-per[gone])
	if moved > (400-per[gone])/20 {
		t.Errorf("%d flows of staying backends moved (at most 5 %%)", moved)
	}
	svc.Scheduler = proxy.SourceHash
	a.Apply(context.Background(), proxy.Config{Services: []proxy.Service{svc}})
	if _, err := a.Choose(svc.Key(), flows[0]); !errors.Is(err, ErrNoChoice) {
		t.Errorf("sh: %v, want ErrNoChoice", err)
	}
}
