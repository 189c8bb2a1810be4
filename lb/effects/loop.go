// Package effects is the loop that makes the kernel and the network say
// what the one writer decided: it applies each lb.Desired to the dataplane,
// then hands the VIPs the dataplane can serve to the announcers. See
// README.md.
package effects

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// Dataplane is what the loop needs of a proxy.Dataplane: converge, and
// repair drift. Cleanup and Close stay with whoever built it.
type Dataplane interface {
	Apply(ctx context.Context, cfg proxy.Config) error
	Resync(ctx context.Context) error
}

// Announcer is what the loop needs of an announce.Announcer: the VIPs this
// gateway can serve right now.
type Announcer interface {
	SetVIPs(ctx context.Context, vips []announce.VIP) error
}

// Options configure a Loop. Dataplane is required.
type Options struct {
	Dataplane  Dataplane
	Announcers []Announcer
	Logger     *slog.Logger // nil: discard
	// Resync is how often the kernel is read back and repaired while
	// converged (0: one minute).
	Resync time.Duration
	// Alive, when set, is pinged every second from the loop's goroutine
	// (the systemd watchdog): it proves the loop is not wedged.
	Alive func(time.Time)
	// Registerer, when set, gets the edgelb_dataplane_* metrics.
	Registerer prometheus.Registerer
	// Refused, when set, is told after an apply whose per-service refusals
	// differ from the last one's which services the dataplane refused
	// (name → reason; empty: none), so the writer can show them failed.
	// It runs in the loop's goroutine: it must not block (RefusedRelay).
	Refused func(map[string]string)
	// OnDesired, when set, sees every new desired state as it arrives,
	// before it is applied (the health checker's targets follow it here,
	// in this goroutine, rather than in a relay goroutine of their own).
	OnDesired func(lb.Desired)
}

// Loop applies Desired states in order, from one goroutine: the dataplane
// first, then the announcers — a VIP is announced only once the kernel can
// serve it, and withdrawn while the dataplane is failing. Failures are
// retried with backoff; a resync timer repairs drift made by others.
type Loop struct {
	dp        Dataplane
	ann       []Announcer
	log       *slog.Logger
	resync    time.Duration
	alive     func(time.Time)
	m         *metrics // nil: none
	refused   func(map[string]string)
	onDesired func(lb.Desired)

	mu        sync.Mutex
	applied   bool // the last lb.Desired is fully in the kernel
	lastErr   error
	lastApply time.Time
	syncs     uint64
	failed    map[string]string // services the dataplane refused, by name
}

// New returns a Loop; Run starts it.
func New(o Options) *Loop {
	l := &Loop{dp: o.Dataplane, ann: o.Announcers, log: o.Logger, resync: o.Resync, alive: o.Alive,
		refused: o.Refused, onDesired: o.OnDesired}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.resync <= 0 {
		l.resync = time.Minute
	}
	if l.alive == nil {
		l.alive = func(time.Time) {}
	}
	if o.Registerer != nil {
		l.m = newMetrics(o.Registerer)
	}
	return l
}

// ErrNotConverged is Ready's answer before the first apply succeeded.
var ErrNotConverged = errors.New("dataplane not converged yet")

// Ready is nil once the last desired state is in the kernel (what can be of
// it: a per-service refusal still counts as converged), else why not
// (readiness, /readyz).
func (e *Loop) Ready(context.Context) error {
	ok, err, _ := e.Status()
	if ok {
		return nil
	}
	if err == nil {
		err = ErrNotConverged
	}
	return err
}

// Refused are the services the last apply refused (name → reason).
func (e *Loop) Refused() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed
}

// Status is whether the last desired state is applied, the last apply's
// error, and how many applies ran.
func (e *Loop) Status() (ready bool, lastErr error, syncs uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applied, e.lastErr, e.syncs
}

// Run consumes desired states until ctx ends or in is closed. onFirst
// (nil: none) is called once, after the first Desired is fully applied
// (readiness, sd_notify READY). Call it once.
func (e *Loop) Run(ctx context.Context, in <-chan lb.Desired, onFirst func()) {
	var cur *lb.Desired
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
			if e.onDesired != nil {
				e.onDesired(d)
			}
		case <-retry.C:
		case <-resync.C:
			if cur != nil && !dirty && len(e.Refused()) > 0 {
				// Partly refused: try the refused services again (the
				// dataplane decides whether a refusal may have passed).
				dirty = true
			} else if cur != nil && !dirty {
				t0 := time.Now()
				err := e.m.withCPU("resync", func() error { return e.dp.Resync(ctx) })
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
		// Ready first, then the memory: returning it forces a full
		// collection (~50–100 ms at 10,000 services) that serves nobody
		// waiting for ready.
		first := onFirst != nil
		if first {
			onFirst()
			onFirst = nil
		}
		if first || time.Since(t0) >= bulkApply {
			releaseMemory(e.log)
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

func (e *Loop) apply(ctx context.Context, d lb.Desired) error {
	start := time.Now()
	dpErr := e.m.withCPU("apply", func() error { return e.dp.Apply(ctx, d.Dataplane) })
	vips := d.VIPs
	failed := refusedByName(d.Dataplane, dpErr)
	switch {
	case proxy.Partial(dpErr):
		// Refused one by one: every other service is programmed and stays
		// announced; only a VIP none of whose services made it goes.
		vips = withoutRefused(d, dpErr)
	case dpErr != nil:
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
	e.m.refused(failed)
	e.mu.Lock()
	// Partly refused is still converged: what could be programmed is, and
	// the refused services are reported, not retried (the same Desired
	// would be refused again).
	e.applied = err == nil || (proxy.Partial(dpErr) && annErr == nil)
	prev := e.failed
	e.failed = failed
	e.lastErr = err
	e.lastApply = time.Now()
	e.syncs++
	e.mu.Unlock()
	for name, why := range failed {
		if _, old := prev[name]; !old {
			e.log.Warn("dataplane refused a service; the others are programmed", "service", name, "err", why)
		}
	}
	if e.refused != nil && !maps.Equal(prev, failed) {
		e.refused(failed)
	}
	if err == nil || proxy.Partial(dpErr) && annErr == nil {
		e.log.Debug("converged", "services", len(d.Dataplane.Services), "vips", len(vips), "refused", len(failed), "took", time.Since(start))
		return nil
	}
	return err
}

// refusedByName maps a per-service refusal to the services' names.
func refusedByName(cfg proxy.Config, err error) map[string]string {
	keys := proxy.FailedServices(err)
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for i := range cfg.Services {
		s := &cfg.Services[i]
		if why, ok := keys[s.Key()]; ok {
			name := s.Name
			if name == "" {
				name = s.Key().String()
			}
			out[name] = why.Error()
		}
	}
	return out
}

// withoutRefused is d's VIPs less those whose every service was refused.
func withoutRefused(d lb.Desired, err error) []announce.VIP {
	failed := proxy.FailedServices(err)
	served := map[netip.Addr]bool{}
	refused := map[netip.Addr]bool{}
	for i := range d.Dataplane.Services {
		s := &d.Dataplane.Services[i]
		if !s.VIP.IsValid() {
			continue
		}
		if _, bad := failed[s.Key()]; bad {
			refused[s.VIP] = true
		} else {
			served[s.VIP] = true
		}
	}
	out := make([]announce.VIP, 0, len(d.VIPs))
	for _, v := range d.VIPs {
		if refused[v.Addr] && !served[v.Addr] {
			continue
		}
		out = append(out, v)
	}
	return out
}

// RefusedRelay hands the loop's refusals to the writer from its own
// goroutine, latest first: the effects loop never waits on the writer (which
// may itself be waiting to publish the next Desired to it).
func RefusedRelay(ctx context.Context, set func(context.Context, map[string]string) error, log *slog.Logger) func(map[string]string) {
	if set == nil {
		return nil
	}
	box := make(chan map[string]string, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-box:
				c, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := set(c, m); err != nil && ctx.Err() == nil {
					log.Warn("recording refused services", "err", err)
				}
				cancel()
			}
		}
	}()
	return func(m map[string]string) {
		for {
			select {
			case box <- m:
				return
			default:
				select { // replace the older value nobody took yet
				case <-box:
				default:
				}
			}
		}
	}
}
