package l2

import (
	"hash/fnv"
	"net/netip"
	"slices"
)

// Ownership is decided by rendezvous (highest-random-weight) hashing, as
// MetalLB does: every gateway scores every (member, VIP) pair with the same
// hash and the eligible member with the highest score owns the VIP. Every
// gateway computes the same answer from the same membership without talking
// to anyone, VIPs spread evenly, and a member joining or leaving moves only
// the VIPs it wins or held (about 1/N of them), never shuffles the rest.
//
// Changing this function moves VIPs between gateways on upgrade: keep it.

// score is the rendezvous weight of member for vip.
func score(member string, vip netip.Addr) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	b := vip.Unmap().As16()
	h.Write(b[:])
	// FNV alone mixes the last bytes poorly; a splitmix64 finaliser spreads
	// neighbouring addresses over the whole range.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// beats orders candidates: higher score wins, the name breaks (astronomically
// unlikely) ties so the order is total.
func beats(a, b string, vip netip.Addr) bool {
	sa, sb := score(a, vip), score(b, vip)
	if sa != sb {
		return sa > sb
	}
	return a > b
}

// peerView is what this gateway knows of another member.
type peerView struct {
	Name string
	// Alive: memberlist has not declared it dead or left (suspect counts as
	// alive: it may still be answering).
	Alive bool
	// Known: its state has arrived. An alive member whose state is unknown
	// might be answering for anything, so nothing new is claimed until it
	// is known (it is asked for it until it answers).
	Known   bool
	Ready   bool
	VIPs    map[netip.Addr]bool // VIPs it can serve
	Claimed map[netip.Addr]bool // VIPs it answers for right now
}

// view is the input of decide: everything this gateway knows.
type view struct {
	Self    string
	Ready   bool                // this gateway may own VIPs (healthy, uplink up, settled)
	VIPs    []netip.Addr        // VIPs this gateway can serve
	Claimed map[netip.Addr]bool // VIPs this gateway answers for now
	// Fresh VIPs are those for which this gateway has been eligible (ready
	// and serving them) for less than the claim delay: the others may not
	// have heard yet, so they are not claimed yet (rule 5).
	Fresh map[netip.Addr]bool
	Peers []peerView
	// Key maps a VIP to the address whose rendezvous score decides its
	// owner (a floating source address: the VIPs of its family follow it);
	// a VIP not in Key is its own key.
	Key map[netip.Addr]netip.Addr
}

// key is the rendezvous key of vip.
func (v view) key(vip netip.Addr) netip.Addr {
	if k, ok := v.Key[vip]; ok {
		return k
	}
	return vip
}

// decision is what decide concludes.
type decision struct {
	Claim []netip.Addr // VIPs to answer for now, sorted
	// Owner is the rendezvous winner of each of our VIPs among eligible
	// members ("" when we are not ready and nobody else serves it).
	Owner map[netip.Addr]string
	// Waiting maps a VIP we win but do not claim yet to the member still
	// answering for it: the handover waits for its release.
	Waiting map[netip.Addr]string
}

// decide computes the VIPs to answer for. The rules, which together give at
// most one answering gateway per VIP whenever members agree on who is alive:
//
//  1. Eligible members for a VIP: this gateway when ready, and every alive
//     peer with known state that is ready and serves the VIP.
//  2. Only the highest-scoring eligible member may own the VIP.
//  3. A VIP not yet claimed is claimed only when no alive peer claims it and
//     no alive peer's state is unknown: a new owner waits for the old one to
//     release (the old owner sees the new one become eligible, stops
//     answering, and only then publishes its release).
//  4. A VIP claimed by us is released as soon as we are not the winner, or
//     an alive peer with a higher score also claims it (split brain after a
//     partition heals: exactly one side yields, whatever each side believes).
//  5. A VIP is claimed only once our eligibility for it (ready, serving it)
//     has been published for the claim delay. Without this, two gateways
//     becoming eligible at the same moment (start-up, a VIP added on all at
//     once, a partition healing) would each decide before hearing of the
//     other and both claim. With a delay longer than two message
//     propagations, whichever decides first is heard by the other before
//     the other may decide, and rule 3 turns the rest into a handover.
//
// Dead members' claims are ignored: they cannot answer any more.
func decide(v view) decision {
	d := decision{Owner: map[netip.Addr]string{}, Waiting: map[netip.Addr]string{}}
	unknown := ""
	for _, p := range v.Peers {
		if p.Alive && !p.Known {
			unknown = p.Name
			break
		}
	}
	for _, vip := range v.VIPs {
		k := v.key(vip)
		winner := ""
		if v.Ready {
			winner = v.Self
		}
		for _, p := range v.Peers {
			if p.Alive && p.Known && p.Ready && p.VIPs[vip] && (winner == "" || beats(p.Name, winner, k)) {
				winner = p.Name
			}
		}
		d.Owner[vip] = winner
		if winner != v.Self {
			continue
		}
		// Another alive member answering for vip right now, the highest-scoring one if several.
		holder := ""
		for _, p := range v.Peers {
			if p.Alive && p.Known && p.Claimed[vip] && (holder == "" || beats(p.Name, holder, k)) {
				holder = p.Name
			}
		}
		switch {
		case v.Claimed[vip]:
			if holder != "" && beats(holder, v.Self, k) {
				d.Waiting[vip] = holder // rule 4: yield
				continue
			}
			d.Claim = append(d.Claim, vip)
		case holder != "":
			d.Waiting[vip] = holder // rule 3: wait for the release
		case unknown != "":
			d.Waiting[vip] = unknown
		case v.Fresh[vip]:
			d.Waiting[vip] = v.Self // rule 5: our eligibility is still spreading
		default:
			d.Claim = append(d.Claim, vip)
		}
	}
	slices.SortFunc(d.Claim, netip.Addr.Compare)
	return d
}

// sortedAddrs returns the keys of a set, sorted.
func sortedAddrs(s map[netip.Addr]bool) []netip.Addr {
	out := make([]netip.Addr, 0, len(s))
	for a, ok := range s {
		if ok {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
