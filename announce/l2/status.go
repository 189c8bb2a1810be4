package l2

// Snapshots: what the keeper publishes for readers on other goroutines
// (Status, Owned, memberlist's push/pull, the send retries). A snapshot is
// never modified once published; the keeper builds a new one after every
// round of events.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/hashicorp/memberlist"
)

type snapshot struct {
	owned   []netip.Addr // what the responders answer for, sorted
	closing bool
	self    nodeState // last published to the members
	selfMsg []byte    // self, marshalled (memberlist's push/pull)
	vips    int       // how many VIPs we serve
	waiting map[netip.Addr]string
	peers   []peerSnap // sorted by name
}

type peerSnap struct {
	name        string
	node        memberlist.Node
	alive, left bool
	since       time.Time
	state       *nodeState // nil: not received (a received state is never modified)
}

// publish makes the keeper's current state visible to readers.
func (k *keeper) publish() {
	s := &snapshot{owned: k.owned, closing: k.closing, self: k.self, selfMsg: k.selfMsg,
		vips: len(k.vips), waiting: k.waiting, peers: make([]peerSnap, 0, len(k.peers))}
	for name, p := range k.peers {
		s.peers = append(s.peers, peerSnap{name: name, node: p.node, alive: p.alive, left: p.left, since: p.since, state: p.state})
	}
	slices.SortFunc(s.peers, func(x, y peerSnap) int { return strings.Compare(x.name, y.name) })
	k.a.snap.Store(s)
}

// alive reports whether the last snapshot has member name alive.
func (s *snapshot) alive(name string) bool {
	for _, p := range s.peers {
		if p.name == name {
			return p.alive
		}
	}
	return false
}

// Status implements announce.Reporter: the owned VIPs, then this gateway
// and every member with its state.
func (a *Announcer) Status() announce.Status {
	var suspect map[string]bool
	if a.ml != nil {
		suspect = map[string]bool{}
		for _, n := range a.ml.Members() {
			if n.State == memberlist.StateSuspect {
				suspect[n.Name] = true
			}
		}
	}
	now := time.Now()
	s := a.snap.Load()
	st := announce.Status{Kind: "l2"}
	st.Owners = map[string]string{}
	for _, o := range s.owned {
		st.Owned = append(st.Owned, o.String())
		st.Owners[o.String()] = a.name
	}
	self := announce.PeerState{Name: a.name, Address: a.advertise, State: "alive",
		Detail: "self, " + readiness(s.self, s.closing) + fmt.Sprintf(", serves %d, owns %d", s.vips, len(s.owned))}
	if len(s.waiting) > 0 {
		var w []string
		for _, vip := range sortedKeys(s.waiting) {
			w = append(w, fmt.Sprintf("%s (held by %s)", vip, s.waiting[vip]))
		}
		self.Detail += "; waiting to take " + strings.Join(w, ", ")
	}
	st.Peers = append(st.Peers, self)
	for _, p := range s.peers {
		ps := announce.PeerState{Name: p.name, Address: p.node.Address(), Since: p.since}
		if last := a.acks.lastAck(p.name); !last.IsZero() {
			ps.LastPacket, ps.Silence = last, max(0, now.Sub(last))
		}
		switch {
		case p.alive && suspect[p.name]:
			ps.State = "suspect"
		case p.alive:
			ps.State = "alive"
		case p.left:
			ps.State = "left"
		default:
			ps.State = "dead"
		}
		switch {
		case !p.alive:
			ps.Detail = "since " + p.since.Format(time.RFC3339)
		case p.state == nil:
			ps.Detail = "state not received yet"
		default:
			ps.Detail = readiness(*p.state, false) + fmt.Sprintf(", serves %d, owns %d", len(p.state.VIPs), len(p.state.Claimed))
			for _, v := range p.state.Claimed {
				st.Owners[v.String()] = p.name
			}
		}
		st.Peers = append(st.Peers, ps)
	}
	return st
}

func readiness(s nodeState, closing bool) string {
	var why []string
	if closing {
		why = append(why, "closing")
	} else if !s.Healthy {
		why = append(why, "dataplane unhealthy")
	}
	if !s.Uplink {
		why = append(why, "uplink down")
	}
	if !s.Settled && s.Healthy && s.Uplink {
		why = append(why, "settling")
	}
	if len(why) == 0 {
		return "ready"
	}
	return "not ready (" + strings.Join(why, ", ") + ")"
}

func sortedKeys(m map[netip.Addr]string) []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
