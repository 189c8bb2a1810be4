package conformance

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"

	"github.com/edgelb/edgelb/proxy"
)

// fwmarkMark is the mark the scenario's own rule sets and its service matches.
const fwmarkMark = 0x2a

// fwmark: a firewall-mark service (keepalived's `virtual_server fwmark N`)
// with real traffic. As with keepalived, the marking rule and the address
// are the operator's: the suite binds the address to the gateway's lo and
// writes its own nftables rule (table "conformance_mark", prerouting at
// mangle priority: ip daddr ADDR meta mark set 0x2a). One service then
// takes every marked packet whatever its port — requests to ADDR:80 and
// ADDR:443 both reach every backend on HTTPPort (nat-nosnat: the backends
// see the client) — and conntrack lists the flows, the backend as the reply
// source, with edgelb's ct mark where the dataplane marks its connections.
func (s *suite) fwmark(t *testing.T) {
	addr := s.vip4()
	if err := s.topo.Gateway.AddAddr("lo", netip.PrefixFrom(addr, 32)); err != nil {
		t.Fatal(err)
	}
	if err := s.markRule(addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.dropMarkRule(); err != nil {
			t.Errorf("remove the marking rule: %v", err)
		}
	})
	svc := proxy.Service{Name: "conformance/fwmark", FWMark: fwmarkMark, Family: proxy.IPv4,
		Scheduler: proxy.DefaultScheduler, Method: proxy.NATNoSNAT}
	for i := range s.topo.Backends {
		svc.Backends = append(svc.Backends, proxy.Backend{Addr: s.topo.Backend4(i, HTTPPort), Weight: 1})
	}
	s.apply(t, svc)
	for _, port := range []uint16{80, 443} {
		front := netip.AddrPortFrom(addr, port)
		// 120 requests: a backend below 10% happens by chance 1.6e-9 of the time.
		tally, err := s.httpFan(120, netip.Addr{}, front, noSNATChecker)
		s.everyBackend(t, fmt.Sprintf("fwmark %#x via %s", fwmarkMark, front), tally, err, 0.10)
		flows, err := s.topo.Conntrack(front)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[netip.Addr]bool{}
		for _, f := range flows {
			seen[f.Backend.Addr()] = true
			if f.Backend.Port() != HTTPPort {
				t.Errorf("conntrack entry %s -> %s went to %s, want a backend on port %d", f.Client, front, f.Backend, HTTPPort)
			}
			// edgelb's ct mark is what puts a connection in its flow list
			// (proxy/conntrack): a marked service's flows must carry it too.
			if s.h.Caps.CTMark && !marked(f.Mark) {
				t.Errorf("conntrack entry %s -> %s has mark %#x, want %#x under %#x", f.Client, front, f.Mark, proxy.CTMark, proxy.CTMarkMask)
			}
		}
		t.Logf("conntrack: %d entries for %s, %d backends", len(flows), front, len(seen))
		if len(seen) != len(s.topo.Backends) {
			t.Errorf("conntrack shows %d backends for %s, want %d", len(seen), front, len(s.topo.Backends))
		}
	}
	// Unmarked traffic is not the service's: another address on lo, no rule.
	other := s.vip4()
	if err := s.topo.Gateway.AddAddr("lo", netip.PrefixFrom(other, 32)); err != nil {
		t.Fatal(err)
	}
	s.expectGone(t, netip.AddrPortFrom(other, 80))
}

const markTable = "conformance_mark"

// markRule writes the operator's rule: ip daddr addr meta mark set fwmarkMark,
// in prerouting before IPVS (mangle priority), over netlink (no nft binary
// in the guest).
func (s *suite) markRule(addr netip.Addr) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(s.topo.Gateway.Handle())))
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	tbl := c.AddTable(&nftables.Table{Name: markTable, Family: nftables.TableFamilyIPv4})
	ch := c.AddChain(&nftables.Chain{Name: "prerouting", Table: tbl, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityMangle})
	a4 := addr.As4()
	c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a4[:]},
		&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(fwmarkMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}})
	return c.Flush()
}

func (s *suite) dropMarkRule() error {
	c, err := nftables.New(nftables.WithNetNSFd(int(s.topo.Gateway.Handle())))
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	c.DelTable(&nftables.Table{Name: markTable, Family: nftables.TableFamilyIPv4})
	return c.Flush()
}
