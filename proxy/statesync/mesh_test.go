package statesync

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

func TestPairPortsThreeGateways(t *testing.T) {
	a, b, c := a4("192.168.77.1"), a4("192.168.77.2"), a4("192.168.77.3")
	for _, tc := range []struct {
		self  netip.Addr
		peers []netip.Addr
		want  []uint16
	}{
		// Pairs in order: (a,b) 3780, (a,c) 3781, (b,c) 3782.
		{a, []netip.Addr{b, c}, []uint16{3780, 3781}},
		{b, []netip.Addr{c, a}, []uint16{3782, 3780}},
		{c, []netip.Addr{a, b}, []uint16{3781, 3782}},
		{a, []netip.Addr{b}, []uint16{3780}}, // two gateways: the base port, as before the mesh
	} {
		got, err := PairPorts(tc.self, tc.peers, 3780)
		if err != nil || len(got) != len(tc.want) {
			t.Fatalf("PairPorts(%s, %v) = %v, %v", tc.self, tc.peers, got, err)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("PairPorts(%s, %v)[%d] = %d, want %d", tc.self, tc.peers, i, got[i], tc.want[i])
			}
		}
	}
}

// Every gateway of a random fleet, listing the others in a random order,
// computes for each pair the port its peer computes, and no two pairs share
// one: the property that lets the ports go unconfigured.
func TestPairPortsAgreeAtBothEnds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := 2 + r.IntN(15)
		seen := map[netip.Addr]bool{}
		var fleet []netip.Addr
		for len(fleet) < n {
			var a netip.Addr
			if round%2 == 0 {
				a = netip.AddrFrom4([4]byte{10, 0, byte(r.IntN(3)), byte(r.IntN(256))})
			} else {
				var b [16]byte
				b[0], b[1], b[15] = 0xfd, 0, byte(r.IntN(256))
				a = netip.AddrFrom16(b)
			}
			if !seen[a] {
				seen[a] = true
				fleet = append(fleet, a)
			}
		}
		port := map[[2]netip.Addr]uint16{}
		for _, self := range fleet {
			var peers []netip.Addr
			for _, p := range fleet {
				if p != self {
					peers = append(peers, p)
				}
			}
			r.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
			ports, err := PairPorts(self, peers, 4000)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range peers {
				k := [2]netip.Addr{self, p}
				if p.Less(self) {
					k = [2]netip.Addr{p, self}
				}
				if q, ok := port[k]; ok && q != ports[i] {
					t.Fatalf("fleet %v: pair %v gets %d at one end and %d at the other", fleet, k, q, ports[i])
				}
				port[k] = ports[i]
			}
		}
		pairs := n * (n - 1) / 2
		used := map[uint16]bool{}
		for k, p := range port {
			if p < 4000 || int(p) >= 4000+pairs || used[p] {
				t.Fatalf("fleet %v: pair %v port %d outside [4000, %d) or taken twice", fleet, k, p, 4000+pairs)
			}
			used[p] = true
		}
		if len(port) != pairs {
			t.Fatalf("fleet of %d: %d pairs, want %d", n, len(port), pairs)
		}
	}
}

func TestPairPortsRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		self  netip.Addr
		peers []netip.Addr
		base  uint16
	}{
		"self as peer":   {a4("10.0.0.1"), []netip.Addr{a4("10.0.0.1")}, 3780},
		"peer twice":     {a4("10.0.0.1"), []netip.Addr{a4("10.0.0.2"), a4("10.0.0.2")}, 3780},
		"no room":        {a4("10.0.0.1"), []netip.Addr{a4("10.0.0.2"), a4("10.0.0.3")}, 65534},
		"no own address": {netip.Addr{}, []netip.Addr{a4("10.0.0.2")}, 3780},
	} {
		if _, err := PairPorts(tc.self, tc.peers, tc.base); !errors.Is(err, ErrOptions) {
			t.Errorf("%s: %v, want ErrOptions", name, err)
		}
	}
}

// The mesh's status is its links' summed: the internal cache is one table
// seen by every link (its largest count, not the sum), the peer silence the
// most silent peer's, the role primary if any link is one, running only if
// every link is; each link stays visible in Links.
func TestMeshStatusSumsLinks(t *testing.T) {
	self := a4("10.0.0.1")
	// One clock reading for both stamps: the silence is exactly the given one,
	// however long the test is descheduled between two reads of the clock.
	now := time.Now()
	link := func(peer string, port uint16, running bool, owned int, st Stats, silence time.Duration) *Conntrackd {
		o := Options{Interface: "eth2", Address: self, Peer: a4(peer), Port: port}
		c := &Conntrackd{opts: o, running: running, owned: owned, stats: st, statsAt: now,
			heardAt: now.Add(-silence), lastPacket: now.Add(-silence), starts: 2, clock: func() time.Time { return now }}
		return c
	}
	m := &Mesh{links: []*Conntrackd{
		link("10.0.0.2", 3780, true, 1, Stats{Internal: 100, External: 7, SentPackets: 50, RecvPackets: 5, Unacked: 3, Lost: 1}, 0),
		link("10.0.0.3", 3781, false, 1, Stats{Internal: 98, External: 2, SentPackets: 40, RecvPackets: 4, Unacked: 4}, 12*time.Second),
	}}
	st := m.Status()
	if st.Running || st.Role != "primary" || st.Restarts != 2 {
		t.Errorf("running %v role %q restarts %d, want false primary 2", st.Running, st.Role, st.Restarts)
	}
	if s := st.Stats; s.Internal != 100 || s.External != 9 || s.SentPackets != 90 || s.RecvPackets != 9 || s.Unacked != 7 || s.Lost != 1 {
		t.Errorf("stats %+v", s)
	}
	if st.PeerSilence != 12*time.Second || !st.LastPacket.Equal(now.Add(-12*time.Second)) {
		t.Errorf("silence %v since %v, want the silent peer's 12 s", st.PeerSilence, st.LastPacket)
	}
	// The silent link's conntrackd is down: its peer is unknown, the
	// other's alive; the mesh shows the worse.
	if st.Links[0].PeerState != PeerAlive || st.Links[1].PeerState != PeerUnknown || st.PeerState != PeerUnknown {
		t.Errorf("peer states %q %q mesh %q, want alive unknown unknown", st.Links[0].PeerState, st.Links[1].PeerState, st.PeerState)
	}
	if len(st.Links) != 2 || st.Links[1].Peers[0] != "10.0.0.3" || st.Links[1].Running || len(st.Peers) != 2 {
		t.Errorf("links %+v peers %v", st.Links, st.Peers)
	}
	if want := "udp 10.0.0.1 → 10.0.0.2:3780 on eth2, udp 10.0.0.1 → 10.0.0.3:3781 on eth2"; st.Channel != want {
		t.Errorf("channel %q, want %q", st.Channel, want)
	}
}
