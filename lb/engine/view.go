package engine

import (
	"context"
	"fmt"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// view is the state readers see: what the last finished operation left.
// Reads (Pools, Pool, Services, Service) take it without queueing on the
// engine goroutine, so they never wait behind a write — in a fleet a write
// may retry against etcd up to 50 times, and a gateway whose REST reads
// stalled behind such a storm looked dead to its monitoring (the fleet
// test's sampler timed out on GET /services at load 9.9).
//
// Sharing without copying is safe because the engine replaces these
// values and never writes into them once swapped in: a transaction works
// on a cloned allocator and copied maps and swaps them in whole (txn.go);
// a service whose pending reason changes is a new *service; refused and
// disagree are rebuilt, not edited (SetRefused, fleet.go, rebuild).
type view struct {
	alloc    *lb.Allocator
	pools    map[string]store.Pool
	svcs     map[string]*service
	refused  map[string]string
	disagree map[string]string
	ownHit   map[string]string
}

// publishView makes the engine's current state the readers' view. It runs
// on the engine goroutine after each operation, before the caller hears
// back, so a caller reads its own write.
func (e *Engine) publishView() { e.view.Store(e.current()) }

// current is the engine's state as a view (engine goroutine only).
func (e *Engine) current() *view {
	return &view{alloc: e.alloc, pools: e.pools, svcs: e.svcs, refused: e.refused, disagree: e.disagree, ownHit: e.ownHit}
}

// read returns the view, or why there is none to read.
func (e *Engine) read(ctx context.Context) (*view, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-e.stopped:
		return nil, ErrStopped
	default:
	}
	return e.view.Load(), nil
}

func (v *view) poolStatus(name string) lb.PoolStatus {
	sp := v.pools[name]
	p := sp.Pool
	p.Ranges = append([]lb.Range(nil), p.Ranges...)
	size, used := v.alloc.Usage(name)
	return lb.PoolStatus{Pool: p, Size: size, Used: used, Origin: lb.Origin(sp.Origin)}
}

func (v *view) serviceStatus(name string) lb.ServiceStatus {
	s := v.svcs[name]
	failed := v.ownHit[name] // left out: a VIP or backend is the gateway's own address (own.go)
	if failed == "" {
		failed = v.refused[name]
	}
	if failed == "" {
		failed = v.disagree[name] // fleet: this gateway's config file says otherwise (fleet.go)
	}
	return lb.ServiceStatus{Spec: store.CloneSpec(s.Spec), VIPs: v.alloc.IPs(name), Pending: s.pending, Failed: failed,
		Origin: lb.Origin(s.Origin)}
}

func notFound(kind, name string) error {
	return fmt.Errorf("%s %q: %w", kind, name, lb.ErrNotFound)
}

// Pools lists every pool with its usage, sorted by name.
func (e *Engine) Pools(ctx context.Context) ([]lb.PoolStatus, error) {
	v, err := e.read(ctx)
	if err != nil {
		return nil, err
	}
	var out []lb.PoolStatus
	for _, n := range store.Names(v.pools) {
		out = append(out, v.poolStatus(n))
	}
	return out, nil
}

// Pool returns one pool with its usage.
func (e *Engine) Pool(ctx context.Context, name string) (lb.PoolStatus, error) {
	v, err := e.read(ctx)
	if err != nil {
		return lb.PoolStatus{}, err
	}
	if _, ok := v.pools[name]; !ok {
		return lb.PoolStatus{}, notFound("pool", name)
	}
	return v.poolStatus(name), nil
}

// Services lists every standalone service, sorted by name.
func (e *Engine) Services(ctx context.Context) ([]lb.ServiceStatus, error) {
	v, err := e.read(ctx)
	if err != nil {
		return nil, err
	}
	var out []lb.ServiceStatus
	for _, n := range store.Names(v.svcs) {
		out = append(out, v.serviceStatus(n))
	}
	return out, nil
}

// Service returns one service.
func (e *Engine) Service(ctx context.Context, name string) (lb.ServiceStatus, error) {
	v, err := e.read(ctx)
	if err != nil {
		return lb.ServiceStatus{}, err
	}
	if _, ok := v.svcs[name]; !ok {
		return lb.ServiceStatus{}, notFound("service", name)
	}
	return v.serviceStatus(name), nil
}
