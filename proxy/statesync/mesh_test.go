package statesync

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
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
