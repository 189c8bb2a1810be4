package l2

// Applying decide's verdict: handover hook, responders, then the state
// published to the other members. Runs on the keeper's goroutine only.

import (
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// stateRetry is how often a live member whose state we lack is asked again.
const stateRetry = 300 * time.Millisecond

// reconcile decides, applies the decision to the responders, then publishes
// the resulting state. The order is the handover's safety: a VIP released
// here is silent on the wire (SetOwned returned) before any other gateway can
// learn of the release, and so before it can claim the VIP.
func (k *keeper) reconcile() error {
	a := k.a
	d := decide(k.view(time.Now()))

	var errs []error
	next := map[netip.Addr]bool{}
	for _, c := range d.Claim {
		next[c] = true
	}
	if !equalSets(next, k.claimed) {
		var gained, released []netip.Addr
		for _, c := range d.Claim {
			if !k.claimed[c] {
				gained = append(gained, c)
			}
		}
		for _, c := range k.owned {
			if !next[c] {
				released = append(released, c)
			}
		}
		// The handover's state goes into the kernel before anyone is told
		// to send here: a packet arriving first would be tracked as new.
		if h := a.cfg.Handover; h != nil && len(gained) > 0 {
			if err := h.Gaining(a.ctx, gained); err != nil {
				a.log.Warn("handover before owning", "vips", gained, "err", err)
			}
		}
		errs = append(errs, a.setOwned(d.Claim)...)
		if h := a.cfg.Handover; h != nil && len(released) > 0 {
			if err := h.Released(a.ctx, released, len(next)); err != nil {
				a.log.Warn("handover after releasing", "vips", released, "err", err)
			}
		}
		for _, c := range gained {
			a.log.Info("owning VIP", "vip", c)
		}
		for _, c := range released {
			a.log.Info("released VIP", "vip", c, "owner", d.Owner[c])
		}
		k.claimed, k.owned = next, slices.Clone(d.Claim)
	}

	k.owners, k.waiting = d.Owner, d.Waiting
	st := nodeState{Name: a.name, Healthy: k.healthy && !k.closing, Uplink: k.uplink, Settled: k.settled,
		VIPs: slices.Clone(k.vips), Claimed: slices.Clone(d.Claim)}
	changed := !sameState(st, k.self)
	if changed {
		st.Gen = k.self.Gen + 1
		k.self = st
		k.selfMsg = st.marshal()
	}
	type out struct {
		n   memberlist.Node
		ask bool
	}
	var sends []out
	now := time.Now()
	unknown := false
	// A handover waits for the holder's published release; should that
	// message be lost, asking the holder again beats waiting for push/pull.
	for _, holder := range d.Waiting {
		if p := k.peers[holder]; p != nil && p.alive && now.Sub(p.askedAt) >= stateRetry {
			p.askState = true
		}
	}
	if len(d.Waiting) > 0 {
		unknown = true // re-check soon
	}
	for name, p := range k.peers {
		if !p.alive {
			continue
		}
		// A live member whose state we lack blocks every new claim (it might
		// answer for anything): ask again until it answers.
		if p.state == nil {
			unknown = true
			if now.Sub(p.askedAt) >= stateRetry {
				p.askState = true
			}
			if !p.warned && now.Sub(p.since) >= a.stateWait {
				p.warned = true
				a.log.Warn("no state from a live member yet: new claims wait for it", "member", name, "since", p.since)
			}
		}
		if !(changed || p.needsState || p.askState) {
			continue
		}
		ask := p.askState
		if ask {
			p.askedAt = now
		}
		sends = append(sends, out{p.node, ask})
		p.needsState, p.askState = false, false
	}
	if unknown {
		k.decideAgainIn(stateRetry)
	}
	if a.ml != nil && len(sends) > 0 {
		asking := k.self
		asking.WantReply = true
		ask := asking.marshal()
		for _, o := range sends {
			if o.ask {
				k.send(o.n, ask)
			} else {
				k.send(o.n, k.selfMsg)
			}
		}
	}
	return errors.Join(errs...)
}

// view builds decide's input from what the keeper knows now.
func (k *keeper) view(now time.Time) view {
	a := k.a
	v := view{Self: a.name, VIPs: k.vips, Claimed: k.claimed,
		Ready: k.healthy && k.uplink && k.settled && !k.closing, Fresh: map[netip.Addr]bool{}}
	if len(a.sources) > 0 {
		// One owner for every VIP and source address, both families: the
		// connection-state sync is primary-backup (conntrack-tools), and a
		// gateway primary for one family only would commit, flush and
		// resend the other family's connections it does not carry.
		key := sortedAddrs(a.sources)[0]
		v.Key = map[netip.Addr]netip.Addr{}
		for _, vip := range k.vips {
			v.Key[vip] = key
		}
	}
	// Rule 5 bookkeeping: eligibility starts now for VIPs that just became
	// claimable, ends for those that stopped being.
	if !v.Ready {
		clear(k.eligibleSince)
	} else {
		keep := map[netip.Addr]bool{}
		for _, vip := range k.vips {
			keep[vip] = true
			since, ok := k.eligibleSince[vip]
			if !ok {
				since = now
				k.eligibleSince[vip] = now
				if a.claimDelay > 0 {
					k.decideAgainIn(a.claimDelay)
				}
			}
			if now.Sub(since) < a.claimDelay {
				v.Fresh[vip] = true
			}
		}
		for vip := range k.eligibleSince {
			if !keep[vip] {
				delete(k.eligibleSince, vip)
			}
		}
	}
	for name, p := range k.peers {
		pv := peerView{Name: name, Alive: p.alive}
		if p.state != nil {
			pv.Known, pv.Ready, pv.VIPs, pv.Claimed = true, p.state.Ready(), p.vips, p.claimed
		}
		v.Peers = append(v.Peers, pv)
	}
	return v
}

func sameState(a, b nodeState) bool {
	return a.Healthy == b.Healthy && a.Uplink == b.Uplink && a.Settled == b.Settled &&
		slices.Equal(a.VIPs, b.VIPs) && slices.Equal(a.Claimed, b.Claimed)
}

func equalSets(a, b map[netip.Addr]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
