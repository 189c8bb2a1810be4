package l2

// What the keeper knows of the other members, and how memberlist's events
// change it. Runs on the keeper's goroutine only.

import (
	"net/netip"
	"time"

	"github.com/hashicorp/memberlist"
)

// peer is what we know of another member.
type peer struct {
	node       memberlist.Node
	alive      bool
	left       bool // left gracefully (vs failed)
	since      time.Time
	state      *nodeState // never modified once stored: snapshots share it
	vips       map[netip.Addr]bool
	claimed    map[netip.Addr]bool
	lastGen    uint64    // highest gen seen, kept across death so late messages stay stale
	needsState bool      // joined (or asked) since we last sent it our state
	askState   bool      // we have no state of it: ask with our next message
	askedAt    time.Time // last time we asked it for its state
	warned     bool      // "no state" warning logged for this life
}

func (k *keeper) peer(name string) *peer {
	p := k.peers[name]
	if p == nil {
		p = &peer{node: memberlist.Node{Name: name}, since: time.Now()}
		k.peers[name] = p
	}
	return p
}

// memberState stores a member's state if it is newer than what we have; it
// reports whether to decide again.
func (k *keeper) memberState(s nodeState) bool {
	p := k.peer(s.Name)
	if s.WantReply {
		p.needsState = true // answered by the next reconcile
	}
	// Older than what we have seen: late, drop it. The same generation is
	// taken only to refill the state of a live member we had dropped (it was
	// falsely declared dead and is answering our request); from a member we
	// believe dead it is a message of the dead process still in flight.
	if s.Gen < p.lastGen || (s.Gen == p.lastGen && (p.state != nil || !p.alive)) {
		k.a.log.Debug("stale member state ignored", "member", s.Name, "gen", s.Gen, "last", p.lastGen)
		return s.WantReply
	}
	s.WantReply = false
	p.lastGen = s.Gen
	p.state = &s
	p.vips, p.claimed = setOf(s.VIPs), setOf(s.Claimed)
	return true
}

// memberAlive: memberlist sees n alive (joined, or updated).
func (k *keeper) memberAlive(n memberlist.Node) {
	p := k.peer(n.Name)
	p.node = n
	if p.alive {
		return
	}
	// Send it our state, and ask for its own if we have none: after we
	// declared it dead (and dropped its state) it may come back without
	// noticing anything, and would not send its state on its own.
	p.alive, p.left, p.since, p.needsState = true, false, time.Now(), true
	p.askState, p.askedAt, p.warned = p.state == nil, time.Time{}, false
	k.a.log.Info("member alive", "member", n.Name, "address", n.Address())
}

// memberGone: memberlist declared n dead, or it left.
func (k *keeper) memberGone(n memberlist.Node) {
	p := k.peer(n.Name)
	p.alive, p.left, p.since = false, n.State == memberlist.StateLeft, time.Now()
	// Its claims die with it: a failed gateway answers nothing. lastGen is
	// kept so a message from the dead process still in flight is ignored.
	p.state, p.vips, p.claimed = nil, nil, nil
}

func setOf(l []netip.Addr) map[netip.Addr]bool {
	m := make(map[netip.Addr]bool, len(l))
	for _, a := range l {
		m[a] = true
	}
	return m
}
