// Package conformance is the one behaviour suite every proxy.Dataplane must
// pass, with real traffic through a lab of network namespaces: the nftables
// dataplane runs it on this kernel, the IPVS one inside a guest kernel. The
// scenarios and assertions are the same; what a dataplane cannot do is
// declared in its Caps (and must then be refused with proxy.ErrUnsupported).
//
// It needs root (namespaces) but no host tools: traffic comes from Go
// clients inside the client namespace and conntrack is read over netlink, so
// it runs from a static test binary in a busybox guest.
package conformance

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

// Caps is what a dataplane can do.
type Caps struct {
	// Schedulers it accepts; every other proxy.Schedulers entry must be
	// refused with proxy.ErrUnsupported.
	Schedulers []proxy.Scheduler
	// Methods it accepts; the others must be refused with proxy.ErrUnsupported.
	// Only NAT and NATNoSNAT are exercised with traffic here (DR and tunnel
	// need backend set-up that is tested elsewhere).
	Methods []proxy.Method
	// DeterministicWeights: wrr rotates in a fixed order (IPVS), so 400
	// requests show a 3:1 split to within WeightTolerance. Otherwise the
	// choice is weighted random (nftables) and the suite sends
	// WeightedRandomRequests.
	DeterministicWeights bool
	// IPv6 frontends and backends.
	IPv6 bool
	// CTMark: connections it balances carry proxy.CTMark in conntrack.
	CTMark bool
	// FWMark: it programs firewall-mark services (proxy.Service.FWMark);
	// without, they must be refused with proxy.ErrUnsupported.
	FWMark bool
}

// WeightedRandomRequests is the sample for a 3:1 split under a weighted
// random choice, and WeightTolerance how far the ratio may stray from 3: the
// heavy share 0.75 must land in [0.706, 0.783]. Its count is Binomial(4800,
// 0.75); the exact tails outside [3389, 3756] sum to 6e-8, so a correct
// dataplane fails this by chance less than once in ten million runs. (±15%,
// used before, fails by chance 2e-5 of the time: four deviations are not
// enough for a suite run thousands of times.)
const (
	WeightedRandomRequests = 4800
	WeightTolerance        = 0.20
)

// Harness plugs one dataplane into the suite.
type Harness struct {
	// New builds the dataplane that programs topo.Gateway (e.g. opening its
	// netlink sockets inside that namespace), setting its sysctls there. The
	// suite calls Cleanup and Close at the end.
	New func(t testing.TB, topo *Topology) proxy.Dataplane
	// Tamper damages svc in the gateway's kernel by hand — over netlink, not
	// through the dataplane — as an operator or another program might
	// (nftables: delete the service's map element; IPVS: delete a real
	// server). Traffic to svc must visibly suffer, and Resync must repair it.
	Tamper func(t testing.TB, topo *Topology, svc proxy.Service)
	Caps   Caps
	// Timeout bounds each request (default 3s; raise it in an emulated guest).
	Timeout time.Duration
	// Workers is the number of concurrent requests (default 8).
	Workers int
	// Prefix keeps namespace names apart (default "cf").
	Prefix string
}

type suite struct {
	h    Harness
	topo *Topology
	dp   proxy.Dataplane
	ctx  context.Context
	// next hands out a fresh VIP per scenario so conntrack entries of one
	// scenario never meet the next one.
	next int
}

// Run builds the lab, the dataplane, and runs every scenario as a subtest.
func Run(t *testing.T, h Harness) {
	if h.Timeout == 0 {
		h.Timeout = 3 * time.Second
	}
	if h.Workers == 0 {
		h.Workers = 8
	}
	if h.Prefix == "" {
		h.Prefix = "cf"
	}
	topo := NewTopology(t, h.Prefix)
	dp := h.New(t, topo)
	t.Cleanup(func() {
		if err := dp.Cleanup(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := dp.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	s := &suite{h: h, topo: topo, dp: dp, ctx: context.Background()}
	t.Logf("dataplane %s in %s; caps %+v", dp.Name(), topo.Gateway.Name, h.Caps)

	t.Run("VIP", s.vip)
	t.Run("NodePort", s.nodePort)
	t.Run("UDP", s.udp)
	if h.Caps.IPv6 {
		t.Run("IPv6", s.ipv6)
	}
	t.Run("WeightedSplit", s.weighted)
	t.Run("Affinity", s.affinity)
	if s.supports(proxy.SourceHash) {
		t.Run("SourceHash", s.sourceHash)
	}
	if s.supports(proxy.MaglevHash) {
		t.Run("MaglevHash", s.maglevHash)
	}
	t.Run("DrainWeightZero", func(t *testing.T) { s.drain(t, false) })
	t.Run("DrainFlag", func(t *testing.T) { s.drain(t, true) })
	if slices.Contains(h.Caps.Methods, proxy.NATNoSNAT) {
		t.Run("NATNoSNAT", s.noSNAT)
	}
	if h.Caps.FWMark {
		t.Run("FWMark", s.fwmark)
	}
	t.Run("OutOfWindow", s.outOfWindow)
	t.Run("Idempotent", s.idempotent)
	t.Run("Delete", s.delete)
	t.Run("Resync", s.resync)
	t.Run("Unsupported", s.unsupported)
	t.Run("Cleanup", s.cleanup)
}

func (s *suite) supports(sc proxy.Scheduler) bool { return slices.Contains(s.h.Caps.Schedulers, sc) }

// vip4 returns a fresh IPv4 VIP (203.0.113.10, .11, ...).
func (s *suite) vip4() netip.Addr {
	s.next++
	return netip.AddrFrom4([4]byte{203, 0, 113, byte(9 + s.next)})
}

func (s *suite) vip6() netip.Addr {
	s.next++
	return netip.MustParseAddr(fmt.Sprintf("2001:db8:ff::%x", 9+s.next))
}

// web is a service on vip:port forwarding to every backend's port with
// weight 1.
func (s *suite) web(vip netip.Addr, port uint16, proto proxy.Protocol, beport uint16) proxy.Service {
	svc := proxy.Service{Name: "conformance/" + vip.String(), VIP: vip, Port: port, Protocol: proto,
		Scheduler: proxy.DefaultScheduler, Method: proxy.NAT}
	for i := range s.topo.Backends {
		ap := s.topo.Backend4(i, beport)
		if vip.Is6() {
			ap = s.topo.Backend6(i, beport)
		}
		svc.Backends = append(svc.Backends, proxy.Backend{Addr: ap, Weight: 1})
	}
	return svc
}

func (s *suite) apply(t *testing.T, svcs ...proxy.Service) {
	t.Helper()
	cfg := proxy.Config{Services: svcs, NodeAddrs: []netip.Addr{GatewayAddr4, GatewayAddr6}}
	if err := s.dp.Apply(s.ctx, cfg); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

func (s *suite) httpFan(n int, src netip.Addr, dst netip.AddrPort, check func(Reply) error) (Tally, error) {
	return Fan(n, s.h.Workers, func() (Reply, error) {
		return s.topo.GetHTTP(s.ctx, src, dst, s.h.Timeout)
	}, check)
}

// everyBackend asserts that all requests succeeded and each backend took at
// least minShare of them.
func (s *suite) everyBackend(t *testing.T, what string, tally Tally, err error, minShare float64) {
	t.Helper()
	t.Logf("%s: %s", what, tally)
	if err != nil {
		t.Fatalf("%s: %d of %d requests failed; first: %v", what, tally[""], tally.Total(), err)
	}
	for _, b := range s.topo.Backends {
		share := float64(tally[b.Name]) / float64(tally.Total())
		if share < minShare {
			t.Errorf("%s: %s took %.1f%% of requests, want ≥ %.0f%% (%s)", what, b.Name, 100*share, 100*minShare, tally)
		}
	}
}

// noSNATChecker asserts the backend saw the client's own address.
func noSNATChecker(r Reply) error {
	if r.Peer != ClientAddr4 {
		return fmt.Errorf("%s saw source %s, want the client's %s (no SNAT)", r.Backend, r.Peer, ClientAddr4)
	}
	return nil
}

// snatChecker asserts the backend saw the gateway's address on its link.
func (s *suite) snatChecker(v6 bool) func(Reply) error {
	return func(r Reply) error {
		b := s.topo.backendByName(r.Backend)
		if b == nil {
			return fmt.Errorf("reply from unknown backend %q", r.Backend)
		}
		want := b.GatewayAddr4
		if v6 {
			want = b.GatewayAddr6
		}
		if r.Peer != want {
			return fmt.Errorf("%s saw source %s, want the gateway's %s (SNAT)", r.Backend, r.Peer, want)
		}
		return nil
	}
}

// vip: 300 requests to VIP:80 reach all three backends (each ≥ 20%),
// replies come back via SNAT, and conntrack lists the flows.
func (s *suite) vip(t *testing.T) {
	vip := s.vip4()
	svc := s.web(vip, 80, proxy.TCP, HTTPPort)
	s.apply(t, svc)
	front := netip.AddrPortFrom(vip, 80)
	tally, err := s.httpFan(300, netip.Addr{}, front, s.snatChecker(false))
	s.everyBackend(t, "VIP "+front.String(), tally, err, 0.20)

	flows, err := s.topo.Conntrack(front)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("conntrack: %d entries for %s", len(flows), front)
	if len(flows) == 0 {
		t.Fatalf("conntrack lists no flow to %s", front)
	}
	seen := map[netip.Addr]bool{}
	for i, f := range flows {
		if i < 3 {
			t.Logf("  proto=%d %s -> %s => backend %s reply-to %s mark=%#x", f.Proto, f.Client, f.Frontend, f.Backend, f.ReplyDst, f.Mark)
		}
		seen[f.Backend.Addr()] = true
		if s.h.Caps.CTMark && !marked(f.Mark) {
			t.Errorf("conntrack entry %s -> %s has mark %#x, want %#x under %#x", f.Client, f.Frontend, f.Mark, proxy.CTMark, proxy.CTMarkMask)
		}
		if f.ReplyDst.Addr() == f.Client.Addr() {
			t.Errorf("conntrack entry %s -> %s was not masqueraded (reply goes to %s)", f.Client, f.Backend, f.ReplyDst)
		}
	}
	if len(seen) != len(s.topo.Backends) {
		t.Errorf("conntrack shows %d backends, want %d", len(seen), len(s.topo.Backends))
	}
}

// nodePort: the same through a node port on the gateway's own address.
func (s *suite) nodePort(t *testing.T) {
	svc := s.web(netip.Addr{}, 0, proxy.TCP, HTTPPort)
	svc.Name = "conformance/nodeport"
	svc.NodePort = 30080
	s.apply(t, svc)
	front := netip.AddrPortFrom(GatewayAddr4, 30080)
	tally, err := s.httpFan(300, netip.Addr{}, front, s.snatChecker(false))
	s.everyBackend(t, "NodePort "+front.String(), tally, err, 0.20)
	flows, err := s.topo.Conntrack(front)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("conntrack: %d entries for %s", len(flows), front)
	if len(flows) == 0 {
		t.Fatalf("conntrack lists no flow to %s", front)
	}
}

// udp: datagrams from fresh sockets to VIP:53/udp reach every backend.
func (s *suite) udp(t *testing.T) {
	vip := s.vip4()
	svc := s.web(vip, 53, proxy.UDP, UDPPort)
	s.apply(t, svc)
	front := netip.AddrPortFrom(vip, 53)
	tally, err := Fan(150, s.h.Workers, func() (Reply, error) {
		return s.topo.EchoUDP(s.ctx, front, s.h.Timeout)
	}, s.snatChecker(false))
	s.everyBackend(t, "UDP "+front.String(), tally, err, 0.15)
}

// ipv6: an IPv6 VIP and an IPv6 node port reach every backend via SNAT.
func (s *suite) ipv6(t *testing.T) {
	vip := s.vip6()
	svc := s.web(vip, 80, proxy.TCP, HTTPPort)
	svc.NodePort = 30081
	s.apply(t, svc)
	for _, front := range []netip.AddrPort{netip.AddrPortFrom(vip, 80), netip.AddrPortFrom(GatewayAddr6, 30081)} {
		tally, err := s.httpFan(150, netip.Addr{}, front, s.snatChecker(true))
		s.everyBackend(t, "IPv6 "+front.String(), tally, err, 0.15)
	}
	flows, err := s.topo.Conntrack(netip.AddrPortFrom(vip, 80))
	if err != nil {
		t.Fatal(err)
	}
	if len(flows) == 0 {
		t.Fatalf("conntrack lists no flow to [%s]:80", vip)
	}
	if s.h.Caps.CTMark && !marked(flows[0].Mark) {
		t.Errorf("IPv6 conntrack entry has mark %#x, want %#x", flows[0].Mark, proxy.CTMark)
	}
}

// weighted: wrr with weights 3:1 splits 3:1 within ±15%.
func (s *suite) weighted(t *testing.T) {
	vip := s.vip4()
	svc := s.web(vip, 80, proxy.TCP, HTTPPort)
	svc.Scheduler = proxy.WeightedRoundRobin
	svc.Backends = []proxy.Backend{{Addr: s.topo.Backend4(0, HTTPPort), Weight: 3}, {Addr: s.topo.Backend4(1, HTTPPort), Weight: 1}}
	s.apply(t, svc)
	n := 400
	if !s.h.Caps.DeterministicWeights {
		n = WeightedRandomRequests
	}
	tally, err := s.httpFan(n, netip.Addr{}, netip.AddrPortFrom(vip, 80), nil)
	t.Logf("wrr 3:1 over %d requests: %s", n, tally)
	if err != nil {
		t.Fatalf("%d requests failed; first: %v", tally[""], err)
	}
	heavy, light := tally["be1"], tally["be2"]
	if tally["be3"] != 0 {
		t.Errorf("be3 is no backend of this service but took %d requests", tally["be3"])
	}
	if light == 0 {
		t.Fatalf("weight-1 backend got nothing: %s", tally)
	}
	ratio := float64(heavy) / float64(light)
	t.Logf("ratio %.3f (want 3 ±%.0f%%: %.2f–%.2f)", ratio, 100*WeightTolerance, 3*(1-WeightTolerance), 3*(1+WeightTolerance))
	if math.Abs(ratio-3)/3 > WeightTolerance {
		t.Errorf("split %d:%d = %.3f, want 3 ±%.0f%%", heavy, light, ratio, 100*WeightTolerance)
	}
}

// stickyRequests is how many requests each client source sends.
const stickyRequests = 8

// sticky sends per client source several requests and asserts each source
// stays on one backend, while the sources together use more than one.
//
// Each client's first request goes alone (all clients at once, one request
// each), the rest follow in parallel: affinity is remembered by the first
// connection, and two first connections of one client racing each other
// may both be scheduled before either is remembered (IPVS creates its
// persistence template without a lock; nftables writes @aff only after the
// NAT) — a race no real client distinguishes from a fresh client, which
// the suite does not test.
func (s *suite) sticky(t *testing.T, front netip.AddrPort) {
	t.Helper()
	srcs := s.topo.ClientSources
	var (
		mu  sync.Mutex
		per = make([]Tally, len(srcs))
		i   atomic.Int64
	)
	// round sends n requests per source, sources interleaved.
	round := func(n int) error {
		i.Store(0)
		_, err := Fan(n*len(srcs), s.h.Workers, func() (Reply, error) {
			k := int(i.Add(1)-1) % len(srcs)
			r, err := s.topo.GetHTTP(s.ctx, srcs[k], front, s.h.Timeout)
			if err != nil {
				return r, fmt.Errorf("from %s: %w", srcs[k], err)
			}
			mu.Lock()
			if per[k] == nil {
				per[k] = Tally{}
			}
			per[k][r.Backend]++
			mu.Unlock()
			return r, nil
		}, nil)
		return err
	}
	if err := round(1); err != nil {
		t.Fatalf("first requests: %v", err)
	}
	if err := round(stickyRequests - 1); err != nil {
		t.Fatalf("%v", err)
	}
	used := map[string]int{}
	for k, src := range srcs {
		if len(per[k]) != 1 {
			t.Errorf("client %s was spread over backends: %s", src, per[k])
		}
		for b := range per[k] {
			used[b]++
		}
	}
	t.Logf("%d clients × %d requests; clients per backend: %v", len(srcs), stickyRequests, used)
	if len(used) < 2 {
		t.Errorf("all %d clients landed on one backend (%v): the choice does not depend on the client", len(srcs), used)
	}
}

// affinity: ClientIP affinity keeps each client on one backend.
func (s *suite) affinity(t *testing.T) {
	vip := s.vip4()
	svc := s.web(vip, 80, proxy.TCP, HTTPPort)
	svc.Scheduler = proxy.RoundRobin
	svc.Affinity = 5 * time.Minute
	s.apply(t, svc)
	s.sticky(t, netip.AddrPortFrom(vip, 80))
}

// sourceHash: the sh scheduler keeps each client on one backend.
func (s *suite) sourceHash(t *testing.T) {
	vip := s.vip4()
	svc := s.web(vip, 80, proxy.TCP, HTTPPort)
	svc.Scheduler = proxy.SourceHash
	s.apply(t, svc)
	s.sticky(t, netip.AddrPortFrom(vip, 80))
}

// drain: a backend set to weight 0 (or flagged Draining) takes no new
// connections while its already-open connection keeps working.
func (s *suite) drain(t *testing.T, flag bool) {
	vip := s.vip4()
	svc := s.web(vip, 9000, proxy.TCP, HoldPort)
	s.apply(t, svc)
	front := netip.AddrPortFrom(vip, 9000)
	held, err := s.topo.Hold(s.ctx, front, s.h.Timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := held.Echo("before", s.h.Timeout); err != nil {
		t.Fatal(err)
	}
	drained := s.topo.backendByName(held.Backend)
	if drained == nil {
		t.Fatalf("held connection answered by unknown backend %q", held.Backend)
	}
	for i := range svc.Backends {
		if svc.Backends[i].Addr.Addr() == drained.Addr4 {
			if flag {
				svc.Backends[i].Draining = true
			} else {
				svc.Backends[i].Weight = 0
			}
		}
	}
	s.apply(t, svc)
	tally, err := Fan(90, s.h.Workers, func() (Reply, error) {
		h, err := s.topo.Hold(s.ctx, front, s.h.Timeout)
		if err != nil {
			return Reply{}, err
		}
		h.Close()
		return Reply{Backend: h.Backend}, nil
	}, nil)
	t.Logf("after draining %s (flag=%v): %s", drained.Name, flag, tally)
	if err != nil {
		t.Fatalf("new connections failed: %v", err)
	}
	if tally[drained.Name] != 0 {
		t.Errorf("draining %s took %d new connections", drained.Name, tally[drained.Name])
	}
	if len(tally) != 2 {
		t.Errorf("want the two other backends to take the new connections: %s", tally)
	}
	if err := held.Echo("after-drain", s.h.Timeout); err != nil {
		t.Fatalf("open connection to draining %s broke: %v", drained.Name, err)
	}
	t.Logf("open connection to %s still flows after the drain", drained.Name)
}

// noSNAT: with NATNoSNAT the backend sees the client's own address.
func (s *suite) noSNAT(t *testing.T) {
	vip := s.vip4()
	svc := s.web(vip, 80, proxy.TCP, HTTPPort)
	svc.Method = proxy.NATNoSNAT
	s.apply(t, svc)
	// 120 requests: a backend below 10% (fewer than 12 of Binomial(120, 1/3))
	// happens by chance 1.6e-9 of the time; with 60 it was 1.7e-5.
	tally, err := s.httpFan(120, netip.Addr{}, netip.AddrPortFrom(vip, 80), noSNATChecker)
	s.everyBackend(t, "NATNoSNAT", tally, err, 0.10)
}

// idempotent: applying the same config again changes nothing visible.
func (s *suite) idempotent(t *testing.T) {
	vip := s.vip4()
	svc := s.web(vip, 80, proxy.TCP, HTTPPort)
	svc.NodePort = 30082
	s.apply(t, svc)
	s.apply(t, svc)
	s.apply(t, svc)
	tally, err := s.httpFan(90, netip.Addr{}, netip.AddrPortFrom(vip, 80), nil)
	s.everyBackend(t, "after three identical applies", tally, err, 0.10)
}

// expectGone asserts nothing answers on front any more.
func (s *suite) expectGone(t *testing.T, front netip.AddrPort) {
	t.Helper()
	// The gateway answers a frontend that is gone with ICMP unreachable,
	// which the kernel rate-limits (route error_burst): later attempts wait
	// for their timeout, so try a few, briefly.
	timeout := min(s.h.Timeout, time.Second)
	tally, _ := Fan(4, 4, func() (Reply, error) {
		return s.topo.GetHTTP(s.ctx, netip.Addr{}, front, timeout)
	}, nil)
	if tally[""] != tally.Total() {
		t.Errorf("%s still answers: %s", front, tally)
	}
}

// delete: a deleted service stops answering (VIP and node port).
func (s *suite) delete(t *testing.T) {
	vip := s.vip4()
	svc := s.web(vip, 80, proxy.TCP, HTTPPort)
	svc.NodePort = 30083
	keep := s.web(s.vip4(), 80, proxy.TCP, HTTPPort)
	s.apply(t, svc, keep)
	for _, front := range []netip.AddrPort{netip.AddrPortFrom(vip, 80), netip.AddrPortFrom(GatewayAddr4, 30083)} {
		if _, err := s.topo.GetHTTP(s.ctx, netip.Addr{}, front, s.h.Timeout); err != nil {
			t.Fatalf("%s before delete: %v", front, err)
		}
	}
	s.apply(t, keep)
	s.expectGone(t, netip.AddrPortFrom(vip, 80))
	s.expectGone(t, netip.AddrPortFrom(GatewayAddr4, 30083))
	if _, err := s.topo.GetHTTP(s.ctx, netip.Addr{}, netip.AddrPortFrom(keep.VIP, 80), s.h.Timeout); err != nil {
		t.Errorf("the other service broke when one was deleted: %v", err)
	}
}

// resync: damage by hand, see traffic suffer, Resync repairs it.
func (s *suite) resync(t *testing.T) {
	if s.h.Tamper == nil {
		t.Fatal("harness has no Tamper")
	}
	vip := s.vip4()
	svc := s.web(vip, 80, proxy.TCP, HTTPPort)
	s.apply(t, svc)
	front := netip.AddrPortFrom(vip, 80)
	tally, err := s.httpFan(120, netip.Addr{}, front, nil) // 120: see noSNAT
	s.everyBackend(t, "before tampering", tally, err, 0.10)

	s.h.Tamper(t, s.topo, svc)
	short := min(s.h.Timeout, time.Second)
	tally, _ = Fan(24, s.h.Workers, func() (Reply, error) {
		return s.topo.GetHTTP(s.ctx, netip.Addr{}, front, short)
	}, nil)
	t.Logf("after tampering: %s", tally)
	if tally[""] == 0 && len(tally) == len(s.topo.Backends) {
		t.Fatalf("tampering left traffic untouched (%s): the harness's Tamper did nothing visible", tally)
	}

	if err := s.dp.Resync(s.ctx); err != nil {
		t.Fatalf("resync: %v", err)
	}
	tally, err = s.httpFan(90, netip.Addr{}, front, nil)
	s.everyBackend(t, "after resync", tally, err, 0.10)
}

// unsupported: schedulers and methods outside Caps are refused with
// proxy.ErrUnsupported naming the service, one by one (Refusals); and with
// traffic: a good service applied beside a refused one answers.
func (s *suite) unsupported(t *testing.T) {
	base := s.web(s.vip4(), 80, proxy.TCP, HTTPPort)
	nodes := []netip.Addr{GatewayAddr4}
	Refusals(t, s.ctx, s.dp, s.h.Caps, base, nodes)
	i := slices.IndexFunc(proxy.Schedulers, func(sc proxy.Scheduler) bool { return !s.supports(sc) })
	if i < 0 {
		return // it refuses no scheduler: nothing to send beside
	}
	bad := base
	bad.Port, bad.Scheduler = 81, proxy.Schedulers[i]
	err := s.dp.Apply(s.ctx, proxy.Config{Services: []proxy.Service{base, bad}, NodeAddrs: nodes})
	if !proxy.Partial(err) {
		t.Fatalf("good + %s: %v, want a per-service refusal", bad.Scheduler, err)
	}
	if _, err := s.topo.GetHTTP(s.ctx, netip.Addr{}, netip.AddrPortFrom(base.VIP, base.Port), s.h.Timeout); err != nil {
		t.Errorf("the good service beside a refused one does not answer: %v", err)
	}
}

// cleanup: after Cleanup nothing answers on the VIP.
func (s *suite) cleanup(t *testing.T) {
	vip := s.vip4()
	svc := s.web(vip, 80, proxy.TCP, HTTPPort)
	s.apply(t, svc)
	if _, err := s.topo.GetHTTP(s.ctx, netip.Addr{}, netip.AddrPortFrom(vip, 80), s.h.Timeout); err != nil {
		t.Fatalf("before cleanup: %v", err)
	}
	if err := s.dp.Cleanup(s.ctx); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	s.expectGone(t, netip.AddrPortFrom(vip, 80))
}
