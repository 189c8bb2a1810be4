package statesync

import (
	"context"
	"os"
	"sync"
	"time"
)

// Coalescing conntrackd's work, as a NIC coalesces interrupts.
//
// conntrackd 1.4.7 runs one select round per conntrack event when events
// come one at a time: it reads the event, queues it, flushes its send
// buffer, so every event is a wake-up, ~17 system calls and a datagram of
// its own, and on the peer a wake-up and a receive (lab: 2 gateways, 900
// new connections/s, the owner's conntrackd 9–10 % of a core, the peer's
// 6–7 %). When several events are waiting, one round reads them all and
// packs their messages into MTU-sized datagrams; nothing in its
// configuration makes it wait for that. The gate below does: it stops the
// conntrackd processes (SIGSTOP) for an interval, the kernel queues the
// events in the netlink socket meanwhile (its buffer holds seconds of
// them at these rates), then continues them (SIGCONT) until each is idle
// again, waiting in select. A busy conntrackd is never stopped: under a
// load it cannot finish in a round it runs unthrottled, as without the
// gate. The kernel's own IPVS sync daemon batches the same way (a sync
// buffer is sent when full or at the latest 2 s old).
//
// Like NAPI the gate only batches when there is something to batch: while
// conntrackd runs fewer than gateRoundsPerSec rounds (an idle gateway: an
// alive message a second; a backup: the primary's batches arrive a few
// datagrams at a time) it is left running and the gate only counts its
// rounds once a second (gateCount). Above that it is gated, and every
// gateProbe it runs one interval ungated to count again.
//
// The price is latency: a new connection reaches the peers up to one
// interval later (a gateway that dies loses the connections opened in its
// last interval, which the failover's detection time dwarfs), and client
// commands wait for it — so every command of edgelb's holds the gate open
// (hold) while it runs. A kill -9 of edgelb still takes a stopped
// conntrackd along: the parent-death signal is SIGKILL, which a stopped
// process does not block.

// procCtl is what the gate does to a process; the real one signals through
// os.Process (a pidfd on Linux: never a recycled pid) and reads /proc
// through files opened while the process was known alive; the test's
// writes a transcript. All calls are made under gate.mu.
type procCtl interface {
	stop(p *os.Process) error
	cont(p *os.Process) error
	// busy: running or runnable (state R), so not yet back in select.
	busy(p *os.Process) bool
	// rounds: how often it was scheduled in (schedstat's third field; a
	// round of conntrackd's loop is a wake-up); 0 once it is gone.
	rounds(p *os.Process) uint64
	// track opens what busy and rounds read; forget closes it.
	track(p *os.Process)
	forget(p *os.Process)
}

// The gate's thresholds.
const (
	// gateRoundsPerSec: more rounds than this per process (the mesh's
	// links read the same events) and the gate batches (at 100 ms, 5 an
	// interval; one conntrack event is a round unbatched).
	gateRoundsPerSec = 50
	// gateProbe: how often a gated process runs an interval ungated so
	// that the gate sees whether the events still come.
	gateProbe = 5 * time.Second
	// gateCount: how often the rounds of ungated processes are counted (a
	// tick is a wake-up of edgelb; an idle gateway or a backup needs no
	// more than one a second, and batching starts within a second of load).
	gateCount = time.Second
	// Idle checks while the processes drain: every gateIdlePoll, for at
	// most gateMaxDrain; the next tick stops them only if none is busy.
	gateIdlePoll = time.Millisecond
	gateMaxDrain = 100 * time.Millisecond
	// gateAfterHold: how long the processes stay running after a hold
	// ends. conntrackd goes on with a command's work after answering it —
	// a commit (-c), a dump (-R) or a bulk send (-B) runs a batch per round
	// of its loop, with select between them — and stopped between rounds
	// each batch would wait an interval: on a takeover the streams wait
	// for the commit (their entries), so it must run at full speed. (The
	// lab's failover data gap after 20,000 connections to commit read
	// 500–970 ms with or without this; what sets it is not known yet.)
	gateAfterHold = 5 * time.Second
)

// gate duty-cycles the conntrackd processes registered with it.
type gate struct {
	every time.Duration
	ctl   procCtl
	now   func() time.Time

	mu      sync.Mutex
	procs   []*os.Process
	holds   int
	open    time.Time // no stop before this (gateAfterHold after a hold)
	stopped bool      // the procs are stopped now
	gated   bool      // batching (else only counting rounds)
	cycles  int       // gated intervals since the last probe
	// rounds summed over procs when the current ungated interval began
	// (compared only when the set of procs did not change since).
	lastRounds  uint64
	roundsValid bool
}

func newGate(every time.Duration, ctl procCtl) *gate {
	return &gate{every: every, ctl: ctl, now: time.Now}
}

// startGate runs a gate over the real processes; stop ends its cycling,
// leaves its processes continued and returns once it has.
func startGate(every time.Duration) (g *gate, stop func()) {
	quietChildStops()
	g = newGate(every, newRealProcCtl())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.run(ctx, sleepCtx); close(done) }()
	return g, func() { cancel(); <-done }
}

// add registers a started process (before anything can reap it: the
// real procCtl opens its /proc files here, so they are its and not a
// recycled pid's); it runs until the gate's next stop. add, remove and
// hold do nothing on a nil gate (coalescing off).
func (g *gate) add(p *os.Process) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.ctl.track(p)
	g.procs = append(g.procs, p)
	g.roundsValid = false
	g.mu.Unlock()
}

// remove forgets p and continues it if stopped, so that the SIGTERM that
// follows is handled (a stopped process keeps it pending).
func (g *gate) remove(p *os.Process) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, q := range g.procs {
		if q == p {
			g.procs = append(g.procs[:i], g.procs[i+1:]...)
			g.roundsValid = false
			if g.stopped {
				g.ctl.cont(p)
			}
			g.ctl.forget(p)
			return
		}
	}
}

// hold continues every process now and keeps them running until after
// past the returned release's call: client commands, which a stopped
// daemon would answer an interval late (after 0), and steps whose work
// goes on after the answer (gateAfterHold). A status read must not keep
// the gate open: the web UI and metrics read one every second.
func (g *gate) hold(after time.Duration) (release func()) {
	if g == nil {
		return func() {}
	}
	g.mu.Lock()
	g.holds++
	g.contLocked()
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.holds--
			if t := g.now().Add(after); t.After(g.open) {
				g.open = t
			}
			g.mu.Unlock()
		})
	}
}

func (g *gate) contLocked() {
	if !g.stopped {
		return
	}
	for _, p := range g.procs {
		g.ctl.cont(p)
	}
	g.stopped = false
}

// run cycles until ctx ends, leaving the processes continued: at each
// tick decide (tickLocked), stop them if gated, and after the interval
// continue them and wait until none is busy (at most gateMaxDrain; a tick
// that finds one still busy leaves them running).
func (g *gate) run(ctx context.Context, sleep func(context.Context, time.Duration) error) {
	defer func() {
		g.mu.Lock()
		g.contLocked()
		g.mu.Unlock()
	}()
	var slept time.Duration
	for {
		g.mu.Lock()
		next := g.tickLocked(slept)
		g.mu.Unlock()
		if sleep(ctx, next) != nil {
			return
		}
		slept = next
		g.mu.Lock()
		wasStopped := g.stopped
		g.contLocked()
		g.mu.Unlock()
		if !wasStopped {
			continue
		}
		// Let them drain what queued while they were stopped.
		for waited := time.Duration(0); waited < gateMaxDrain; waited += gateIdlePoll {
			if sleep(ctx, gateIdlePoll) != nil {
				return
			}
			g.mu.Lock()
			busy := g.anyBusyLocked()
			g.mu.Unlock()
			if !busy {
				break
			}
		}
	}
}

// tickLocked switches between counting and batching, stops the processes
// for the coming interval when batching, and says how long to wait for
// the next tick: an interval while batching or probing, gateCount while
// only counting. slept is how long the wait before this tick was.
func (g *gate) tickLocked(slept time.Duration) (next time.Duration) {
	if len(g.procs) == 0 {
		return max(g.every, gateCount)
	}
	if g.gated {
		g.cycles++
		if time.Duration(g.cycles)*g.every >= gateProbe {
			// One interval ungated, counted at the next tick.
			g.gated = false
			g.lastRounds, g.roundsValid = g.roundsLocked(), true
			return g.every
		}
	} else {
		r := g.roundsLocked()
		n, valid := r-g.lastRounds, g.roundsValid && r >= g.lastRounds && slept > 0
		g.lastRounds, g.roundsValid = r, true
		perProc := float64(n) / float64(len(g.procs))
		if !valid || perProc*float64(time.Second)/float64(slept) <= gateRoundsPerSec {
			return max(g.every, gateCount)
		}
		g.gated, g.cycles = true, 0
	}
	if g.gated && g.mayStopLocked() && !g.anyBusyLocked() {
		for _, p := range g.procs {
			g.ctl.stop(p)
		}
		g.stopped = true
	}
	return g.every
}

// mayStopLocked: no hold, and past the open time a step list left.
func (g *gate) mayStopLocked() bool { return g.holds == 0 && !g.now().Before(g.open) }

// batching says whether the gate stops its processes at its ticks now
// (gated, and nothing keeps it open).
func (g *gate) batching() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gated && g.mayStopLocked()
}

// roundsLocked sums the processes' rounds (a process that is gone reads
// 0, so the sum can fall: tickLocked then starts counting afresh).
func (g *gate) roundsLocked() uint64 {
	var r uint64
	for _, p := range g.procs {
		r += g.ctl.rounds(p)
	}
	return r
}

func (g *gate) anyBusyLocked() bool {
	for _, p := range g.procs {
		if g.ctl.busy(p) {
			return true
		}
	}
	return false
}

// sleepCtx sleeps d or until ctx ends (then its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
