package l2

import (
	"math"
	"net/netip"
	"slices"
	"testing"
)

// vipRange returns n consecutive IPv4 VIPs from 198.51.100.0 on (wrapping into
// the next /24s is fine: only the hash sees them).
func vipRange(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	a := netip.MustParseAddr("198.51.100.0")
	for i := range out {
		out[i] = a
		a = a.Next()
	}
	return out
}

func TestRendezvousSpread(t *testing.T) {
	for _, members := range [][]string{{"gw-a", "gw-b"}, {"gw-a", "gw-b", "gw-c"}, {"g1", "g2", "g3", "g4", "g5"}} {
		count := map[string]int{}
		vips := vipRange(3000)
		for _, v := range vips {
			count[ownerOf(v, members)]++
		}
		want := float64(len(vips)) / float64(len(members))
		for _, m := range members {
			dev := math.Abs(float64(count[m])-want) / want
			if dev > 0.08 {
				t.Errorf("%v: %s owns %d of %d VIPs (%.1f%% off even)", members, m, count[m], len(vips), 100*dev)
			}
		}
		t.Logf("%d members, %d VIPs: %v", len(members), len(vips), count)
	}
}

func TestRendezvousDeterministic(t *testing.T) {
	members := []string{"gw-a", "gw-b", "gw-c"}
	rev := slices.Clone(members)
	slices.Reverse(rev)
	for _, v := range vipRange(500) {
		if ownerOf(v, members) != ownerOf(v, rev) {
			t.Fatalf("%s: owner depends on member order", v)
		}
	}
	// Pinned: the hash is part of the upgrade contract (changing it moves
	// VIPs between gateways).
	if got := score("gw-a", netip.MustParseAddr("192.0.2.1")); got != pinnedScore {
		t.Fatalf("score(gw-a, 192.0.2.1) = %#x, pinned %#x: the hash changed, VIPs would move on upgrade", got, pinnedScore)
	}
	// IPv4 and its IPv4-mapped IPv6 form are one VIP.
	if score("gw-a", netip.MustParseAddr("192.0.2.1")) != score("gw-a", netip.MustParseAddr("::ffff:192.0.2.1")) {
		t.Fatal("mapped address scores differently")
	}
}

const pinnedScore = 0x739055290c390a16

func TestMinimalMovement(t *testing.T) {
	vips := vipRange(3000)
	before := []string{"gw-a", "gw-b", "gw-c"}
	// A member leaves: only its VIPs move, spread over the others.
	after := []string{"gw-a", "gw-b"}
	moved := 0
	for _, v := range vips {
		o1, o2 := ownerOf(v, before), ownerOf(v, after)
		if o1 != o2 {
			moved++
			if o1 != "gw-c" {
				t.Fatalf("%s moved from %s to %s although %s stayed", v, o1, o2, o1)
			}
		}
	}
	t.Logf("gw-c leaves: %d of %d VIPs move (all and only gw-c's)", moved, len(vips))
	// A member joins: it takes about 1/N, only from others, nothing else moves.
	grown := []string{"gw-a", "gw-b", "gw-c", "gw-d"}
	moved = 0
	for _, v := range vips {
		o1, o2 := ownerOf(v, before), ownerOf(v, grown)
		if o1 != o2 {
			moved++
			if o2 != "gw-d" {
				t.Fatalf("%s moved from %s to %s, not to the newcomer", v, o1, o2)
			}
		}
	}
	frac := float64(moved) / float64(len(vips))
	if frac < 0.2 || frac > 0.3 {
		t.Fatalf("gw-d joins: %.1f%% of VIPs move, want ≈ 25%%", 100*frac)
	}
	t.Logf("gw-d joins: %d of %d VIPs move (%.1f%%, all to gw-d)", moved, len(vips), 100*frac)
}

func set(as ...netip.Addr) map[netip.Addr]bool { return setOf(as) }

// twoVIPs returns VIPs x (won by a over b) and y (won by b over a).
func twoVIPs(t *testing.T, a, b string) (x, y netip.Addr) {
	for _, v := range vipRange(100) {
		switch ownerOf(v, []string{a, b}) {
		case a:
			if !x.IsValid() {
				x = v
			}
		case b:
			if !y.IsValid() {
				y = v
			}
		}
	}
	if !x.IsValid() || !y.IsValid() {
		t.Fatal("no split")
	}
	return x, y
}

func TestDecide(t *testing.T) {
	x, y := twoVIPs(t, "a", "b") // a wins x, b wins y
	both := sortedAddrs(set(x, y))
	peerB := func(mod func(*peerView)) []peerView {
		p := peerView{Name: "b", Alive: true, Known: true, Ready: true, VIPs: set(x, y), Claimed: set(y)}
		if mod != nil {
			mod(&p)
		}
		return []peerView{p}
	}
	for _, tc := range []struct {
		name    string
		v       view
		claim   []netip.Addr
		waiting map[netip.Addr]string
	}{
		{"alone: everything", view{Self: "a", Ready: true, VIPs: both}, both, nil},
		{"not ready: nothing", view{Self: "a", Ready: false, VIPs: both, Claimed: set(x)}, nil, nil},
		{"split with b", view{Self: "a", Ready: true, VIPs: both, Peers: peerB(nil)}, []netip.Addr{x}, nil},
		{"b dead: take y", view{Self: "a", Ready: true, VIPs: both, Claimed: set(x),
			Peers: peerB(func(p *peerView) { p.Alive = false })}, both, nil},
		{"b not ready: take y once b released it", view{Self: "a", Ready: true, VIPs: both,
			Peers: peerB(func(p *peerView) { p.Ready, p.Claimed = false, nil })}, both, nil},
		{"b does not serve y: take it", view{Self: "a", Ready: true, VIPs: both,
			Peers: peerB(func(p *peerView) { p.VIPs, p.Claimed = set(x), nil })}, both, nil},
		{"we win x but b still answers: wait", view{Self: "a", Ready: true, VIPs: both,
			Peers: peerB(func(p *peerView) { p.Claimed = set(x, y) })}, nil, map[netip.Addr]string{x: "b"}},
		{"b's state unknown: claim nothing new", view{Self: "a", Ready: true, VIPs: both,
			Peers: peerB(func(p *peerView) { p.Known, p.Ready, p.VIPs, p.Claimed = false, false, nil, nil })},
			nil, map[netip.Addr]string{x: "b", y: "b"}},
		{"b's state unknown: keep what we hold", view{Self: "a", Ready: true, VIPs: both, Claimed: set(x, y),
			Peers: peerB(func(p *peerView) { p.Known, p.Ready, p.VIPs, p.Claimed = false, false, nil, nil })}, both, nil},
		{"we hold y, b wins it: release", view{Self: "a", Ready: true, VIPs: both, Claimed: set(x, y),
			Peers: peerB(func(p *peerView) { p.Claimed = nil })}, []netip.Addr{x}, nil},
		{"both claim x after a partition, a scores higher: a keeps", view{Self: "a", Ready: true, VIPs: both, Claimed: set(x),
			Peers: peerB(func(p *peerView) { p.Claimed = set(x, y) })}, []netip.Addr{x}, nil},
		{"we serve nothing", view{Self: "a", Ready: true, Claimed: set(x), Peers: peerB(nil)}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(tc.v)
			if !slices.Equal(d.Claim, tc.claim) {
				t.Fatalf("claim %v, want %v", d.Claim, tc.claim)
			}
			if len(d.Waiting) != len(tc.waiting) {
				t.Fatalf("waiting %v, want %v", d.Waiting, tc.waiting)
			}
			for k, v := range tc.waiting {
				if d.Waiting[k] != v {
					t.Fatalf("waiting %v, want %v", d.Waiting, tc.waiting)
				}
			}
		})
	}
}

// TestDecideYieldsToHigherClaimant: split brain after a partition heals,
// seen from the lower-scoring side: it yields although it still thinks it
// is the winner (its view of b is stale).
func TestDecideYieldsToHigherClaimant(t *testing.T) {
	x, _ := twoVIPs(t, "b", "a") // b scores higher on x
	v := view{Self: "a", Ready: true, VIPs: []netip.Addr{x}, Claimed: set(x),
		Peers: []peerView{{Name: "b", Alive: true, Known: true, Ready: true, VIPs: set(), Claimed: set(x)}}}
	if d := decide(v); len(d.Claim) != 0 || d.Waiting[x] != "b" {
		t.Fatalf("did not yield: %+v", d)
	}
}

// TestDecideHandoverNeverOverlaps simulates the return of an old owner step
// by step with both sides' decide: at no step do both claim a VIP.
func TestDecideHandoverNeverOverlaps(t *testing.T) {
	vips := vipRange(50)
	type node struct {
		name    string
		ready   bool
		claimed map[netip.Addr]bool
	}
	a := &node{"a", false, set()}       // returning, settling
	b := &node{"b", true, set(vips...)} // held everything while a was away
	pv := func(n *node) peerView {
		return peerView{Name: n.name, Alive: true, Known: true, Ready: n.ready, VIPs: set(vips...), Claimed: n.claimed}
	}
	step := func(n, other *node) {
		d := decide(view{Self: n.name, Ready: n.ready, VIPs: vips, Claimed: n.claimed, Peers: []peerView{pv(other)}})
		n.claimed = set(d.Claim...)
		for v := range n.claimed {
			if other.claimed[v] {
				t.Fatalf("%s and %s both claim %s", n.name, other.name, v)
			}
		}
	}
	step(a, b) // settling: nothing
	step(b, a)
	a.ready = true
	step(a, b) // a wins some but b still holds them: waits
	if len(a.claimed) != 0 {
		t.Fatalf("a claimed %d VIPs before b released", len(a.claimed))
	}
	step(b, a) // b sees a ready: releases a's share
	step(a, b) // a sees the release: claims
	for _, v := range vips {
		want := ownerOf(v, []string{"a", "b"})
		if (want == "a") != a.claimed[v] || (want == "b") != b.claimed[v] {
			t.Fatalf("%s: a=%v b=%v, owner should be %s", v, a.claimed[v], b.claimed[v], want)
		}
	}
	t.Logf("handover: a took %d of %d VIPs in two exchanges, never both", len(a.claimed), len(vips))
}

// ownerOf returns the rendezvous winner for vip among names (no eligibility
// rules): what the ownership spread looks like when everyone is ready.
func ownerOf(vip netip.Addr, names []string) string {
	best := ""
	for _, n := range names {
		if best == "" || beats(n, best, vip) {
			best = n
		}
	}
	return best
}
