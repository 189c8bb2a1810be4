package l2

// The keeper is the one goroutine that owns the announcer's state, as
// lb/engine's loop owns the services (and gobgp's server loop its peers):
// what SetVIPs declared, the readiness inputs, every member's state, the
// claims and what the responders answer for. Everything else sends it
// events through the inbox and reads the snapshots it publishes. There is
// no lock on the state, so no decision is ever taken on a half-updated view
// and no callback can wait on another's network I/O.

import (
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// eventKind says what an event carries.
type eventKind int

const (
	evPoke      eventKind = iota // decide again (nothing else changed)
	evSetVIPs                    // vips: what SetVIPs declared
	evHealthy                    // up: the daemon's dataplane verdict
	evJoined                     // the first join attempt is done
	evState                      // state: a member's published state
	evAlive                      // node: memberlist sees a member alive
	evGone                       // node: memberlist declared a member dead or left
	evClose                      // Close began; noReconcile: without withdrawing
	evStopSends                  // Close: memberlist is shutting down, send nothing more
)

// event is one message to the keeper. reply, when set, receives the error
// of the decision taken after the event (buffered: the keeper never waits).
type event struct {
	kind        eventKind
	vips        []netip.Addr
	up          bool
	state       nodeState
	node        memberlist.Node
	noReconcile bool
	reply       chan error
}

// inbox queues events for the keeper. Posting never blocks: memberlist
// calls its delegates with its own locks held and must not wait while the
// keeper drives a responder or a connection-state handover; a bounded
// channel could fill up and would. The keeper takes the whole queue at
// once, so a burst of events costs one decision, as before.
type inbox struct {
	mu    sync.Mutex
	q     []event
	ready chan struct{} // capacity 1: "the queue is not empty"
}

func (b *inbox) init() { b.ready = make(chan struct{}, 1) }

func (b *inbox) post(e event) {
	b.mu.Lock()
	b.q = append(b.q, e)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

func (b *inbox) take() []event {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.q
	b.q = nil
	return q
}

// keeper holds the mutable state; only its run goroutine touches it once
// New has returned.
type keeper struct {
	a *Announcer

	vips       []netip.Addr // what SetVIPs declared that we can answer for
	healthy    bool
	uplink     bool
	joined     bool // first join attempt done (cluster mode)
	closing    bool
	readySince time.Time
	settled    bool
	peers      map[string]*peer
	self       nodeState // last published
	selfMsg    []byte    // self, marshalled
	owners     map[netip.Addr]string
	waiting    map[netip.Addr]string
	// eligibleSince: when each of our VIPs became claimable by us (ready and
	// served), for the claim delay (rule 5 in ownership.go).
	eligibleSince map[netip.Addr]time.Time
	// claimed is what the responders answer for; owned the same, sorted.
	claimed map[netip.Addr]bool
	owned   []netip.Addr
	// sendsClosed: Close is shutting memberlist down, nothing more is sent.
	sendsClosed bool

	// settleTimer ends the settle period (stopped whenever readiness is
	// lost, so it never ends a later period early); wake is the next
	// re-decision the state asks for (claim delay, asking a member again).
	settleTimer *time.Timer
	wake        *time.Timer
	wakeAt      time.Time
}

func newKeeper(a *Announcer) *keeper {
	k := &keeper{a: a, healthy: true, peers: map[string]*peer{}, claimed: map[netip.Addr]bool{},
		owners: map[netip.Addr]string{}, waiting: map[netip.Addr]string{}, eligibleSince: map[netip.Addr]time.Time{},
		settleTimer: time.NewTimer(time.Hour), wake: time.NewTimer(time.Hour)}
	k.settleTimer.Stop()
	k.wake.Stop()
	k.joined = a.cfg.Members == nil // alone: nothing to learn before owning
	k.self = nodeState{Name: a.name, Gen: uint64(time.Now().UnixNano())}
	k.selfMsg = k.self.marshal()
	return k
}

// run is the keeper's goroutine: it takes every queued event, decides once
// (reconcile), answers the callers waiting for that decision and publishes
// a snapshot, until Close cancels the announcer's context.
func (k *keeper) run(upc <-chan bool) {
	a := k.a
	defer a.wg.Done()
	defer close(a.done)
	for {
		decideNow := false
		select {
		case <-a.ctx.Done():
			return
		case <-a.inbox.ready:
		case up, ok := <-upc:
			if !ok {
				upc = nil // ends with the context
				continue
			}
			k.setUplink(up)
			decideNow = true
		case <-k.settleTimer.C:
			k.settled = true
			decideNow = true
		case <-k.wake.C:
			k.wakeAt = time.Time{}
			decideNow = true
		}
		var replies []chan error
		for _, e := range a.inbox.take() {
			if k.apply(e) {
				decideNow = true
			}
			if e.reply != nil {
				replies = append(replies, e.reply)
			}
		}
		var err error
		if decideNow {
			err = k.reconcile()
			if err != nil && len(replies) == 0 {
				a.log.Warn("reconcile", "err", err)
			}
		}
		k.publish()
		for _, r := range replies {
			r <- err
		}
	}
}

// apply records one event; it reports whether to decide again.
func (k *keeper) apply(e event) bool {
	a := k.a
	switch e.kind {
	case evPoke:
		return true
	case evSetVIPs:
		k.vips = e.vips
		return !e.noReconcile
	case evHealthy:
		if k.healthy == e.up {
			return false
		}
		k.healthy = e.up
		k.updateReadiness()
		a.log.Info("dataplane health", "healthy", e.up)
		return true
	case evJoined:
		k.joined = true
		k.updateReadiness()
		return true
	case evState:
		return k.memberState(e.state)
	case evAlive:
		k.memberAlive(e.node)
		return true
	case evGone:
		k.memberGone(e.node)
		return true
	case evClose:
		k.closing = true
		k.updateReadiness()
		return !e.noReconcile
	case evStopSends:
		k.sendsClosed = true
	}
	return false
}

func (k *keeper) setUplink(up bool) {
	k.uplink = up
	k.updateReadiness()
	if up {
		k.a.log.Info("uplink up", "interface", k.a.cfg.Interface)
	} else {
		k.a.log.Warn("uplink down: giving VIPs up", "interface", k.a.cfg.Interface)
	}
}

// updateReadiness starts or stops the settle period: a gateway may own VIPs
// only once it has been healthy, with its uplink up and in the cluster, for
// SettleTime without interruption.
func (k *keeper) updateReadiness() {
	want := k.healthy && k.uplink && k.joined && !k.closing
	if !want {
		k.readySince, k.settled = time.Time{}, false
		// Stop guarantees (Go ≥ 1.23 timers) that an expiry of the period
		// just broken is never received.
		k.settleTimer.Stop()
		return
	}
	if !k.readySince.IsZero() {
		return
	}
	k.readySince = time.Now()
	if k.a.cfg.Members == nil || k.a.settle <= 0 {
		k.settled = true
		return
	}
	k.settleTimer.Reset(k.a.settle)
}

// decideAgainIn asks for a decision after d at the latest.
func (k *keeper) decideAgainIn(d time.Duration) {
	at := time.Now().Add(d)
	if !k.wakeAt.IsZero() && !at.Before(k.wakeAt) {
		return
	}
	k.wakeAt = at
	k.wake.Reset(d)
}
