package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"

	"github.com/edgelb/edgelb/lab/ports"
)

// testRouter is a second GoBGP server (in the same process, so tests that
// use one must not run in parallel: GoBGP keeps route-selection options in
// package variables that StartBgp writes) standing in for the router: it
// listens on 127.0.0.1:port and accepts the given neighbours passively.
type testRouter struct {
	srv  *server.BgpServer
	port uint16
	asn  uint32
}

type quietLog struct{}

func (quietLog) Panic(m string, f gobgplog.Fields) { panic(m) }
func (quietLog) Fatal(m string, f gobgplog.Fields) { panic(m) }
func (quietLog) Error(string, gobgplog.Fields)     {}
func (quietLog) Warn(string, gobgplog.Fields)      {}
func (quietLog) Info(string, gobgplog.Fields)      {}
func (quietLog) Debug(string, gobgplog.Fields)     {}
func (quietLog) SetLevel(gobgplog.LogLevel)        {}
func (quietLog) GetLevel() gobgplog.LogLevel       { return gobgplog.ErrorLevel }

// freePort: below the ephemeral range (lab/ports says why).
func freePort(t testing.TB) uint16 { return uint16(ports.MustFree(t)) }

// routerPeer is a neighbour of the test router.
type routerPeer struct {
	addr     string // our speaker's source address, e.g. 127.0.0.1
	asn      uint32
	password string
}

func newTestRouter(t testing.TB, asn uint32, peers ...routerPeer) *testRouter {
	t.Helper()
	return newTestRouterOn(t, "127.0.0.1", asn, peers...)
}

// newTestRouterOn is newTestRouter listening on another loopback address
// (a second router: the speaker's peers have distinct addresses).
func newTestRouterOn(t testing.TB, listen string, asn uint32, peers ...routerPeer) *testRouter {
	t.Helper()
	r := &testRouter{srv: server.NewBgpServer(server.LoggerOption(quietLog{})), port: freePort(t), asn: asn}
	go r.srv.Serve()
	ctx := context.Background()
	if err := r.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: asn, RouterId: "192.0.2.254", ListenPort: int32(r.port), ListenAddresses: []string{listen},
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.srv.StopBgp(context.Background(), &api.StopBgpRequest{}) })
	for _, p := range peers {
		if err := r.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
			Conf:      &api.PeerConf{NeighborAddress: p.addr, PeerAsn: p.asn, AuthPassword: p.password},
			Transport: &api.Transport{PassiveMode: true},
			Timers:    &api.Timers{Config: &api.TimersConfig{HoldTime: 9, KeepaliveInterval: 3}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// ribPath is one path in the router's RIB, decoded.
type ribPath struct {
	NextHop     string
	Communities []string
	Large       []string
	LocalPref   uint32
	HasLP       bool
}

// rib returns prefix → paths (sorted by next hop) for both unicast families.
func (r *testRouter) rib(t testing.TB) map[string][]ribPath {
	t.Helper()
	out := map[string][]ribPath{}
	for _, fam := range []*api.Family{
		{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST},
		{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST},
	} {
		err := r.srv.ListPath(context.Background(), &api.ListPathRequest{TableType: api.TableType_GLOBAL, Family: fam},
			func(d *api.Destination) {
				for _, p := range d.Paths {
					out[d.Prefix] = append(out[d.Prefix], decodePath(t, p))
				}
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ps := range out {
		sort.Slice(ps, func(i, j int) bool { return ps[i].NextHop < ps[j].NextHop })
	}
	return out
}

func decodePath(t testing.TB, p *api.Path) ribPath {
	attrs, err := apiutil.GetNativePathAttributes(p)
	if err != nil {
		t.Fatal(err)
	}
	var rp ribPath
	for _, a := range attrs {
		switch a := a.(type) {
		case *bgp.PathAttributeNextHop:
			rp.NextHop = a.Value.String()
		case *bgp.PathAttributeMpReachNLRI:
			rp.NextHop = a.Nexthop.String()
		case *bgp.PathAttributeCommunities:
			for _, c := range a.Value {
				rp.Communities = append(rp.Communities, Community(c).String())
			}
		case *bgp.PathAttributeLargeCommunities:
			for _, c := range a.Values {
				rp.Large = append(rp.Large, fmt.Sprintf("%d:%d:%d", c.ASN, c.LocalData1, c.LocalData2))
			}
		case *bgp.PathAttributeLocalPref:
			rp.LocalPref, rp.HasLP = a.Value, true
		}
	}
	return rp
}

// waitRIB polls the router until cond holds (10 s at most).
func (r *testRouter) waitRIB(t testing.TB, what string, cond func(map[string][]ribPath) bool) map[string][]ribPath {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		rib := r.rib(t)
		if cond(rib) {
			return rib
		}
		if time.Now().After(deadline) {
			t.Fatalf("router RIB never showed %s; it has %v", what, rib)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func prefixes(rib map[string][]ribPath) []string {
	out := make([]string, 0, len(rib))
	for p := range rib {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// newTestSpeaker starts a Speaker peering with the router over loopback.
func newTestSpeaker(t testing.TB, asn uint32, r *testRouter, mod func(*Config)) *Speaker {
	t.Helper()
	cfg := Config{
		LocalASN: asn, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Peers: []Peer{{Name: "router", Address: netip.MustParseAddr("127.0.0.1"), ASN: r.asn, Port: r.port,
			HoldTime: 9 * time.Second, ConnectRetry: time.Second}},
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close(true)
		// Close(false) leaves GoBGP running on purpose (until process exit); a test must stop it.
		_ = s.srv.StopBgp(context.Background(), &api.StopBgpRequest{})
	})
	return s
}

// testWriter sends slog output to t.Log (and stops after the test ends).
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a log line racing the test's end
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func waitEstablished(t testing.TB, s *Speaker) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		ok := true
		for _, p := range s.Peers() {
			ok = ok && p.State == StateEstablished
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions not established: %+v", s.Peers())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
