package statesync

// Whether the peer at the other end of a channel is alive, and since when
// it is silent: read from the packets conntrackd counts from it.
//
// An FTFW peer sends at least one packet a second (an alive message when it
// has nothing else to send), so a received-packets counter that stops for
// longer means the peer, or the path to it, is gone. The counter is read in
// the background every PeerPoll, and the time of the last packet is the end
// of the read that first saw the counter at its current value: never
// earlier than the packet, at most PeerPoll (and one read) later. Earlier,
// the counters were read only when someone asked (at most once a second),
// and the silence was counted from the first read that saw them stop: a
// peer dead for 1.4 s read as silent for 0 s, and the peer row said
// "running" for as long as the local conntrackd ran (issue 35).

import (
	"context"
	"time"
)

const (
	// PeerPoll is how often the counters are read (`conntrackd -s`, one
	// short process each).
	PeerPoll = 200 * time.Millisecond
	// queueEvery: the queue (`conntrackd -s queue`) is read every fifth
	// poll, once a second.
	queueEvery = 5
	// PeerDeadAfter is the silence after which a peer is reported dead:
	// its alive messages come every second, half a second of slack for a
	// busy machine. A dead peer is reported at most PeerDeadAfter +
	// PeerPoll (+ one read) after its last packet: 1.7 s.
	PeerDeadAfter = 1500 * time.Millisecond
)

// Peer states (Status.PeerState).
const (
	PeerAlive = "alive"
	PeerDead  = "dead"
	// PeerUnknown: no read yet, or the local conntrackd is not running
	// (nothing could be heard).
	PeerUnknown = "unknown"
)

// heard is a read of the received-packets counter that ended at now; it
// reports whether it saw a packet since the previous read. A restarted
// conntrackd counts from 0: a lower count that is not 0 is packets since
// the restart, 0 is none.
func heard(prev, cur uint64, first bool) bool {
	if first {
		return cur > 0
	}
	return cur != prev && cur > 0
}

// peerView is the peer's state at now: unknown before the first read or
// while the local conntrackd is down, dead once silent for longer than
// PeerDeadAfter. The silence runs from the last packet seen, or from the
// first read when none was ever seen (since).
func peerView(now time.Time, running bool, since time.Time) (string, time.Duration) {
	if since.IsZero() {
		return PeerUnknown, 0
	}
	silence := max(0, now.Sub(since))
	switch {
	case !running:
		return PeerUnknown, silence
	case silence > PeerDeadAfter:
		return PeerDead, silence
	}
	return PeerAlive, silence
}

// watchPeer reads the counters every PeerPoll until Close.
func (c *Conntrackd) watchPeer() {
	t := time.NewTicker(PeerPoll)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		running := c.running
		c.mu.Unlock()
		if running {
			c.refresh(c.ctx, n%queueEvery == 0)
		}
	}
}

// refresh reads `conntrackd -s` (and `-s queue` when withQueue) and records
// whether a packet arrived since the last read.
func (c *Conntrackd) refresh(ctx context.Context, withQueue bool) {
	out, err := c.command(ctx, "-s")
	if err != nil {
		return // not up yet, or gone: the supervisor says why
	}
	now := c.now() // after the read: every packet it counted arrived before
	st := ParseStats(out)
	if withQueue {
		q, err := c.command(ctx, "-s", "queue")
		if withQueue = err == nil; withQueue {
			ParseQueue(q, &st)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !withQueue {
		st.Unacked, st.Unsent, st.ResendDropped = c.stats.Unacked, c.stats.Unsent, c.stats.ResendDropped
	}
	first := c.statsAt.IsZero()
	switch {
	case heard(c.stats.RecvPackets, st.RecvPackets, first):
		c.heardAt, c.lastPacket = now, now
	case c.heardAt.IsZero():
		c.heardAt = now // silent from the first read on
	}
	c.stats, c.statsAt = st, now
}

func (c *Conntrackd) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}

// worse orders peer states for a Mesh: dead over unknown over alive.
func worse(a, b string) string {
	rank := func(s string) int {
		switch s {
		case PeerDead:
			return 2
		case PeerUnknown, "":
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}
