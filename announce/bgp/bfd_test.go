package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce/bfdd"
	"github.com/edgelb/edgelb/lb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// BFD Down resets the BGP session at once (the hold time is 9 s here; the
// session is back in ~1 s, after connectRetry).
func TestSpeakerBFDDownResetsSession(t *testing.T) {
	if testing.Short() {
		t.Skip("session test")
	}
	r := newTestRouter(t, 64513, routerPeer{addr: "127.0.0.1", asn: 64512})
	fake := bfdd.NewFake()
	reg := prometheus.NewRegistry()
	s := newTestSpeaker(t, 64512, r, func(c *Config) {
		c.BFD, c.BFDPoll, c.Registerer = fake, 10*time.Millisecond, reg
		c.Peers[0].BFD = &BFD{Passive: true}
	})
	a := netip.MustParseAddr("127.0.0.1")
	if got := fake.Sessions(); len(got) != 1 || got[0].Peer != a || got[0].RxInterval != 300*time.Millisecond ||
		got[0].Multiplier != 3 || !got[0].Passive || got[0].Multihop {
		t.Fatalf("bfd sessions %+v", got)
	}
	if err := s.SetVIPs(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, s)
	fake.SetStatus(a, bfdd.StateUp)
	waitPeer(t, s, "bfd up", func(p PeerStatus) bool { return p.BFD != nil && p.BFD.State == bfdd.StateUp })
	fake.SetStatus(a, bfdd.StateDown)
	p := waitPeer(t, s, "bgp session reset by BFD down", func(p PeerStatus) bool { return p.State != StateEstablished })
	if p.BFD.State != bfdd.StateDown || p.BFD.Downs != 1 || p.BFD.LastDown == "" {
		t.Fatalf("after BFD down: %+v %+v", p, p.BFD)
	}
	if v := testutil.ToFloat64(s.m.bfdTransitions.WithLabelValues("router", "down")); v != 1 {
		t.Fatalf("edgelb_bgp_bfd_transitions_total{to=down} = %v", v)
	}
	if v := testutil.ToFloat64(s.m.bfdUp.WithLabelValues("router")); v != 0 {
		t.Fatalf("edgelb_bgp_bfd_session_up = %v", v)
	}
	// BFD does not hold the session down: it comes back after connectRetry.
	waitPeer(t, s, "session back", func(p PeerStatus) bool { return p.State == StateEstablished && p.Established == 2 })
	if st := s.Status(); st.Peers[0].BFD == nil || st.Peers[0].BFD.Detect != "300ms x 3" {
		t.Fatalf("status: %+v", st.Peers[0])
	}
}

// Where bfdd cannot run (bfdd.Unavailable), BGP still comes up and every
// BFD peer says so, with the reason, in its status and Detail; the BFD
// gauge stays 0 (its alert fires).
func TestSpeakerBFDUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("session test")
	}
	r := newTestRouter(t, 64513, routerPeer{addr: "127.0.0.1", asn: 64512})
	why := fmt.Errorf("%w: edgelb runs as uid 61234, which /etc/passwd does not know", bfdd.ErrPrivileges)
	reg := prometheus.NewRegistry()
	s := newTestSpeaker(t, 64512, r, func(c *Config) {
		c.BFD, c.BFDPoll, c.Registerer = bfdd.Unavailable(why), 10*time.Millisecond, reg
		c.Peers[0].BFD = &BFD{}
	})
	if err := s.SetVIPs(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, s)
	p := waitPeer(t, s, "bfd unavailable", func(p PeerStatus) bool { return p.BFD != nil && p.BFD.State == bfdd.StateUnavailable })
	detail := s.Status().Peers[0].Detail // what the page and edgelb status show
	if p.BFD.Diagnostic != why.Error() || !strings.Contains(detail, "; BFD unavailable (300ms x 3): "+why.Error()) {
		t.Fatalf("peer %+v, BFD %+v, detail %q", p, p.BFD, detail)
	}
	if v := testutil.ToFloat64(s.m.bfdUp.WithLabelValues("router")); v != 0 {
		t.Fatalf("edgelb_bgp_bfd_session_up = %v", v)
	}
	if p.State != StateEstablished {
		t.Fatalf("BGP session %s, want established without BFD", p.State)
	}
	t.Logf("detail: %s", detail)
}

func TestBFDConfig(t *testing.T) {
	base := Config{LocalASN: 64512, RouterID: netip.MustParseAddr("192.0.2.1"),
		Peers: []Peer{{Address: netip.MustParseAddr("192.0.2.2"), ASN: 64513, MultihopTTL: 3, BFD: &BFD{}}}}
	err := base.validate()
	var fe *lb.FieldError
	if !errors.As(err, &fe) || fe.Field != "peers[0].bfd" {
		t.Fatalf("BFD without a runner: %v", err)
	}
	base.BFD = bfdd.NewFake()
	if err := base.validate(); err == nil || !strings.Contains(err.Error(), "local address") {
		t.Fatalf("multihop BFD without sourceAddress: %v", err)
	}
	base.Peers[0].SourceAddress = netip.MustParseAddr("192.0.2.1")
	if err := base.validate(); err != nil {
		t.Fatal(err)
	}
	s := base.Peers[0].bfdSession()
	if !s.Multihop || s.MinTTL != 253 || s.Local != base.Peers[0].SourceAddress {
		t.Fatalf("multihop session %+v", s)
	}
}

func waitPeer(t *testing.T, s *Speaker, what string, ok func(PeerStatus) bool) PeerStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		p := s.Peers()[0]
		if ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached: %+v", what, p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
