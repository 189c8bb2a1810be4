//go:build netns

package nft

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lab/conformance"
	"github.com/edgelb/edgelb/proxy"
)

// TestNetnsRefusalPerService100 (issue 14) with the real nftables dataplane
// in namespaces and 100 services:
//   - a change asking for lc (what a REST PUT would ask) is refused by
//     Check — the verdict the engine uses to answer 422 — and, handed to
//     Apply anyway, is refused for that service alone: the kernel's ruleset
//     is byte-for-byte what it was (the service keeps its last good state);
//   - a service that cannot be programmed beside the others (a 101st
//     claiming service 7's frontend) is refused alone: the error names only
//     it, and all 100 VIPs answer HTTP through the gateway (counted);
//   - a change the kernel itself refuses (EBUSY deleting a chain someone
//     else's rule jumps to) is isolated to its service, and a new service
//     in the same Apply is programmed (101 answer).
//
// Before, either refusal failed the whole Apply and nothing changed — for a
// new Config, none of the 100 services would have been programmed.
func TestNetnsRefusalPerService100(t *testing.T) {
	topo := conformance.NewTopology(t, "nfr")
	d := newDP(t, topo.Gateway)
	ctx := context.Background()
	nodes := []netip.Addr{conformance.GatewayAddr4}
	svcs := make([]proxy.Service, 100)
	for i := range svcs {
		s := proxy.Service{Name: "svc" + string(rune('A'+i/26)) + string(rune('a'+i%26)),
			VIP: netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + i)}), Port: 80, Protocol: proxy.TCP, Scheduler: proxy.RoundRobin}
		for b := range topo.Backends {
			s.Backends = append(s.Backends, proxy.Backend{Addr: topo.Backend4(b, conformance.HTTPPort), Weight: 1})
		}
		svcs[i] = s
	}
	// Service 13 alone uses 7-minute affinity, so it alone uses the chain
	// post-m-a420000 (the kernel refusal below hangs on it).
	svcs[13].Affinity = 7 * time.Minute
	// One bad service from the start: the other 100 are programmed anyway.
	clash := svcs[7]
	clash.Name, clash.NodePort = "clash", 30007 // another key, service 7's VIP:port
	err := d.Apply(ctx, proxy.Config{Services: append(slices.Clone(svcs), clash), NodeAddrs: nodes})
	failed := proxy.FailedServices(err)
	if !proxy.Partial(err) || len(failed) != 1 || failed[clash.Key()] == nil {
		t.Fatalf("100 good + 1 clashing: %v, want only %s refused", err, clash.Key())
	}
	t.Logf("refused alone: %v", failed[clash.Key()])
	answered := func() int {
		n := 0
		for _, s := range svcs {
			if _, err := topo.GetHTTP(ctx, netip.Addr{}, netip.AddrPortFrom(s.VIP, s.Port), 3*time.Second); err == nil {
				n++
			} else {
				t.Logf("%s: %v", s.Name, err)
			}
		}
		return n
	}
	if n := answered(); n != 100 {
		t.Fatalf("%d of 100 VIPs answer HTTP beside a refused service, want 100", n)
	} else {
		t.Logf("HTTP: %d of 100 VIPs answer beside 1 refused service", n)
	}

	// lc on service 42: Check refuses it up front (REST 422), and Apply
	// refuses it alone without touching the kernel.
	before := dump(t, topo.Gateway)
	lc := slices.Clone(svcs)
	lc[42].Scheduler = proxy.LeastConn
	if err := Check(lc[42]); !errors.Is(err, proxy.ErrUnsupported) {
		t.Fatalf("Check(lc): %v, want ErrUnsupported", err)
	}
	err = d.Apply(ctx, proxy.Config{Services: lc, NodeAddrs: nodes})
	failed = proxy.FailedServices(err)
	if !proxy.Partial(err) || len(failed) != 1 || !errors.Is(failed[lc[42].Key()], proxy.ErrUnsupported) {
		t.Fatalf("lc on one of 100: %v, want only %s refused with ErrUnsupported", err, lc[42].Key())
	}
	after := dump(t, topo.Gateway)
	if gone, added := diffLines(before, after); len(gone)+len(added) != 0 {
		t.Fatalf("a refused change moved the kernel: -%v +%v", gone, added)
	}
	t.Logf("lc refused alone; kernel: %d lines before, %d after, 0 differ", len(before), len(after))
	if n := answered(); n != 100 {
		t.Fatalf("%d of 100 VIPs answer HTTP after a refused change, want 100", n)
	} else {
		t.Logf("HTTP: %d of 100 VIPs answer after the refused lc change", n)
	}

	// The kernel itself refuses one service: someone's rule in edgelb's
	// table jumps to post-m-a420000, so deleting that chain — which
	// dropping service 13's affinity does — fails with EBUSY, and nf_tables
	// fails the whole batch with it. In the same Apply a new service (101)
	// arrives. Service 13 is isolated: reported failed, kept as it was;
	// service 101 and the other 99 are programmed.
	c := rawConn(t, topo.Gateway)
	ours := &gnft.Table{Family: gnft.TableFamilyIPv4, Name: DefaultTable}
	ch := c.AddChain(&gnft.Chain{Table: ours, Name: "someone-elses"})
	c.AddRule(&gnft.Rule{Table: ours, Chain: ch, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "post-m-a420000"}}})
	if err := c.Flush(); err != nil {
		t.Fatalf("foreign jump: %v", err)
	}
	next := slices.Clone(svcs)
	next[13].Affinity = 0
	extra := svcs[0]
	extra.Name, extra.VIP = "svc-new", netip.MustParseAddr("203.0.113.200")
	next = append(next, extra)
	err = d.Apply(ctx, proxy.Config{Services: next, NodeAddrs: nodes})
	failed = proxy.FailedServices(err)
	if !proxy.Partial(err) || len(failed) != 1 || !errors.Is(failed[next[13].Key()], unix.EBUSY) {
		t.Fatalf("kernel refusing service 13's change: %v, want only %s refused (EBUSY)", err, next[13].Key())
	}
	t.Logf("kernel refusal isolated: %v", failed[next[13].Key()])
	svcs = append(svcs, extra)
	if n := answered(); n != 101 {
		t.Fatalf("%d of 101 VIPs answer HTTP beside the kernel-refused service, want 101", n)
	} else {
		t.Logf("HTTP: %d of 101 VIPs answer (100 + the new one) beside the kernel-refused service", n)
	}
	// Steady: the same Config again is refused the same way, nothing else moves.
	before = dump(t, topo.Gateway)
	if err := d.Apply(ctx, proxy.Config{Services: next, NodeAddrs: nodes}); len(proxy.FailedServices(err)) != 1 {
		t.Fatalf("again: %v", err)
	}
	if gone, added := diffLines(before, dump(t, topo.Gateway)); len(gone)+len(added) != 0 {
		t.Errorf("the repeated Apply moved the kernel: -%v +%v", gone, added)
	}
}
