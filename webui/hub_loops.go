package webui

import (
	"context"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

// The hub's producer loops: flows from the dataplane's FlowSource, and
// the batches that turn them into delta frames.

// runFlows feeds the hub from src: an authoritative Snapshot every resync
// (events may be lost; counters change without events), and Watch while
// someone watches the live view.
//
// Following conntrack events is not free for the gateway: while any
// process listens to them, the kernel builds an event message for every
// connection through the host (measured in lab/faults: ~10 µs more per
// first packet on the lab's gateway, on every path, edgelb's or not). So
// Watch runs only while a stream client is connected, and for watchIdle
// after the last one leaves (a page reload does not restart it); a
// negative watchIdle watches always. Between viewers the REST reads dump
// on demand (freshen).
func (h *hub) runFlows(ctx context.Context, src proxy.FlowSource, resync time.Duration) {
	h.mu.Lock()
	h.src = src
	h.mu.Unlock()
	var (
		stopWatch context.CancelFunc
		watchDone chan struct{}
	)
	startWatch := func() {
		wctx, cancel := context.WithCancel(ctx)
		stopWatch, watchDone = cancel, make(chan struct{})
		h.setWatching(true)
		go func(done chan struct{}) {
			defer close(done)
			h.watch(wctx, src)
		}(watchDone)
	}
	endWatch := func() {
		stopWatch()
		<-watchDone
		stopWatch = nil
		h.setWatching(false)
	}
	defer func() {
		if stopWatch != nil {
			endWatch()
		}
	}()
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	if h.cfg.watchIdle < 0 {
		startWatch()
	}
	t := time.NewTicker(resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.resyncFlows(ctx, src)
		case <-h.viewers:
			if h.cfg.watchIdle < 0 {
				continue
			}
			if h.clientCount() > 0 {
				idle.Stop()
				if stopWatch == nil {
					startWatch()
				}
			} else if stopWatch != nil {
				idle.Reset(h.cfg.watchIdle)
			}
		case <-idle.C:
			if h.clientCount() == 0 && stopWatch != nil {
				endWatch()
				h.cfg.log.Debug("webui: no live viewer; stopped following conntrack events")
			}
		}
	}
}

// watch follows src's events until ctx ends, restarting with backoff (and
// a resync for what was missed) when Watch fails.
func (h *hub) watch(ctx context.Context, src proxy.FlowSource) {
	backoff := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		err := src.Watch(ctx, h.flowEvent)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			backoff = time.Second
		}
		h.cfg.log.Warn("webui: flow watch ended; restarting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
		h.resyncFlows(ctx, src)
	}
}

func (h *hub) setWatching(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watching = on
}

// poke tells runFlows that the set of stream clients changed.
func (h *hub) poke() {
	select {
	case h.viewers <- struct{}{}:
	default:
	}
}

// freshen makes the flow table current for a REST read while no watch
// runs: a dump, at most one per freshAfter (readers in between share it).
func (h *hub) freshen(ctx context.Context) {
	h.mu.Lock()
	src, skip := h.src, h.watching || time.Since(h.lastResync) < freshAfter
	h.mu.Unlock()
	if src == nil || skip {
		return
	}
	h.resyncFlows(ctx, src)
}

// freshAfter is how old a dump may be before a REST read (with no watch
// running) takes a new one.
const freshAfter = 500 * time.Millisecond

// resyncFlows replaces the flow table with an authoritative snapshot.
func (h *hub) resyncFlows(ctx context.Context, src proxy.FlowSource) {
	gen := h.beginResync()
	h.mu.Lock()
	h.lastResync = time.Now()
	h.mu.Unlock()
	flows, err := src.Snapshot(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.cfg.log.Warn("webui: flow snapshot failed", "err", err)
		}
		return
	}
	h.applySnapshot(flows, gen)
}

func (h *hub) runBatches(ctx context.Context) { every(ctx, h.cfg.batch, h.flush) }

// every calls fn each period until ctx ends.
func every(ctx context.Context, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
