//go:build bgp

package bgp

// Real routers as peers: FRR bgpd and BIRD 2, each in a namespace with a
// bridge (192.0.2.2/24, 2001:db8:ff::2/64); every edgelb gateway is a
// namespace with eth0 on that bridge (192.0.2.1N, 2001:db8:ff::1N) running
// a speaker child process. Run: go test -count=1 -tags bgp -run TestBGP -v ./announce/bgp/

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lab/netns"
)

const labASN = 64512 // iBGP, so LOCAL_PREF reaches the router

var (
	routerV4 = netip.MustParseAddr("192.0.2.2")
	routerV6 = netip.MustParseAddr("2001:db8:ff::2")
)

type lab struct {
	router *netns.NS
	gws    []*netns.NS
}

func gwV4(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, byte(11 + i)}) }
func gwV6(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("2001:db8:ff::%d", 11+i)) }

// newLab builds the router namespace and n gateway namespaces on its bridge.
func newLab(t testing.TB, n int) *lab {
	t.Helper()
	netns.RequireRoot(t)
	l := &lab{router: netns.NewT(t, "bgpr")}
	must(t, l.router.Bridge("br0"))
	must(t, l.router.AddAddr("br0", netip.PrefixFrom(routerV4, 24)))
	must(t, l.router.AddAddr("br0", netip.PrefixFrom(routerV6, 64)))
	for i := range n {
		g := netns.NewT(t, "bgpg")
		port := fmt.Sprintf("gw%d", i)
		must(t, netns.Veth(g, "eth0", l.router, port))
		must(t, l.router.SetMaster(port, "br0"))
		must(t, g.AddAddr("eth0", netip.PrefixFrom(gwV4(i), 24)))
		must(t, g.AddAddr("eth0", netip.PrefixFrom(gwV6(i), 64)))
		l.gws = append(l.gws, g)
	}
	return l
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// speakerConfig peers gateway i with the router over IPv4 and IPv6.
func speakerConfig(i int, password string, gr bool) childConfig {
	peer := func(name string, a netip.Addr) Peer {
		return Peer{Name: name, Address: a, ASN: labASN, HoldTime: 9 * time.Second, ConnectRetry: time.Second,
			Password: password, GracefulRestart: gr}
	}
	return childConfig{LocalASN: labASN, RouterID: gwV4(i), ListenPort: -1, RestartTime: 60 * time.Second,
		Peers: []Peer{peer("router4", routerV4), peer("router6", routerV6)}}
}

func frrConfig(gws int, password string) string {
	var b strings.Builder
	b.WriteString("frr defaults traditional\nhostname edgelb-frr\nlog stdout informational\n!\n")
	fmt.Fprintf(&b, "router bgp %d\n bgp router-id %s\n no bgp ebgp-requires-policy\n no bgp default ipv4-unicast\n", labASN, routerV4)
	for i := range gws {
		for _, a := range []netip.Addr{gwV4(i), gwV6(i)} {
			fmt.Fprintf(&b, " neighbor %s remote-as %d\n neighbor %s timers 3 9\n", a, labASN, a)
			if password != "" {
				fmt.Fprintf(&b, " neighbor %s password %s\n", a, password)
			}
		}
	}
	b.WriteString(" address-family ipv4 unicast\n  maximum-paths ibgp 8\n")
	for i := range gws {
		fmt.Fprintf(&b, "  neighbor %s activate\n", gwV4(i))
	}
	b.WriteString(" exit-address-family\n address-family ipv6 unicast\n  maximum-paths ibgp 8\n")
	for i := range gws {
		fmt.Fprintf(&b, "  neighbor %s activate\n", gwV6(i))
	}
	b.WriteString(" exit-address-family\n!\n")
	return b.String()
}

func birdConfig(password string) string {
	pw := ""
	if password != "" {
		pw = fmt.Sprintf("  password %q;\n", password)
	}
	proto := func(name string, local, nb netip.Addr, af string) string {
		return fmt.Sprintf("protocol bgp %s {\n  local %s as %d;\n  neighbor %s as %d;\n  hold time 9;\n  direct;\n%s"+
			"  %s { import all; export none; gateway direct; };\n}\n", name, local, labASN, nb, labASN, pw, af)
	}
	return "log stderr all;\nrouter id 192.0.2.2;\nprotocol device { scan time 10; }\n" +
		proto("edgelb4", routerV4, gwV4(0), "ipv4") + proto("edgelb6", routerV6, gwV6(0), "ipv6")
}

var (
	labVIP4 = announce.VIP{Addr: netip.MustParseAddr("203.0.113.10"), Pool: "web",
		Communities: []string{"65000:100", "no-export"}, LargeCommunities: []string{"65000:1:2"}, LocalPref: 250}
	labVIP6 = announce.VIP{Addr: netip.MustParseAddr("2001:db8:100::10"), Pool: "web6",
		Communities: []string{"65000:600"}, LargeCommunities: []string{"65000:6:6"}, LocalPref: 260}
)

// present: the route is in FRR's RIB, valid and selected as best.
func present(paths []frrPath) bool {
	for _, p := range paths {
		if p.Valid && p.Bestpath != nil && p.Bestpath.Overall {
			return true
		}
	}
	return false
}
func absent(paths []frrPath) bool { return len(paths) == 0 }

func TestBGPFRR(t *testing.T) {
	l := newLab(t, 1)
	f := startFRR(t, l.router, frrConfig(1, ""))
	sp := startSpeaker(t, l.gws[0], speakerConfig(0, "", false))

	start := time.Now()
	sp.set(labVIP4, labVIP6)
	p4 := f.waitPrefix("203.0.113.10/32", "the VIP", 20*time.Second, present)
	t.Logf("first SetVIPs → route in FRR's RIB (session setup included): %v", time.Since(start).Round(time.Millisecond))
	p6 := f.waitPrefix("2001:db8:100::10/128", "the IPv6 VIP", 10*time.Second, present)
	t.Logf("FRR:\n%s", f.mustExec("show bgp ipv4 unicast 203.0.113.10/32"))
	t.Logf("FRR:\n%s", f.mustExec("show bgp ipv6 unicast 2001:db8:100::10/128"))
	if got := p4[0]; got.communities() != "65000:100 no-export" || got.large() != "65000:1:2" || got.localPref() != 250 ||
		got.nexthop() != gwV4(0).String() || !got.Valid {
		t.Fatalf("IPv4 path: %+v", got)
	}
	if got := p6[0]; got.communities() != "65000:600" || got.large() != "65000:6:6" || got.localPref() != 260 ||
		got.nexthop() != gwV6(0).String() {
		t.Fatalf("IPv6 path: %+v", got)
	}
	rep := sp.waitPeer("router6", StateEstablished, 10*time.Second)
	sp.checkSockets(netip.AddrPortFrom(routerV4, 179))
	t.Logf("status: %+v", rep.Status)
	for _, k := range []string{`edgelb_bgp_session_up{peer="router4"}`, `edgelb_bgp_session_up{peer="router6"}`,
		`edgelb_bgp_routes_advertised{family="ipv4"}`, `edgelb_bgp_routes_advertised{family="ipv6"}`} {
		if rep.Metrics[k] != 1 {
			t.Errorf("metric %s = %v, want 1 (%v)", k, rep.Metrics[k], rep.Metrics)
		}
	}
	if !slices.Equal(rep.Status.Owned, []string{"203.0.113.10/32", "2001:db8:100::10/128"}) {
		t.Errorf("owned %v", rep.Status.Owned)
	}

	// The service goes: its route is withdrawn, the other stays.
	start = time.Now()
	sp.set(labVIP6)
	f.waitPrefix("203.0.113.10/32", "the withdrawal", 10*time.Second, absent)
	t.Logf("VIP removed → route gone from FRR's RIB: %v", time.Since(start).Round(time.Millisecond))
	if paths, _ := f.prefix("2001:db8:100::10/128"); len(paths) != 1 {
		t.Fatalf("IPv6 route went too: %+v", paths)
	}

	// edgelb stops (withdraw on shutdown, the default).
	sp.set(labVIP4, labVIP6)
	f.waitPrefix("203.0.113.10/32", "the VIP again", 10*time.Second, present)
	start = time.Now()
	sp.close(true)
	f.waitPrefix("203.0.113.10/32", "the withdrawal on Close(true)", 10*time.Second, absent)
	f.waitPrefix("2001:db8:100::10/128", "the withdrawal on Close(true)", 10*time.Second, absent)
	t.Logf("Close(true) → both routes gone from FRR's RIB: %v", time.Since(start).Round(time.Millisecond))
	t.Logf("FRR after Close(true):\n%s", f.mustExec("show bgp summary"))
}

func TestBGPFRRECMP(t *testing.T) {
	l := newLab(t, 2)
	f := startFRR(t, l.router, frrConfig(2, ""))
	a := startSpeaker(t, l.gws[0], speakerConfig(0, "", false))
	b := startSpeaker(t, l.gws[1], speakerConfig(1, "", false))
	a.set(labVIP4)
	b.set(labVIP4)
	paths := f.waitPrefix("203.0.113.10/32", "two multipath next hops", 20*time.Second, func(ps []frrPath) bool {
		n := 0
		for _, p := range ps {
			if p.Multipath {
				n++
			}
		}
		return n == 2
	})
	var hops []string
	for _, p := range paths {
		hops = append(hops, p.nexthop())
	}
	sort.Strings(hops)
	if !slices.Equal(hops, []string{gwV4(0).String(), gwV4(1).String()}) {
		t.Fatalf("next hops %v", hops)
	}
	t.Logf("FRR (ECMP over both gateways):\n%s", f.mustExec("show bgp ipv4 unicast 203.0.113.10/32"))

	// One gateway can no longer serve the VIP: one next hop left.
	b.set()
	f.waitPrefix("203.0.113.10/32", "one path", 10*time.Second, func(ps []frrPath) bool {
		return len(ps) == 1 && ps[0].nexthop() == gwV4(0).String()
	})
	t.Logf("after gateway 2 withdrew:\n%s", f.mustExec("show bgp ipv4 unicast 203.0.113.10/32"))
}

func TestBGPFRRWrongMD5(t *testing.T) {
	l := newLab(t, 1)
	f := startFRR(t, l.router, frrConfig(1, "right-secret"))
	sp := startSpeaker(t, l.gws[0], speakerConfig(0, "wrong-secret", false))
	sp.set(labVIP4)
	// Attempts come 1-2 s apart with a 1 s timeout: wait for the status and
	// the log to name MD5 (a minute bounds a hang), not a fixed 12 s.
	rep := sp.waitFailing("TCP MD5", time.Minute)
	for _, p := range rep.Status.Peers {
		if p.State == StateEstablished {
			t.Fatalf("peer %s: %+v", p.Name, p)
		}
		t.Logf("API status: %+v", p)
	}
	for _, line := range strings.Split(sp.logs.String(), "\n") {
		if strings.Contains(line, "TCP MD5") {
			t.Logf("log: %s", line)
		}
	}
	if paths, _ := f.prefix("203.0.113.10/32"); len(paths) != 0 {
		t.Fatalf("FRR learned the route: %+v", paths)
	}
	t.Logf("FRR:\n%s", f.mustExec("show bgp summary"))

	// The right password: the session comes up.
	sp.kill()
	good := startSpeaker(t, l.gws[0], speakerConfig(0, "right-secret", false))
	good.set(labVIP4)
	f.waitPrefix("203.0.113.10/32", "the VIP over an MD5-signed session", 20*time.Second, present)
	t.Logf("with the right password: %+v", good.waitPeer("router4", StateEstablished, 10*time.Second).Status.Peers[0])
}

// TestBGPFRRGracefulRestart: Close(false) and exit (a restart that keeps the
// dataplane): FRR keeps the route, marked stale, until the next edgelb
// announces it again.
func TestBGPFRRGracefulRestart(t *testing.T) {
	l := newLab(t, 1)
	f := startFRR(t, l.router, frrConfig(1, ""))
	sp := startSpeaker(t, l.gws[0], speakerConfig(0, "", true))
	sp.set(labVIP4)
	f.waitPrefix("203.0.113.10/32", "the VIP", 20*time.Second, present)
	sp.waitPeer("router4", StateEstablished, 10*time.Second)
	sp.close(false)
	time.Sleep(2 * time.Second)
	paths := f.waitPrefix("203.0.113.10/32", "the stale route", 30*time.Second, func(ps []frrPath) bool { return len(ps) == 1 && ps[0].Stale })
	t.Logf("2 s after edgelb exited with Close(false): stale=%v\n%s", paths[0].Stale, f.mustExec("show bgp ipv4 unicast 203.0.113.10/32"))

	// The next edgelb: FRR replaces the stale route. Poll every 2 ms to see
	// whether FRR ever dropped the VIP's route in between. (This bgpd runs
	// without zebra, so no routing table resolves next hops: while the new
	// session replaces the old one, the kept stale path was seen with its
	// next hop "accessible": false, valid false, for one 2 ms poll in about
	// one run of six. Counted apart: the route was kept, which is what
	// graceful restart is about.)
	start := time.Now()
	again := startSpeaker(t, l.gws[0], speakerConfig(0, "", true))
	again.set(labVIP4)
	polls, missing, unresolved := 0, 0, 0
	for deadline := time.Now().Add(20 * time.Second); ; {
		paths, err := f.prefix("203.0.113.10/32")
		if err != nil {
			t.Fatal(err)
		}
		polls++
		switch {
		case len(paths) == 0:
			missing++
		case !present(paths):
			unresolved++
		}
		if len(paths) == 1 && !paths[0].Stale && present(paths) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("route never refreshed: %+v", paths)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("restarted edgelb → route fresh again after %v; FRR had no path for the VIP in %d of %d polls (2 ms apart) meanwhile, its kept path's next hop unresolved in %d",
		time.Since(start).Round(time.Millisecond), missing, polls, unresolved)
	if missing > 0 {
		t.Errorf("the VIP's route went missing during the restart")
	}
}

// TestBGPFRRHoldTimerExpiry: bgpd frozen (SIGSTOP) sends no keepalives; the
// speaker's hold timer (9 s) expires, Status and the log say so, and the
// session comes back once bgpd runs again.
func TestBGPFRRHoldTimerExpiry(t *testing.T) {
	l := newLab(t, 1)
	f := startFRR(t, l.router, frrConfig(1, ""))
	sp := startSpeaker(t, l.gws[0], speakerConfig(0, "", false))
	sp.set(labVIP4)
	sp.waitPeer("router4", StateEstablished, 20*time.Second)
	must(t, f.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = f.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	var p announce.PeerState
	for deadline := time.Now().Add(20 * time.Second); ; {
		p = sp.status().Status.Peers[0]
		if p.State != StateEstablished && strings.Contains(p.Detail, "hold timer expired") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no hold timer expiry in status: %+v", p)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%v after SIGSTOP of bgpd, API status: %+v", time.Since(stopped).Round(100*time.Millisecond), p)
	// The status and the log line are written each at its own moment.
	sp.waitLog("hold timer expired", 30*time.Second)
	for _, line := range strings.Split(sp.logs.String(), "\n") {
		if strings.Contains(line, "session down") {
			t.Logf("log: %s", line)
		}
	}
	resume()
	sp.waitPeer("router4", StateEstablished, 30*time.Second)
	f.waitPrefix("203.0.113.10/32", "the VIP after the session came back", 10*time.Second, present)
}

func TestBGPBIRD(t *testing.T) {
	l := newLab(t, 1)
	b := startBIRD(t, l.router, birdConfig(""))
	sp := startSpeaker(t, l.gws[0], speakerConfig(0, "", false))
	start := time.Now()
	sp.set(labVIP4, labVIP6)
	r4 := b.waitRoute("203.0.113.10/32", "the VIP", 20*time.Second, func(r birdRoute) bool { return r.Present })
	t.Logf("first SetVIPs → route in BIRD (session setup included): %v", time.Since(start).Round(time.Millisecond))
	r6 := b.waitRoute("2001:db8:100::10/128", "the IPv6 VIP", 10*time.Second, func(r birdRoute) bool { return r.Present })
	t.Logf("BIRD:\n%s%s", r4.Text, r6.Text)
	if r4.Comms != "(65000,100) (65535,65281)" || r4.Large != "(65000, 1, 2)" || r4.LocalPref != "250" || r4.NextHop != gwV4(0).String() {
		t.Fatalf("IPv4 route %+v", r4)
	}
	if r6.Comms != "(65000,600)" || r6.Large != "(65000, 6, 6)" || r6.LocalPref != "260" || !strings.HasPrefix(r6.NextHop, gwV6(0).String()) {
		t.Fatalf("IPv6 route %+v", r6)
	}
	sp.checkSockets(netip.AddrPortFrom(routerV4, 179))

	start = time.Now()
	sp.set(labVIP6)
	b.waitRoute("203.0.113.10/32", "the withdrawal", 10*time.Second, func(r birdRoute) bool { return !r.Present })
	t.Logf("VIP removed → route gone from BIRD: %v", time.Since(start).Round(time.Millisecond))
	if r, _ := b.route("2001:db8:100::10/128"); !r.Present {
		t.Fatalf("IPv6 route went too")
	}
	sp.set(labVIP4, labVIP6)
	b.waitRoute("203.0.113.10/32", "the VIP again", 10*time.Second, func(r birdRoute) bool { return r.Present })
	start = time.Now()
	sp.close(true)
	b.waitRoute("203.0.113.10/32", "the withdrawal on Close(true)", 10*time.Second, func(r birdRoute) bool { return !r.Present })
	b.waitRoute("2001:db8:100::10/128", "the withdrawal on Close(true)", 10*time.Second, func(r birdRoute) bool { return !r.Present })
	t.Logf("Close(true) → both routes gone from BIRD: %v", time.Since(start).Round(time.Millisecond))
	proto, _ := b.birdc("show protocols")
	t.Logf("BIRD after Close(true):\n%s", proto)
}

func TestBGPBIRDWrongMD5(t *testing.T) {
	l := newLab(t, 1)
	b := startBIRD(t, l.router, birdConfig("right-secret"))
	sp := startSpeaker(t, l.gws[0], speakerConfig(0, "wrong-secret", false))
	sp.set(labVIP4)
	rep := sp.waitFailing("TCP MD5", time.Minute)
	for _, p := range rep.Status.Peers {
		if p.State == StateEstablished {
			t.Fatalf("peer %s: %+v", p.Name, p)
		}
		t.Logf("API status: %+v", p)
	}
	if r, _ := b.route("203.0.113.10/32"); r.Present {
		t.Fatalf("BIRD learned the route:\n%s", r.Text)
	}
	proto, _ := b.birdc("show protocols")
	t.Logf("BIRD:\n%s", proto)

	sp.kill()
	good := startSpeaker(t, l.gws[0], speakerConfig(0, "right-secret", false))
	good.set(labVIP4)
	b.waitRoute("203.0.113.10/32", "the VIP over an MD5-signed session", 20*time.Second, func(r birdRoute) bool { return r.Present })
}
