//go:build ipvsguest

// Tests that need a kernel with IPVS: they run inside the guest booted by
// lab/guest/run-suite.sh (make test-ipvs), as root, with real traffic
// between network namespaces.
package ipvs

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"

	"github.com/edgelb/edgelb/lab/conformance"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

func requireIPVS(t testing.TB) {
	t.Helper()
	netns.RequireRoot(t)
	if err := Available(); err != nil {
		t.Fatalf("the guest kernel must have IPVS: %v", err)
	}
}

func nsPath(n *netns.NS) string { return "/run/netns/" + n.Name }

func newIn(t testing.TB, n *netns.NS, opts Options) *Dataplane {
	t.Helper()
	opts.NetNS, opts.SetSysctls = nsPath(n), true
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 30 * time.Second
	}
	d, err := New(opts)
	if err != nil {
		t.Fatalf("ipvs.New in %s: %v", n.Name, err)
	}
	return d
}

// guestHarness plugs the IPVS dataplane into the shared conformance suite.
func guestHarness(prefix string) conformance.Harness {
	return conformance.Harness{
		New: func(t testing.TB, topo *conformance.Topology) proxy.Dataplane {
			return newIn(t, topo.Gateway, Options{})
		},
		// Tamper deletes the first real server by hand over netlink, as
		// `ipvsadm -d` would: its share of traffic goes elsewhere or fails.
		Tamper: func(t testing.TB, topo *conformance.Topology, svc proxy.Service) {
			h, err := mobyipvs.New(nsPath(topo.Gateway))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			s := &mobyipvs.Service{Address: net.IP(svc.VIP.AsSlice()), Port: svc.Port, Protocol: uint16(svc.Protocol),
				AddressFamily: family(svc.VIP), Netmask: defaultNetmask(svc.VIP)}
			be := svc.Backends[0].Addr
			if err := h.DelDestination(s, &mobyipvs.Destination{Address: net.IP(be.Addr().AsSlice()), Port: be.Port(),
				AddressFamily: family(be.Addr())}); err != nil {
				t.Fatalf("tamper: delete real server %s of %s: %v", be, svc.Key(), err)
			}
			t.Logf("tamper: deleted real server %s of %s by hand over netlink", be, svc.Key())
		},
		Caps: conformance.Caps{
			Schedulers:           proxy.Schedulers,
			Methods:              []proxy.Method{proxy.NAT, proxy.NATNoSNAT, proxy.DirectRouting, proxy.Tunnel},
			DeterministicWeights: true,
			IPv6:                 true,
			CTMark:               true,
			FWMark:               true,
		},
		// TCG is an emulator: give requests room.
		Timeout: 10 * time.Second,
		// Requests in parallel (the suite's default). IPVS persistence
		// creates its template without a lock, so two simultaneous first
		// connections of one client can land on two backends (seen once:
		// "client 192.0.2.16 was spread over backends: be2=1 be3=7"); the
		// suite's affinity scenario sends each client's first request alone
		// for that reason.
		Workers: 4,
		Prefix:  prefix,
	}
}

// TestIPVSGuestConformance runs the suite every dataplane passes.
func TestIPVSGuestConformance(t *testing.T) {
	requireIPVS(t)
	conformance.Run(t, guestHarness("iv"))
}

func TestIPVSGuestProbe(t *testing.T) {
	requireIPVS(t)
	name, why := Probe()
	t.Logf("Probe: %s: %s", name, why)
	if name != "ipvs" {
		t.Fatalf("auto picked %s on a kernel with IPVS", name)
	}
}

// goldenConfig is a representative config: every scheduler, NAT, NAT
// without SNAT, DR, tunnel, affinity, UDP, a node port and IPv6.
func goldenConfig() proxy.Config {
	be := func(s string, w uint32) proxy.Backend {
		return proxy.Backend{Addr: netip.MustParseAddrPort(s), Weight: w}
	}
	vip := netip.MustParseAddr
	return proxy.Config{
		NodeAddrs: []netip.Addr{vip("192.0.2.1"), vip("2001:db8:1::1")},
		Services: []proxy.Service{
			{Name: "web/http", VIP: vip("203.0.113.10"), Port: 80, Protocol: proxy.TCP, Scheduler: proxy.WeightedRoundRobin,
				NodePort: 30080, Backends: []proxy.Backend{be("198.51.100.6:8080", 3), be("198.51.100.10:8080", 1)}},
			{Name: "web/dns", VIP: vip("203.0.113.10"), Port: 53, Protocol: proxy.UDP, Scheduler: proxy.RoundRobin,
				Backends: []proxy.Backend{be("198.51.100.6:5353", 1), be("198.51.100.10:5353", 1)}},
			{Name: "shop/https", VIP: vip("203.0.113.11"), Port: 443, Protocol: proxy.TCP, Scheduler: proxy.LeastConn,
				Affinity: 3 * time.Hour, Backends: []proxy.Backend{be("198.51.100.6:8443", 1), be("198.51.100.10:8443", 2), be("198.51.100.14:8443", 1)}},
			{Name: "shop/api", VIP: vip("203.0.113.11"), Port: 8080, Protocol: proxy.TCP, Scheduler: proxy.WeightedLeastConn,
				Method: proxy.NATNoSNAT, Backends: []proxy.Backend{be("198.51.100.6:9000", 5), be("198.51.100.10:9000", 5)}},
			{Name: "cache/sh", VIP: vip("203.0.113.12"), Port: 6379, Protocol: proxy.TCP, Scheduler: proxy.SourceHash,
				Backends: []proxy.Backend{be("198.51.100.6:6379", 1), be("198.51.100.10:6379", 1)}},
			{Name: "cdn/dh", VIP: vip("203.0.113.12"), Port: 3128, Protocol: proxy.TCP, Scheduler: proxy.DestinationHash,
				Backends: []proxy.Backend{be("198.51.100.6:3128", 1)}},
			{Name: "dr/web", VIP: vip("203.0.113.13"), Port: 80, Protocol: proxy.TCP, Scheduler: proxy.ShortestExpected,
				Method: proxy.DirectRouting, Backends: []proxy.Backend{be("198.51.100.6:80", 1), be("198.51.100.10:80", 2)}},
			{Name: "tun/web", VIP: vip("203.0.113.14"), Port: 80, Protocol: proxy.TCP, Scheduler: proxy.NeverQueue,
				Method: proxy.Tunnel, Backends: []proxy.Backend{be("198.51.100.6:80", 1)}},
			{Name: "maglev/web", VIP: vip("203.0.113.15"), Port: 80, Protocol: proxy.TCP, Scheduler: proxy.MaglevHash,
				Backends: []proxy.Backend{be("198.51.100.6:8080", 1), be("198.51.100.10:8080", 1), be("198.51.100.14:8080", 1)}},
			{Name: "v6/web", VIP: vip("2001:db8:ff::10"), Port: 80, Protocol: proxy.TCP, Scheduler: proxy.RoundRobin,
				NodePort: 30081, Affinity: 90 * time.Second,
				Backends: []proxy.Backend{be("[2001:db8:101::2]:8080", 1), be("[2001:db8:102::2]:8080", 1)}},
		},
	}
}

// TestIPVSGuestGolden: after a sync, the real ipvsadm's `-Sn` matches
// testdata/golden.ipvsadm, and a second Apply changes nothing.
func TestIPVSGuestGolden(t *testing.T) {
	requireIPVS(t)
	n := netns.NewT(t, "ivg")
	d := newIn(t, n, Options{})
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	if err := d.Apply(ctx, goldenConfig()); err != nil {
		t.Fatal(err)
	}
	t.Logf("first sync: %+v", d.LastSync())
	out, err := n.Exec(ctx, "ipvsadm", "-Sn")
	if err != nil {
		t.Fatalf("the guest needs the real ipvsadm (lab/guest copies it in): %v", err)
	}
	t.Logf("ipvsadm -Sn:\n%s", out)
	want, err := os.ReadFile("testdata/golden.ipvsadm")
	if err != nil {
		t.Fatalf("golden file: %v", err)
	}
	if string(out) != string(want) {
		t.Fatalf("ipvsadm -Sn differs from testdata/golden.ipvsadm:\n--- got\n%s--- want\n%s", out, want)
	}
	if err := d.Apply(ctx, goldenConfig()); err != nil {
		t.Fatal(err)
	}
	if st := d.LastSync(); st != (SyncStats{}) {
		t.Fatalf("second identical Apply changed the kernel: %+v", st)
	}
	// Someone else's service stays through Apply and Cleanup.
	if _, err := n.Exec(ctx, "ipvsadm", "-A", "-t", "192.0.2.99:25", "-s", "rr"); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(ctx, proxy.Config{NodeAddrs: goldenConfig().NodeAddrs}); err != nil {
		t.Fatal(err)
	}
	if err := d.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	out, _ = n.Exec(ctx, "ipvsadm", "-Sn")
	t.Logf("after removing every service and Cleanup:\n%s", out)
	if strings.TrimSpace(string(out)) != "-A -t 192.0.2.99:25 -s rr" {
		t.Fatalf("edgelb left or took something:\n%s", out)
	}
	if _, err := n.Netlink().LinkByName(DefaultDevice); err == nil {
		t.Fatalf("%s still exists after Cleanup", DefaultDevice)
	}
}

// TestIPVSGuestDrainCompletes: a removed TCP backend stays at weight 0
// while its connection is open and is deleted by a resync once the drain
// timeout passes; a UDP backend goes at once.
func TestIPVSGuestDrainCompletes(t *testing.T) {
	requireIPVS(t)
	topo := conformance.NewTopology(t, "ivd")
	d := newIn(t, topo.Gateway, Options{DrainTimeout: 4 * time.Second})
	t.Cleanup(func() { d.Cleanup(context.Background()); d.Close() })
	ctx := context.Background()
	vip := netip.MustParseAddr("203.0.113.50")
	svc := proxy.Service{Name: "drain", VIP: vip, Port: 9000, Protocol: proxy.TCP, Scheduler: proxy.RoundRobin}
	udp := proxy.Service{Name: "drain-udp", VIP: vip, Port: 53, Protocol: proxy.UDP, Scheduler: proxy.RoundRobin}
	for i := range topo.Backends {
		svc.Backends = append(svc.Backends, proxy.Backend{Addr: topo.Backend4(i, conformance.HoldPort), Weight: 1})
		udp.Backends = append(udp.Backends, proxy.Backend{Addr: topo.Backend4(i, conformance.UDPPort), Weight: 1})
	}
	cfg := func(s ...proxy.Service) proxy.Config {
		return proxy.Config{Services: s, NodeAddrs: []netip.Addr{conformance.GatewayAddr4}}
	}
	if err := d.Apply(ctx, cfg(svc, udp)); err != nil {
		t.Fatal(err)
	}
	front := netip.AddrPortFrom(vip, 9000)
	held, err := topo.Hold(ctx, front, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// Flows: the connection table lists the held connection.
	fl, err := d.Flows()
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	flows, err := fl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range flows {
		t.Logf("flow %s -> %s => %s %s", f.Client, f.Frontend, f.Backend, f.State)
		if f.Frontend == front && f.State == "ESTABLISHED" {
			found = true
		}
	}
	if !found {
		t.Fatalf("IPVS connection table does not list the held connection to %s", front)
	}
	var drained netip.AddrPort
	var keep []proxy.Backend
	for _, b := range svc.Backends {
		if b.Addr.Addr() == backendAddr(topo, held.Backend) {
			drained = b.Addr
			continue
		}
		keep = append(keep, b)
	}
	removed := svc
	removed.Backends = keep
	udp2 := udp
	udp2.Backends = udp.Backends[1:]
	start := time.Now()
	if err := d.Apply(ctx, cfg(removed, udp2)); err != nil {
		t.Fatal(err)
	}
	t.Logf("after removing %s (held) and UDP %s: %+v", drained, udp.Backends[0].Addr, d.LastSync())
	dest := func(k proxy.Protocol, port uint16, a netip.AddrPort) (DestStats, bool) {
		st, err := d.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Frontend == netip.AddrPortFrom(vip, port) && s.Protocol == k {
				for _, ds := range s.Dests {
					if ds.Backend == a {
						return ds, true
					}
				}
			}
		}
		return DestStats{}, false
	}
	if ds, ok := dest(proxy.TCP, 9000, drained); !ok || ds.Weight != 0 || ds.Active != 1 {
		t.Fatalf("draining backend: %+v present=%v, want weight 0 with 1 active connection", ds, ok)
	}
	if _, ok := dest(proxy.UDP, 53, udp.Backends[0].Addr); ok {
		t.Fatalf("UDP backend still present after removal")
	}
	if err := held.Echo("still-open", 10*time.Second); err != nil {
		t.Fatalf("held connection broke while draining: %v", err)
	}
	for {
		if err := d.Resync(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := dest(proxy.TCP, 9000, drained); !ok {
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatal("draining backend never deleted")
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("draining backend with an open connection deleted %.1fs after removal (drain timeout 4s)", time.Since(start).Seconds())
	// Per-service counters are there (the estimator folds them in every 2 s).
	time.Sleep(2500 * time.Millisecond)
	st, err := d.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		t.Logf("stats %s/%s: conns=%d pktsIn=%d bytesIn=%d dests=%d", s.Frontend, s.Protocol, s.Counters.Connections,
			s.Counters.PacketsIn, s.Counters.BytesIn, len(s.Dests))
	}
}

func backendAddr(topo *conformance.Topology, name string) netip.Addr {
	for _, b := range topo.Backends {
		if b.Name == name {
			return b.Addr4
		}
	}
	return netip.Addr{}
}
