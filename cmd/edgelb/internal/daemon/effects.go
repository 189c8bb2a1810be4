package daemon

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/proxy"
)

// Desired is what the one writer wants the kernel and the network to hold:
// the engine's type, which the Kubernetes controller's converts to
// (k8s.Desired.Engine).
type Desired = engine.Desired

// effects applies Desired states in order, from one goroutine: the dataplane
// first, then the announcers — a VIP is announced only once the kernel can
// serve it, and withdrawn while the dataplane is failing. Failures are
// retried with backoff; a resync timer repairs drift made by others.
type effects struct {
	dp     proxy.Dataplane
	ann    []announce.Announcer
	log    *slog.Logger
	resync time.Duration
	alive  func(time.Time) // watchdog ping: proves this loop is not wedged
	m      *effectsMetrics // nil: none

	mu        sync.Mutex
	applied   bool // the last Desired is fully in the kernel
	lastErr   error
	lastApply time.Time
	syncs     uint64
}

// status is read by readiness and the API.
func (e *effects) status() (ready bool, lastErr error, syncs uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applied, e.lastErr, e.syncs
}

// run consumes desired states until ctx ends. onFirst is called once, after
// the first Desired is fully applied (readiness, sd_notify READY).
func (e *effects) run(ctx context.Context, in <-chan Desired, onFirst func()) {
	var cur *Desired
	backoff := 100 * time.Millisecond
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	resync := time.NewTicker(e.resync)
	defer resync.Stop()
	ping := time.NewTicker(time.Second)
	defer ping.Stop()
	dirty := false
	for {
		select {
		case <-ctx.Done():
			return
		case d, ok := <-in:
			if !ok {
				return
			}
			cur, dirty = &d, true
		case <-retry.C:
		case <-resync.C:
			if cur != nil && !dirty {
				t0 := time.Now()
				err := e.dp.Resync(ctx)
				e.m.observe("resync", t0, err)
				if err != nil {
					e.log.Warn("dataplane resync failed", "err", err)
					dirty = true
				}
			}
		case now := <-ping.C:
			e.alive(now)
			continue
		}
		if cur == nil || !dirty {
			continue
		}
		t0 := time.Now()
		if err := e.apply(ctx, *cur); err != nil {
			if ctx.Err() != nil {
				return
			}
			e.log.Error("converging failed; will retry", "err", err, "retryIn", backoff)
			retry.Reset(backoff)
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		dirty, backoff = false, 100*time.Millisecond
		if onFirst != nil || time.Since(t0) >= bulkApply {
			releaseMemory(e.log)
		}
		if onFirst != nil {
			onFirst()
			onFirst = nil
		}
	}
}

// bulkApply is how long an apply takes when it was a bulk change (a cold
// sync or reload of thousands of services) rather than a routine one.
const bulkApply = 250 * time.Millisecond

// releaseMemory hands the heap a bulk change left behind back to the OS.
// Parsing a config of 10,000 services and writing them to the kernel
// allocates hundreds of MiB over a few seconds (in use at the end: tens);
// without this the runtime keeps the peak for minutes, and RSS says so.
func releaseMemory(log *slog.Logger) {
	t := time.Now()
	debug.FreeOSMemory()
	log.Debug("returned free memory to the OS", "took", time.Since(t))
}

func (e *effects) apply(ctx context.Context, d Desired) error {
	start := time.Now()
	dpErr := e.dp.Apply(ctx, d.Dataplane)
	vips := d.VIPs
	if dpErr != nil {
		// The kernel cannot serve what we would announce: say nothing rather
		// than draw traffic into a black hole. BGP withdraws; L2 lets another
		// gateway own the VIPs.
		vips = nil
	}
	var annErr error
	for _, a := range e.ann {
		if err := a.SetVIPs(ctx, vips); err != nil {
			annErr = errors.Join(annErr, err)
		}
	}
	err := errors.Join(dpErr, annErr)
	e.m.observe("apply", start, err)
	e.mu.Lock()
	e.applied = err == nil
	e.lastErr = err
	e.lastApply = time.Now()
	e.syncs++
	e.mu.Unlock()
	if err == nil {
		e.log.Debug("converged", "services", len(d.Dataplane.Services), "vips", len(d.VIPs), "took", time.Since(start))
	}
	return err
}
