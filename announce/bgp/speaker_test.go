package bgp

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb/fielderr"
	api "github.com/osrg/gobgp/v3/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/anypb"
)

func vip(addr string, mod ...func(*announce.VIP)) announce.VIP {
	v := announce.VIP{Addr: netip.MustParseAddr(addr), Pool: "p"}
	for _, m := range mod {
		m(&v)
	}
	return v
}

func withAttrs(comms, large []string, lp uint32) func(*announce.VIP) {
	return func(v *announce.VIP) { v.Communities, v.LargeCommunities, v.LocalPref = comms, large, lp }
}

func TestSpeakerAnnouncesVIPWithAttributes(t *testing.T) {
	r := newTestRouter(t, 64512, routerPeer{addr: "127.0.0.1", asn: 64512}) // iBGP: local-pref is carried
	s := newTestSpeaker(t, 64512, r, nil)
	if st := s.Status(); st.Peers[0].State != StateIdle || !strings.Contains(st.Peers[0].Detail, "waiting for the first VIP set") {
		t.Fatalf("before SetVIPs: %+v", st.Peers)
	}
	err := s.SetVIPs(context.Background(), []announce.VIP{
		vip("203.0.113.10", withAttrs([]string{"65000:100", "no-export"}, []string{"65000:1:2"}, 200)),
	})
	if err != nil {
		t.Fatal(err)
	}
	rib := r.waitRIB(t, "203.0.113.10/32", func(m map[string][]ribPath) bool { return len(m["203.0.113.10/32"]) == 1 })
	got := rib["203.0.113.10/32"][0]
	if got.NextHop != "127.0.0.1" || !slices.Equal(got.Communities, []string{"65000:100", "65535:65281"}) ||
		!slices.Equal(got.Large, []string{"65000:1:2"}) || got.LocalPref != 200 {
		t.Fatalf("path attributes: %+v", got)
	}
	waitEstablished(t, s)
	st := s.Status()
	if st.Kind != "bgp" || !slices.Equal(st.Owned, []string{"203.0.113.10/32"}) || !strings.HasPrefix(st.Peers[0].Detail, "up ") ||
		st.Peers[0].Address != "127.0.0.1:"+strconv.Itoa(int(r.port)) {
		t.Fatalf("status: %+v", st)
	}
}

func TestSpeakerDiffsVIPSets(t *testing.T) {
	r := newTestRouter(t, 64513, routerPeer{addr: "127.0.0.1", asn: 64512}) // eBGP
	reg := prometheus.NewRegistry()
	s := newTestSpeaker(t, 64512, r, func(c *Config) { c.Registerer = reg })
	ctx := context.Background()
	set := func(vips ...announce.VIP) {
		t.Helper()
		if err := s.SetVIPs(ctx, vips); err != nil {
			t.Fatal(err)
		}
	}
	set(vip("203.0.113.1"), vip("203.0.113.2", withAttrs([]string{"65000:1"}, nil, 0)), vip("203.0.113.3"))
	r.waitRIB(t, "three VIPs", func(m map[string][]ribPath) bool { return len(m) == 3 })
	waitEstablished(t, s)
	if v := testutil.ToFloat64(s.m.routes.WithLabelValues("ipv4")); v != 3 {
		t.Fatalf("routes gauge %v", v)
	}
	if v := testutil.ToFloat64(s.m.up.WithLabelValues("router")); v != 1 {
		t.Fatalf("session up gauge %v", v)
	}

	// .1 leaves, .2 changes communities, .3 stays, .4 arrives; the same set twice changes nothing.
	set(vip("203.0.113.2", withAttrs([]string{"65000:2"}, nil, 0)), vip("203.0.113.3"), vip("203.0.113.4"))
	set(vip("203.0.113.3"), vip("203.0.113.4"), vip("203.0.113.2", withAttrs([]string{"65000:2"}, nil, 0)))
	rib := r.waitRIB(t, ".2 .3 .4 with .2 re-tagged", func(m map[string][]ribPath) bool {
		return slices.Equal(prefixes(m), []string{"203.0.113.2/32", "203.0.113.3/32", "203.0.113.4/32"}) &&
			slices.Equal(m["203.0.113.2/32"][0].Communities, []string{"65000:2"})
	})
	if rib["203.0.113.3/32"][0].HasLP {
		t.Fatalf("eBGP path carries LOCAL_PREF: %+v", rib["203.0.113.3/32"][0])
	}
	ann := testutil.ToFloat64(s.m.updates.WithLabelValues("announce"))
	wd := testutil.ToFloat64(s.m.updates.WithLabelValues("withdraw"))
	if ann != 5 || wd != 1 { // 3 + (.2 changed, .4 new); .1 withdrawn
		t.Fatalf("announce=%v withdraw=%v, want 5 and 1", ann, wd)
	}
	if got := s.Advertised(); !slices.Equal(got, []string{"203.0.113.2/32", "203.0.113.3/32", "203.0.113.4/32"}) {
		t.Fatalf("advertised %v", got)
	}

	set()
	r.waitRIB(t, "nothing", func(m map[string][]ribPath) bool { return len(m) == 0 })
	if v := testutil.ToFloat64(s.m.routes.WithLabelValues("ipv4")); v != 0 {
		t.Fatalf("routes gauge %v", v)
	}
}

func TestSpeakerAggregates(t *testing.T) {
	r := newTestRouter(t, 64512, routerPeer{addr: "127.0.0.1", asn: 64512})
	s := newTestSpeaker(t, 64512, r, nil)
	agg := func(lp uint32, comm string) func(*announce.VIP) {
		return func(v *announce.VIP) { v.AggregationLen, v.LocalPref, v.Communities = 24, lp, []string{comm} }
	}
	err := s.SetVIPs(context.Background(), []announce.VIP{
		vip("203.0.113.10", agg(100, "65000:1")), vip("203.0.113.77", agg(300, "65000:2")),
		vip("198.51.100.5", func(v *announce.VIP) { v.AggregationLen = 64 }), // longer than IPv4: host route
	})
	if err != nil {
		t.Fatal(err)
	}
	rib := r.waitRIB(t, "the /24 and a /32", func(m map[string][]ribPath) bool { return len(m) == 2 })
	if !slices.Equal(prefixes(rib), []string{"198.51.100.5/32", "203.0.113.0/24"}) {
		t.Fatalf("prefixes %v", prefixes(rib))
	}
	if p := rib["203.0.113.0/24"][0]; p.LocalPref != 300 || !slices.Equal(p.Communities, []string{"65000:1", "65000:2"}) {
		t.Fatalf("aggregate attributes %+v", p)
	}
}

func TestSpeakerIPv6(t *testing.T) {
	// An IPv4 session carries IPv4 routes only; the IPv6 VIP stays in our
	// RIB, ready for an IPv6 peer, and is listed as advertised.
	r := newTestRouter(t, 64512, routerPeer{addr: "127.0.0.1", asn: 64512})
	s := newTestSpeaker(t, 64512, r, nil)
	if err := s.SetVIPs(context.Background(), []announce.VIP{vip("203.0.113.9"), vip("2001:db8::9")}); err != nil {
		t.Fatal(err)
	}
	r.waitRIB(t, "203.0.113.9/32", func(m map[string][]ribPath) bool { return len(m) == 1 && len(m["203.0.113.9/32"]) == 1 })
	if got := s.Advertised(); !slices.Equal(got, []string{"203.0.113.9/32", "2001:db8::9/128"}) {
		t.Fatalf("advertised %v", got)
	}
	var fams []string
	if err := s.srv.ListPath(context.Background(), &api.ListPathRequest{TableType: api.TableType_GLOBAL,
		Family: &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}}, func(d *api.Destination) {
		fams = append(fams, d.Prefix)
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fams, []string{"2001:db8::9/128"}) {
		t.Fatalf("IPv6 RIB %v", fams)
	}
}

func TestSpeakerBadCommunitySkipsOnlyThatVIP(t *testing.T) {
	r := newTestRouter(t, 64512, routerPeer{addr: "127.0.0.1", asn: 64512})
	s := newTestSpeaker(t, 64512, r, nil)
	err := s.SetVIPs(context.Background(), []announce.VIP{
		vip("203.0.113.1", withAttrs([]string{"65000:70000"}, nil, 0)),
		vip("203.0.113.2", withAttrs(nil, []string{"1:2"}, 0)),
		vip("203.0.113.3"),
	})
	var fe *fielderr.Error
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), `"65000:70000"`) || !strings.Contains(err.Error(), `"1:2"`) ||
		!strings.Contains(err.Error(), "communities[0]") {
		t.Fatalf("error %v", err)
	}
	r.waitRIB(t, "only .3", func(m map[string][]ribPath) bool { return slices.Equal(prefixes(m), []string{"203.0.113.3/32"}) })
}

func TestSpeakerCloseWithdraws(t *testing.T) {
	r := newTestRouter(t, 64512, routerPeer{addr: "127.0.0.1", asn: 64512})
	s := newTestSpeaker(t, 64512, r, func(c *Config) { c.Peers[0].GracefulRestart = true })
	if err := s.SetVIPs(context.Background(), []announce.VIP{vip("203.0.113.1"), vip("2001:db8::1")}); err != nil {
		t.Fatal(err)
	}
	r.waitRIB(t, "the VIP", func(m map[string][]ribPath) bool { return len(m) == 1 })
	start := time.Now()
	if err := s.Close(true); err != nil {
		t.Fatal(err)
	}
	r.waitRIB(t, "nothing", func(m map[string][]ribPath) bool { return len(m) == 0 })
	t.Logf("Close(true) → router RIB empty in %v (graceful restart negotiated)", time.Since(start).Round(time.Millisecond))
	if err := s.SetVIPs(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetVIPs after Close: %v", err)
	}
	if st := s.Status(); len(st.Owned) != 0 || st.Peers[0].State != StateIdle {
		t.Fatalf("status after close %+v", st)
	}
}

func TestSpeakerCloseKeepLeavesRoutes(t *testing.T) {
	r := newTestRouter(t, 64512, routerPeer{addr: "127.0.0.1", asn: 64512})
	s := newTestSpeaker(t, 64512, r, nil)
	if err := s.SetVIPs(context.Background(), []announce.VIP{vip("203.0.113.1")}); err != nil {
		t.Fatal(err)
	}
	r.waitRIB(t, "the VIP", func(m map[string][]ribPath) bool { return len(m) == 1 })
	if err := s.Close(false); err != nil {
		t.Fatal(err)
	}
	// Close(false) changes nothing, at once or later: a window for a wrong
	// withdrawal to show, which a slow machine can only shorten (no false
	// failure; the session's hold time is 9 s).
	time.Sleep(300 * time.Millisecond)
	if rib := r.rib(t); len(rib) != 1 {
		t.Fatalf("Close(false) withdrew: %v", rib)
	}
}

func TestSpeakerRefusesImportedRoutes(t *testing.T) {
	r := newTestRouter(t, 64513, routerPeer{addr: "127.0.0.1", asn: 64512})
	s := newTestSpeaker(t, 64512, r, nil)
	nlri, _ := anypb.New(&api.IPAddressPrefix{Prefix: "192.0.2.128", PrefixLen: 25})
	origin, _ := anypb.New(&api.OriginAttribute{})
	nh, _ := anypb.New(&api.NextHopAttribute{NextHop: "0.0.0.0"})
	if _, err := r.srv.AddPath(context.Background(), &api.AddPathRequest{Path: &api.Path{
		Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Nlri: nlri, Pattrs: []*anypb.Any{origin, nh},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetVIPs(context.Background(), []announce.VIP{vip("203.0.113.1")}); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, s)
	// Wait until the speaker has received the router's route (its Adj-RIB-In
	// holds what arrived, before the import policy): GoBGP files it there
	// and decides on the global RIB in the same step, so the global RIB read
	// below comes after that decision — not after a guessed 500 ms.
	received := func() bool {
		got := false
		err := s.srv.ListPath(context.Background(), &api.ListPathRequest{TableType: api.TableType_ADJ_IN, Name: "127.0.0.1",
			Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}}, func(d *api.Destination) {
			got = got || d.Prefix == "192.0.2.128/25"
		})
		return err == nil && got
	}
	for deadline := time.Now().Add(30 * time.Second); !received(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the router's route never reached the speaker's Adj-RIB-In")
		}
	}
	n := 0
	_ = s.srv.ListPath(context.Background(), &api.ListPathRequest{TableType: api.TableType_GLOBAL,
		Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}}, func(d *api.Destination) {
		if d.Prefix != "203.0.113.1/32" {
			t.Errorf("speaker RIB took in %s from the router", d.Prefix)
		}
		n++
	})
	if n != 1 {
		t.Fatalf("speaker RIB has %d prefixes", n)
	}
}

func TestSpeakerECMPTwoGateways(t *testing.T) {
	r := newTestRouter(t, 64513, routerPeer{addr: "127.0.0.1", asn: 64512}, routerPeer{addr: "127.0.0.2", asn: 64512})
	a := newTestSpeaker(t, 64512, r, nil)
	b := newTestSpeaker(t, 64512, r, func(c *Config) {
		c.RouterID = netip.MustParseAddr("192.0.2.2")
		c.Peers[0].SourceAddress = netip.MustParseAddr("127.0.0.2")
	})
	for _, s := range []*Speaker{a, b} {
		if err := s.SetVIPs(context.Background(), []announce.VIP{vip("203.0.113.50")}); err != nil {
			t.Fatal(err)
		}
	}
	rib := r.waitRIB(t, "two paths", func(m map[string][]ribPath) bool { return len(m["203.0.113.50/32"]) == 2 })
	if hops := []string{rib["203.0.113.50/32"][0].NextHop, rib["203.0.113.50/32"][1].NextHop}; !slices.Equal(hops, []string{"127.0.0.1", "127.0.0.2"}) {
		t.Fatalf("next hops %v", hops)
	}
	// One gateway stops serving: one path left.
	if err := b.SetVIPs(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	r.waitRIB(t, "one path", func(m map[string][]ribPath) bool { return len(m["203.0.113.50/32"]) == 1 })
}

func TestSpeakerConnectErrorInStatus(t *testing.T) {
	r := &testRouter{port: freePort(t), asn: 64513} // nothing listens there
	s := newTestSpeaker(t, 64512, r, nil)
	if err := s.SetVIPs(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := s.Status().Peers[0]
		if strings.Contains(st.Detail, "connection refused") && strings.Contains(st.Detail, "nothing listens") {
			t.Logf("status: %+v", st)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed the refused connection: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSpeakerMD5MismatchKeepsSessionDown(t *testing.T) {
	r := newTestRouter(t, 64512, routerPeer{addr: "127.0.0.1", asn: 64512, password: "right"})
	s := newTestSpeaker(t, 64512, r, func(c *Config) { c.Peers[0].Password = "wrong"; c.Peers[0].ConnectRetry = 2 * time.Second })
	if err := s.SetVIPs(context.Background(), []announce.VIP{vip("203.0.113.1")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := s.Status().Peers[0]
		if st.State == StateEstablished {
			t.Fatalf("session up despite the wrong password")
		}
		if strings.Contains(st.Detail, "TCP MD5") {
			t.Logf("status: %+v", st)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never mentioned MD5: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rib := r.rib(t); len(rib) != 0 {
		t.Fatalf("router learned %v", rib)
	}
}

func TestSpeakerMetricsRegisterOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newTestRouter(t, 64512)
	newTestSpeaker(t, 64512, r, func(c *Config) { c.Registerer = reg })
	_, err := New(Config{LocalASN: 64512, RouterID: netip.MustParseAddr("192.0.2.1"), Registerer: reg})
	if err == nil || !strings.Contains(err.Error(), "register bgp metrics") {
		t.Fatalf("second registration: %v", err)
	}
}
