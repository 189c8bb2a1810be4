package ipvs

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

var (
	vip1  = netip.MustParseAddr("203.0.113.10")
	vip2  = netip.MustParseAddr("203.0.113.11")
	node1 = netip.MustParseAddr("192.0.2.1")
	node6 = netip.MustParseAddr("2001:db8::1")
	be1   = netip.MustParseAddrPort("198.51.100.2:8080")
	be2   = netip.MustParseAddrPort("198.51.100.3:8080")
	be3   = netip.MustParseAddrPort("198.51.100.4:8080")
)

type rig struct {
	h    *fakeIPVS
	dev  *fakeDevice
	snat *fakeSNAT
	now  time.Time
	eng  *engine
}

func newRig(t *testing.T) *rig {
	r := &rig{h: newFakeIPVS(), dev: &fakeDevice{}, snat: &fakeSNAT{}, now: time.Unix(1_700_000_000, 0)}
	r.eng = newEngine(r.h, r.dev, r.snat, func() time.Time { return r.now }, time.Minute, t.Logf)
	return r
}

func (r *rig) apply(t *testing.T, cfg proxy.Config) {
	t.Helper()
	d, err := build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.eng.apply(context.Background(), d, readChanged); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) resync(t *testing.T) {
	t.Helper()
	if err := r.eng.resync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func web(backends ...proxy.Backend) proxy.Service {
	return proxy.Service{Name: "web/http", VIP: vip1, Port: 80, Protocol: proxy.TCP, Scheduler: proxy.WeightedRoundRobin, Backends: backends}
}

func b(a netip.AddrPort, w uint32) proxy.Backend { return proxy.Backend{Addr: a, Weight: w} }

func key(a netip.Addr, port uint16) vsKey { return vsKey{Addr: a, Port: port, Proto: proxy.TCP} }

func TestApplyCreatesThenIsIdempotent(t *testing.T) {
	r := newRig(t)
	cfg := proxy.Config{Services: []proxy.Service{web(b(be1, 3), b(be2, 1))}}
	r.apply(t, cfg)
	k := key(vip1, 80)
	if s, ok := r.h.svcs[k]; !ok || s.Sched != "wrr" {
		t.Fatalf("service not created: %+v", r.h.svcs)
	}
	if d := r.h.dests[k]; len(d) != 2 || d[be1].Weight != 3 || d[be2].Weight != 1 || d[be1].Fwd != fwdMasq {
		t.Fatalf("dests %+v", d)
	}
	if !r.dev.addrs[vip1] {
		t.Fatal("VIP not bound on the device")
	}
	if !r.snat.front[k] || !r.snat.masq[k] {
		t.Fatalf("snat sets %v %v", r.snat.front, r.snat.masq)
	}
	r.h.resetCalls()
	r.apply(t, cfg)
	if w := r.h.writes(); w != 0 {
		t.Fatalf("second Apply wrote %d times: %v", w, r.h.calls)
	}
	if r.h.calls["Dests"] != 0 {
		t.Fatalf("unchanged service had its destinations read: %v", r.h.calls)
	}
}

func TestApplyChangesOnlyWhatDiffers(t *testing.T) {
	r := newRig(t)
	other := proxy.Service{Name: "other", VIP: vip2, Port: 443, Protocol: proxy.TCP, Backends: []proxy.Backend{b(be3, 1)}}
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1), b(be2, 1)), other}})
	r.h.resetCalls()
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 5), b(be2, 1)), other}})
	if r.h.calls["UpdateDest"] != 1 || r.h.writes() != 1 || r.h.calls["Dests"] != 1 {
		t.Fatalf("weight change: calls %v", r.h.calls)
	}
	if r.h.dests[key(vip1, 80)][be1].Weight != 5 {
		t.Fatal("weight not updated")
	}
	// Scheduler and affinity change: one UpdateService, no destination writes.
	s := web(b(be1, 5), b(be2, 1))
	s.Scheduler, s.Affinity = proxy.SourceHash, 90*time.Second+time.Millisecond
	r.h.resetCalls()
	r.apply(t, proxy.Config{Services: []proxy.Service{s, other}})
	got := r.h.svcs[key(vip1, 80)]
	if r.h.calls["UpdateService"] != 1 || r.h.writes() != 1 || got.Sched != "sh" || got.Flags&flagPersistent == 0 || got.Timeout != 91 {
		t.Fatalf("calls %v service %+v", r.h.calls, got)
	}
	// Deleting a service deletes it and its VIP; the other stays untouched.
	r.h.resetCalls()
	r.apply(t, proxy.Config{Services: []proxy.Service{other}})
	if _, ok := r.h.svcs[key(vip1, 80)]; ok || r.h.calls["DelService"] != 1 || r.h.writes() != 1 {
		t.Fatalf("delete: calls %v", r.h.calls)
	}
	if r.dev.addrs[vip1] || !r.dev.addrs[vip2] {
		t.Fatalf("device addrs %v", r.dev.addrs)
	}
}

func TestOwnershipLeavesForeignServices(t *testing.T) {
	r := newRig(t)
	foreign := virtualServer{Key: key(netip.MustParseAddr("192.0.2.200"), 80), Sched: "rr"}
	r.h.AddService(foreign)
	r.h.AddDest(foreign.Key, realServer{Addr: be3, Weight: 1})
	// A service on node1 that someone else made, on a port edgelb never used.
	foreignNode := virtualServer{Key: key(node1, 9999), Sched: "rr"}
	r.h.AddService(foreignNode)
	r.apply(t, proxy.Config{NodeAddrs: []netip.Addr{node1},
		Services: []proxy.Service{{Name: "np", NodePort: 30080, Protocol: proxy.TCP, Backends: []proxy.Backend{b(be1, 1)}}}})
	if _, ok := r.h.svcs[key(node1, 30080)]; !ok {
		t.Fatal("node-port service not created")
	}
	r.apply(t, proxy.Config{NodeAddrs: []netip.Addr{node1}})
	if _, ok := r.h.svcs[key(node1, 30080)]; ok {
		t.Fatal("node-port service edgelb made was not deleted")
	}
	for _, k := range []vsKey{foreign.Key, foreignNode.Key} {
		if _, ok := r.h.svcs[k]; !ok {
			t.Fatalf("foreign service %s was deleted", k)
		}
	}
	if len(r.h.dests[foreign.Key]) != 1 {
		t.Fatal("foreign destinations touched")
	}
	// A service on an address bound on edgelb0 is edgelb's even if this
	// process did not create it (left over from an earlier run).
	r.dev.addrs[vip2] = true
	stale := virtualServer{Key: key(vip2, 8443), Sched: "rr"}
	r.h.AddService(stale)
	r.apply(t, proxy.Config{})
	if _, ok := r.h.svcs[stale.Key]; ok {
		t.Fatal("stale service on edgelb0's address survived")
	}
	if r.dev.addrs[vip2] {
		t.Fatal("stale VIP survived on the device")
	}
	if err := r.eng.cleanup(); err != nil {
		t.Fatal(err)
	}
	if len(r.h.svcs) != 2 {
		t.Fatalf("cleanup touched foreign services: %v", r.h.svcs)
	}
}

func TestNodePortOnEveryNodeAddrOfTheFamily(t *testing.T) {
	r := newRig(t)
	s := web(b(be1, 1))
	s.NodePort = 30080
	r.apply(t, proxy.Config{NodeAddrs: []netip.Addr{node1, node6}, Services: []proxy.Service{s}})
	for _, k := range []vsKey{key(vip1, 80), key(node1, 30080)} {
		if _, ok := r.h.svcs[k]; !ok {
			t.Fatalf("missing %s: %v", k, r.h.svcs)
		}
	}
	if _, ok := r.h.svcs[key(node6, 30080)]; ok || len(r.h.svcs) != 2 {
		t.Fatalf("node port on the wrong family: %v", r.h.svcs)
	}
	if r.dev.addrs[node1] {
		t.Fatal("node address bound on edgelb0")
	}
}

func TestDrainWaitsForConnectionsThenDeletes(t *testing.T) {
	r := newRig(t)
	k := key(vip1, 80)
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1), b(be2, 1))}})
	r.h.setConns(k, be2, 1, 0)
	// Removed while it has a connection: weight 0, still there.
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1))}})
	if d, ok := r.h.dests[k][be2]; !ok || d.Weight != 0 {
		t.Fatalf("draining backend: %+v %v", d, ok)
	}
	if r.eng.stats.DestsDraining != 1 {
		t.Fatalf("stats %+v", r.eng.stats)
	}
	// The connection ends: the next resync deletes it.
	r.h.setConns(k, be2, 0, 0)
	r.resync(t)
	if _, ok := r.h.dests[k][be2]; ok {
		t.Fatal("drained backend not deleted")
	}
	if len(r.eng.drains) != 0 {
		t.Fatalf("drains left: %v", r.eng.drains)
	}
}

func TestDrainTimeoutAndDrainingFlag(t *testing.T) {
	r := newRig(t)
	k := key(vip1, 80)
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1), b(be2, 1))}})
	r.h.setConns(k, be2, 2, 3)
	drained := web(b(be1, 1), proxy.Backend{Addr: be2, Weight: 1, Draining: true})
	r.apply(t, proxy.Config{Services: []proxy.Service{drained}})
	if r.h.dests[k][be2].Weight != 0 {
		t.Fatal("Draining backend kept its weight")
	}
	r.now = r.now.Add(59 * time.Second)
	r.apply(t, proxy.Config{Services: []proxy.Service{drained}})
	if _, ok := r.h.dests[k][be2]; !ok {
		t.Fatal("deleted before the timeout")
	}
	r.now = r.now.Add(time.Second)
	r.apply(t, proxy.Config{Services: []proxy.Service{drained}})
	if _, ok := r.h.dests[k][be2]; ok {
		t.Fatal("not deleted after the drain timeout")
	}
	// Back in the config while draining: it gets its weight back.
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1), b(be2, 1))}})
	r.h.setConns(k, be2, 1, 0)
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1))}})
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1), b(be2, 4))}})
	if d := r.h.dests[k][be2]; d.Weight != 4 || len(r.eng.drains) != 0 {
		t.Fatalf("undrained backend %+v drains %v", d, r.eng.drains)
	}
}

func TestUDPBackendsGoAtOnce(t *testing.T) {
	r := newRig(t)
	s := proxy.Service{Name: "dns", VIP: vip1, Port: 53, Protocol: proxy.UDP, Backends: []proxy.Backend{b(be1, 1), b(be2, 1)}}
	r.apply(t, proxy.Config{Services: []proxy.Service{s}})
	k := vsKey{Addr: vip1, Port: 53, Proto: proxy.UDP}
	r.h.setConns(k, be2, 0, 7)
	s.Backends = s.Backends[:1]
	r.apply(t, proxy.Config{Services: []proxy.Service{s}})
	if _, ok := r.h.dests[k][be2]; ok {
		t.Fatal("UDP backend left draining")
	}
	if r.snat.masq[k] != true {
		t.Fatal("UDP NAT frontend not masqueraded")
	}
}

func TestResyncRepairsDrift(t *testing.T) {
	r := newRig(t)
	k := key(vip1, 80)
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1), b(be2, 1))}})
	// Someone deletes a real server, changes a weight and the scheduler, and removes the VIP.
	r.h.DelDest(k, realServer{Addr: be1})
	r.h.UpdateDest(k, realServer{Addr: be2, Weight: 9})
	s := r.h.svcs[k]
	s.Sched = "rr"
	r.h.svcs[k] = s
	delete(r.dev.addrs, vip1)
	r.snat.foreign = true // and commits to nftables (the ruleset generation moves)
	r.h.resetCalls()
	r.resync(t)
	d := r.h.dests[k]
	if len(d) != 2 || d[be1].Weight != 1 || d[be2].Weight != 1 || r.h.svcs[k].Sched != "wrr" || !r.dev.addrs[vip1] {
		t.Fatalf("not repaired: dests %v svc %+v addrs %v", d, r.h.svcs[k], r.dev.addrs)
	}
	if r.snat.fulls < 2 {
		t.Fatalf("resync did not rebuild the nftables table (%d full builds)", r.snat.fulls)
	}
	// A deleted service is repaired by Apply too (the service list is always read).
	r.h.DelService(k)
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1), b(be2, 1))}})
	if len(r.h.dests[k]) != 2 {
		t.Fatal("deleted service not recreated by Apply")
	}
}

func TestBuildRefusesWhatIPVSCannotDo(t *testing.T) {
	dr := proxy.Service{Name: "dr", VIP: vip1, Port: 80, Protocol: proxy.TCP, Method: proxy.DirectRouting,
		Backends: []proxy.Backend{b(be1, 1)}}
	_, err := build(proxy.Config{Services: []proxy.Service{dr}})
	if !errors.Is(err, proxy.ErrUnsupported) || !strings.Contains(err.Error(), "cannot map port 80") {
		t.Fatalf("DR with port mapping: %v", err)
	}
	dr.Backends = []proxy.Backend{b(netip.MustParseAddrPort("198.51.100.2:80"), 1)}
	d, err := build(proxy.Config{Services: []proxy.Service{dr}})
	if err != nil || d.Services[key(vip1, 80)].Dests[0].Fwd != fwdDR || d.Masq[key(vip1, 80)] {
		t.Fatalf("DR without mapping: %v", err)
	}
	tun := dr
	tun.Method = proxy.Tunnel
	if d, err := build(proxy.Config{Services: []proxy.Service{tun}}); err != nil || d.Services[key(vip1, 80)].Dests[0].Fwd != fwdTunnel {
		t.Fatalf("tunnel: %v", err)
	}
	nosnat := web(b(be1, 1))
	nosnat.Method = proxy.NATNoSNAT
	if d, err := build(proxy.Config{Services: []proxy.Service{nosnat}}); err != nil || d.Masq[key(vip1, 80)] || !d.Front[key(vip1, 80)] {
		t.Fatalf("nat-nosnat: %v %+v", err, d)
	}
	for name, s := range map[string]proxy.Service{
		"unknown scheduler": {Name: "x", VIP: vip1, Port: 80, Protocol: proxy.TCP, Scheduler: "fair"},
		"mixed family":      {Name: "x", VIP: vip1, Port: 80, Protocol: proxy.TCP, Backends: []proxy.Backend{b(netip.MustParseAddrPort("[2001:db8::2]:80"), 1)}},
		"no frontend":       {Name: "x", Protocol: proxy.TCP},
		"bad protocol":      {Name: "x", VIP: vip1, Port: 80, Protocol: 1},
	} {
		if _, err := build(proxy.Config{Services: []proxy.Service{s}}); err == nil || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := build(proxy.Config{Services: []proxy.Service{web(), web()}}); err == nil || !strings.Contains(err.Error(), "also used") {
		t.Errorf("duplicate frontend: %v", err)
	}
	for _, s := range proxy.Schedulers {
		x := web(b(be1, 1))
		x.Scheduler = s
		if d, err := build(proxy.Config{Services: []proxy.Service{x}}); err != nil || d.Services[key(vip1, 80)].VS.Sched != string(s) {
			t.Errorf("scheduler %s: %v", s, err)
		}
	}
}

func TestGuardedTimeoutAndPanic(t *testing.T) {
	release := make(chan struct{})
	err := guarded("list", 20*time.Millisecond, func() error { <-release; return errors.New("socket closed") }, func() { close(release) })
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("hang: %v", err)
	}
	// The calls that must not time out get 30 s: 1 s was short enough for a
	// starved goroutine to miss it.
	err = guarded("get config", 30*time.Second, func() error { var a []int; _ = a[len(a)+3]; return nil }, func() {})
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("panic: %v", err)
	}
	if err := guarded("ok", 30*time.Second, func() error { return nil }, func() { t.Error("aborted") }); err != nil {
		t.Fatal(err)
	}
}

// TestBuildRefusesPerService (issue 14): one bad service (two frontends on
// one key, a backend of the other family) is left out and named; the others
// are built; a refused service keeps its last good frontends.
func TestBuildRefusesPerService(t *testing.T) {
	good := web()
	good.Name = "good"
	other := web()
	other.Name, other.Port = "other", 81
	last, err := build(proxy.Config{Services: []proxy.Service{good, other}})
	if err != nil {
		t.Fatal(err)
	}
	bad := other
	bad.Backends = append(slices.Clone(bad.Backends), proxy.Backend{Addr: netip.MustParseAddrPort("[2001:db8::9]:80"), Weight: 1})
	d, failed, err := buildEach(proxy.Config{Services: []proxy.Service{good, bad}})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || !errors.Is(failed[bad.Key()], proxy.ErrUnsupported) {
		t.Fatalf("failed %v, want only %s (family)", failed, bad.Key())
	}
	if d.Services[key(vip1, 80)] == nil || d.Services[key(vip1, 81)] != nil {
		t.Fatalf("built %v, want only the good service", d.Services)
	}
	d.keep(last, serviceName(&bad))
	if ws := d.Services[key(vip1, 81)]; ws == nil || ws != last.Services[key(vip1, 81)] {
		t.Errorf("the refused service did not keep its last good state")
	}
	if _, err := build(proxy.Config{Services: []proxy.Service{good, bad}}); !proxy.Partial(err) {
		t.Errorf("build: %v, want a *proxy.ServiceErrors", err)
	}
}

// TestFWMarkServices: a firewall-mark service is programmed per mark and
// family with its destinations (port 0 kept: the packet's own port), gets
// no VIP and is not masqueraded, is in the nftables frontends by its mark
// (its connections get edgelb's ct mark: snat.go), is deleted when the
// Config drops it,
// and a firewall-mark service edgelb did not make (another mark, say
// keepalived's) is never touched, by Apply or Cleanup.
func TestFWMarkServices(t *testing.T) {
	r := newRig(t)
	foreign := virtualServer{Key: markKey(7, proxy.IPv4), Sched: "rr"}
	r.h.AddService(foreign)
	r.h.AddDest(foreign.Key, realServer{Addr: be3, Weight: 1})
	anyPort := netip.AddrPortFrom(be1.Addr(), 0)
	fw := proxy.Service{Name: "marked/fwmark", FWMark: 1, Family: proxy.IPv4, Scheduler: proxy.RoundRobin,
		Method: proxy.NATNoSNAT, Affinity: 50 * time.Second, Backends: []proxy.Backend{b(anyPort, 1), b(be2, 2)}}
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1)), fw}})
	k := markKey(1, proxy.IPv4)
	got, ok := r.h.svcs[k]
	if !ok || got.Sched != "rr" || got.Flags&flagPersistent == 0 || got.Timeout != 50 {
		t.Fatalf("fwmark service %s: %+v (present %v)", k, got, ok)
	}
	if len(r.h.dests[k]) != 2 || r.h.dests[k][anyPort].Weight != 1 || r.h.dests[k][be2].Weight != 2 {
		t.Fatalf("fwmark destinations %v", r.h.dests[k])
	}
	if r.dev.addrs[netip.IPv4Unspecified()] || !r.snat.front[k] || r.snat.masq[k] {
		t.Fatalf("fwmark service: want no VIP, a marked frontend and no masquerade: addrs %v front %v masq %v", r.dev.addrs, r.snat.front, r.snat.masq)
	}
	r.apply(t, proxy.Config{Services: []proxy.Service{web(b(be1, 1))}})
	if _, ok := r.h.svcs[k]; ok {
		t.Fatal("fwmark service edgelb made was not deleted")
	}
	if err := r.eng.cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.h.svcs[foreign.Key]; !ok || len(r.h.dests[foreign.Key]) != 1 {
		t.Fatalf("foreign fwmark service touched: %v", r.h.svcs)
	}
	// nat would set the masquerade mark bit on a packet IPVS matches by mark.
	fw.Method = proxy.NAT
	if _, err := build(proxy.Config{Services: []proxy.Service{fw}}); !errors.Is(err, proxy.ErrUnsupported) {
		t.Fatalf("fwmark with method nat: %v, want ErrUnsupported", err)
	}
}

// build validates cfg and translates it. Errors name the service and quote
// the bad value; ones the kernel cannot express wrap proxy.ErrUnsupported.
func build(cfg proxy.Config) (*desired, error) {
	d, failed, err := buildEach(cfg)
	if err == nil && len(failed) > 0 {
		return nil, &proxy.ServiceErrors{Failed: failed}
	}
	return d, err
}
