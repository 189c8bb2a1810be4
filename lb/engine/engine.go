// Package engine is standalone edgelb's one writer: a single goroutine owns
// the allocator, the pools, the services and the store, and every change
// arrives as an operation over a channel (the shape of gobgp's server
// loop). After each change it computes the desired dataplane and
// announcement state and publishes it, latest wins, to subscribers.
//
// The package lb never imports engine (engine imports lb and lb/store).
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/audit"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
)

// ErrStopped is returned by calls made after Run has returned.
var ErrStopped = errors.New("engine stopped")

// Options configure an Engine.
type Options struct {
	// NodePortRange bounds node ports; zero means lb.DefaultNodePortRange.
	NodePortRange lb.PortRange
	// NodeAddrs are the gateway's own addresses node ports listen on.
	NodeAddrs []netip.Addr
	// AllDown is what happens when every backend of a service is marked
	// down by its health check (lb/config's health.allDown); empty means
	// AllDownKeep.
	AllDown AllDownPolicy
	// Check is the running dataplane's own verdict on what it can program
	// (nft.Check: no lc, wlc, sed, nq; IPVS: nil, it does all). Every
	// change — REST write, config load and reload — is checked with it
	// before anything is stored, so a service the kernel would refuse
	// never reaches Apply (issue 14: one lc service over REST made nftables
	// refuse the whole configuration). Errors wrap proxy.ErrUnsupported.
	Check func(proxy.Service) error
	// Fleet: the store is shared by a fleet of gateways (etcd). The config
	// file then seeds pools and services instead of owning them (fleet.go).
	Fleet bool
	// StaleRetries bounds how often one operation is retried after another
	// gateway committed first; zero means 50 (fleet.go).
	StaleRetries int
	// ConfigFile names the config file in the 409 that refuses a REST
	// write to a pool or service from it ("" says "the config file").
	ConfigFile string
	// Audit, when set, records every committed change of a pool or
	// service made by an operation whose context carries an audit.Actor
	// (audit.go).
	Audit audit.Recorder
	// OwnAddrs are the gateway's own addresses at start (SetOwnAddrs
	// replaces them): never a pool address, a VIP or a backend (issue 36).
	OwnAddrs *lb.OwnAddrs
	// AllocationOrder is how the allocator picks inside a pool (zero:
	// lb.LowestFree, MetalLB's order).
	AllocationOrder lb.AllocOrder
	// Announcers, when set, judge REST pools' announce: selections
	// (lb.CheckPoolAnnounce: peers by name, the L2 interface); the config
	// file's pools were judged by its parser against the same.
	Announcers *lb.Announcers
	// Registry, when set, gets the engine's Prometheus metrics.
	Registry prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
}

// AllDownPolicy decides what a service whose backends are all down does.
type AllDownPolicy string

const (
	// AllDownKeep keeps every backend in rotation at its configured weight:
	// when every check fails the checks may be what is wrong, and a guess
	// beats a blackhole.
	AllDownKeep AllDownPolicy = "keep"
	// AllDownWithdraw stops announcing the service's VIPs (unless another
	// service sharing a VIP still has a healthy backend) so routers and peers
	// fail over; the dataplane keeps the service with every weight 0.
	AllDownWithdraw AllDownPolicy = "withdraw"
)

// Engine implements lb.Manager for standalone mode.
type Engine struct {
	ops     chan op
	stopped chan struct{}
	runOnce sync.Once

	subMu sync.Mutex
	subs  []chan lb.Desired
	last  lb.Desired
	// version counts published states, so readers that poll (the web UI)
	// skip re-encoding 10,000 services when nothing changed.
	version atomic.Uint64
	// view is what reads see (view.go): set after every operation.
	view atomic.Pointer[view]
	// trouble is the last store commit's failure, nil once one succeeds.
	trouble atomic.Pointer[storeTrouble]

	// Owned by the Run goroutine (and by NewEngine before Run starts).
	st        store.Store
	opts      Options
	log       *slog.Logger
	met       *metrics
	alloc     *lb.Allocator
	pools     map[string]store.Pool
	svcs      map[string]*service
	unhealthy map[string]map[netip.AddrPort]bool // service → backends marked down
	rendered  map[string]*rendered               // per-service desired state (desired.go)
	order     []string                           // sorted service names; nil: recompute
	refused   map[string]string                  // service → why the dataplane refused it (SetRefused)
	disagree  map[string]string                  // fleet: service → how this gateway's config file differs
	actor     *audit.Actor                       // who asked for the operation running (audit.go)
	own       *lb.OwnAddrs                       // the gateway's own addresses (own.go)
	ownHit    map[string]string                  // service → why it is left out: an own address (own.go)
}

type storeTrouble struct {
	at  time.Time
	err error
}

// StoreTrouble reports the failure of the last store commit (a full disk,
// an I/O error), nil when the last one succeeded: /readyz detail and
// `edgelb status` show it. Forwarding goes on either way.
func (e *Engine) StoreTrouble() error {
	t := e.trouble.Load()
	if t == nil {
		return nil
	}
	return fmt.Errorf("the last state store commit failed at %s: %w", t.at.UTC().Format(time.RFC3339), t.err)
}

// service is a stored service and what became of it.
type service struct {
	store.Service
	pending string // why it has no (or not every) VIP; "" when complete
}

type op struct {
	f     func() error
	done  chan error
	actor *audit.Actor
}

var _ lb.Manager = (*Engine)(nil)

// NewEngine loads st and restores every stored assignment before anything
// is allocated, so a restart neither steals nor changes an address. Then it
// allocates for services still missing a VIP. The store is the engine's
// from now on (Close it after Run returns).
func NewEngine(st store.Store, opts Options) (*Engine, error) {
	if opts.NodePortRange == (lb.PortRange{}) {
		opts.NodePortRange = lb.DefaultNodePortRange
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		ops:       make(chan op),
		stopped:   make(chan struct{}),
		st:        st,
		opts:      opts,
		log:       log,
		met:       newMetrics(opts.Registry),
		alloc:     newAllocator(opts.AllocationOrder),
		pools:     map[string]store.Pool{},
		svcs:      map[string]*service{},
		unhealthy: map[string]map[netip.AddrPort]bool{},
		own:       opts.OwnAddrs,
	}
	if err := e.restore(); err != nil {
		return nil, err
	}
	e.publishView()
	return e, nil
}

// Run serves operations until ctx ends. Calls made after that return ErrStopped.
func (e *Engine) Run(ctx context.Context) error {
	started := false
	e.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("engine: Run called twice")
	}
	defer close(e.stopped)
	var changed <-chan struct{} // nil (never ready) unless the store is shared
	if sh, ok := e.st.(store.Shared); ok {
		changed = sh.Changed()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case o := <-e.ops:
			e.actor = o.actor
			err := e.retry(o.f)
			e.actor = nil
			e.publishView()
			o.done <- err
		case <-changed:
			// Another gateway committed (or the watch restarted): take the
			// store's state as the engine's, on this goroutine like any
			// other change (fleet.go).
			if err := e.retry(e.resync); err != nil {
				e.log.Warn("shared store: resync failed; keeping the state last read", "err", err)
			}
			e.publishView()
		}
	}
}

// do runs f on the engine goroutine and returns its result. Once the
// operation is handed over it runs to completion even if ctx ends (so the
// caller's view never disagrees with what happened). Writes wait for the
// operations queued before them, each one store commit (against a shared
// store, with its retries); reads do not queue (view.go).
func (e *Engine) do(ctx context.Context, f func() error) error {
	o := op{f: f, done: make(chan error, 1)}
	if a, ok := audit.ActorFrom(ctx); ok {
		o.actor = &a
	}
	select {
	case e.ops <- o:
	case <-ctx.Done():
		return ctx.Err()
	case <-e.stopped:
		return ErrStopped
	}
	return <-o.done
}

// Subscribe returns a channel that always holds the latest Desired: a
// value not yet read is replaced by a newer one, so a slow reader skips
// intermediate states and the writer never blocks. The current state is
// delivered at once.
func (e *Engine) Subscribe() <-chan lb.Desired {
	ch := make(chan lb.Desired, 1)
	e.subMu.Lock()
	defer e.subMu.Unlock()
	ch <- e.last
	e.subs = append(e.subs, ch)
	return ch
}

// Desired returns the latest desired state.
func (e *Engine) Desired() lb.Desired {
	e.subMu.Lock()
	defer e.subMu.Unlock()
	return e.last
}

// Version changes whenever the engine's state (pools, services, their
// addresses and backend health) may have changed; it never repeats.
func (e *Engine) Version() uint64 { return e.version.Load() }

// bumpVersion publishes the readers' view of the state, then moves the
// version: a poller that reads Version and then the lists (the web UI,
// which re-reads only when the version moves) must never get the lists
// from before the version it holds.
func (e *Engine) bumpVersion() {
	e.publishView()
	e.version.Add(1)
}

func (e *Engine) publish(d lb.Desired) {
	e.subMu.Lock()
	defer e.subMu.Unlock()
	e.last = d
	e.bumpVersion()
	for _, ch := range e.subs {
		select {
		case <-ch: // drop the stale value
		default:
		}
		ch <- d // cannot block: this is the only sender and the buffer is empty
	}
}

// restore rebuilds the allocator from the store: pools, then every stored
// assignment as it was, and only then allocation for what is missing.
func (e *Engine) restore() error {
	st, err := e.st.Load()
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	restored, err := e.rebuild(st)
	if err != nil {
		return err
	}
	e.met.restored.Add(float64(restored))
	if err := e.reconcileStored(st); err != nil {
		if errors.Is(err, store.ErrStale) {
			// Shared store: another gateway committed meanwhile; Run's
			// first resync takes it in.
			e.refresh()
			return nil
		}
		return fmt.Errorf("engine: restore: %w", err)
	}
	e.log.Info("state restored", "pools", len(e.pools), "services", len(e.svcs), "assignments", restored)
	return nil
}

// rebuild replaces the engine's allocator, pools and services by st's,
// restoring every stored assignment as it is. On error nothing changed.
func (e *Engine) rebuild(st store.State) (int, error) {
	alloc := newAllocator(e.opts.AllocationOrder)
	svcs := make(map[string]*service, len(st.Services))
	pools := make([]lb.Pool, 0, len(st.Pools))
	for _, n := range store.Names(st.Pools) {
		pools = append(pools, st.Pools[n].Pool)
	}
	if err := alloc.SetPools(pools); err != nil {
		return 0, fmt.Errorf("engine: stored pools: %w", err)
	}
	restored := 0
	for _, name := range store.Names(st.Services) {
		s := st.Services[name]
		lb.NormalizeService(&s.Spec)
		svcs[name] = &service{Service: s}
		req := s.Spec.Request()
		for _, ip := range st.Assignments[name] {
			if err := alloc.Assign(name, ip, req); err != nil {
				if errors.Is(err, lb.ErrConflict) {
					// Two stored services on one address without
					// sharing: edgelb never commits that, so the store
					// was changed outside it. Moving either would steal
					// the other's address (or move it silently): refuse.
					where := "the store"
					if p, ok := e.st.(interface{ Path() string }); ok {
						where = "store " + p.Path()
					}
					return 0, fmt.Errorf("engine: %s: stored assignment of service %q to %s: %v: %w. %s",
						where, name, ip, err, store.ErrConflict, store.WayOut)
				}
				// Not a conflict: the address left its pool (the config
				// changed while edgelb was stopped). Reconciled below,
				// after every other restore.
				e.log.Warn("stored assignment not restored", "service", name, "ip", ip, "err", err)
				continue
			}
			restored++
		}
	}
	// Swap in. Every rendering is dropped: any service may have changed.
	// refused is rebuilt, not edited: a published view may hold it.
	refused := maps.Clone(e.refused)
	for n := range e.svcs {
		if _, ok := svcs[n]; !ok {
			delete(e.unhealthy, n)
			delete(refused, n)
		}
	}
	e.refused = refused
	e.alloc, e.pools, e.svcs = alloc, st.Pools, svcs
	e.rendered, e.order = nil, nil
	return restored, nil
}

// reconcileStored allocates what is missing, drops what is no longer
// wanted and cleans assignments of services that are gone; one store
// commit (none when the stored state is already complete).
func (e *Engine) reconcileStored(st store.State) error {
	t := e.begin()
	t.before = func(name string) []netip.Addr { return st.Assignments[name] }
	t.reconcileAll = true
	for name := range st.Assignments {
		if _, ok := st.Services[name]; !ok {
			t.touched[name] = true
		}
	}
	return t.commit()
}

func newAllocator(o lb.AllocOrder) *lb.Allocator {
	a := lb.NewAllocator()
	a.SetOrder(o)
	return a
}
