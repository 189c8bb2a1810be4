package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// A fleet of gateways shares one store (store.Shared, etcd). The engine is
// still the one writer of this gateway: a change elsewhere reaches it as an
// intent on its own goroutine (Run: resync), never by the watch touching
// engine state; and a commit refused because another gateway committed
// first (store.ErrStale, nothing written) is retried from the store's
// fresh state. Each operation runs on copies and swaps only after its
// commit (txn.go), so a refused one left the engine as it was and can
// simply run again.

// maxStaleRetries bounds how often one operation is retried after losing
// the race to another gateway's commit. Every lost race is another
// gateway's success, so the fleet always progresses; the bound keeps one
// unlucky caller from waiting forever (it gets the ErrStale, a 503).
const maxStaleRetries = 50

// retry runs f; when its commit lost the race (ErrStale) it reloads the
// shared store and runs f again on the fresh state.
func (e *Engine) retry(f func() error) error {
	err := f()
	limit := e.opts.StaleRetries
	if limit == 0 {
		limit = maxStaleRetries
	}
	for i := 0; i < limit && errors.Is(err, store.ErrStale); i++ {
		e.met.staleRetries.Inc()
		if i > 0 {
			// Lost twice in a row: the gateways committing meanwhile are
			// quicker than this one's reload. A short random pause (up to
			// 8 ms) lets it through instead of losing the same race 50
			// times. Short, because the engine waits meanwhile: with up to
			// 32 ms, a gateway's queue of 20 writers backed up past their
			// 10 s timeout (lab/fleet README).
			time.Sleep(time.Duration(rand.IntN(1<<min(i, 3))) * time.Millisecond)
		}
		if rerr := e.reload(); rerr != nil && !errors.Is(rerr, store.ErrStale) {
			return rerr
		}
		err = f()
	}
	return err
}

// write runs a REST write (do). On a lone gateway its refusals are final.
// In a fleet, a refusal read from this gateway's own view — no such name
// (404), a clash with what it holds (409) — may come from a view that lags
// the store: the watch is late, or the store cannot be reached. So it is
// confirmed: while quorum is known lost the answer is the store's
// ErrUnavailable (503: the gateway cannot tell), else the store is read
// again (a linearizable read) and the operation run once more on that.
func (e *Engine) write(ctx context.Context, f func() error) error {
	sh, ok := e.st.(store.Shared)
	if !ok {
		return e.do(ctx, f)
	}
	return e.do(ctx, func() error {
		err := f()
		if !errors.Is(err, lb.ErrNotFound) && !errors.Is(err, lb.ErrConflict) {
			return err
		}
		if herr := sh.Health(); errors.Is(herr, store.ErrUnavailable) {
			return fmt.Errorf("%w (this gateway's view says: %v)", herr, err)
		}
		if rerr := e.reload(); rerr != nil && !errors.Is(rerr, store.ErrStale) {
			return rerr
		}
		return f()
	})
}

// resync takes the shared store's state when it moved past the engine's.
func (e *Engine) resync() error {
	sh, ok := e.st.(store.Shared)
	if !ok || !sh.Behind() {
		return nil
	}
	return e.reload()
}

// reload reads the whole store and makes it the engine's state, then
// allocates what is still missing (a pending service whose address another
// gateway freed) — a commit like any other, which may lose the race again
// (ErrStale: the engine holds the state read, and the next resync goes on).
// The engine's desired state is published either way.
func (e *Engine) reload() error {
	st, err := e.st.Load()
	if err != nil {
		return fmt.Errorf("reload the shared store: %w", err)
	}
	if _, err := e.rebuild(st); err != nil {
		return err
	}
	e.met.reloads.Inc()
	if err := e.reconcileStored(st); err != nil {
		e.refresh()
		return err
	}
	return nil
}

// The config file in a fleet (Options.Fleet). Several gateways' files meet
// one store, and they may differ for a while (a rolling change). If each
// file owned its items, as on a lone gateway, two files would overwrite
// each other on every reload — issue 17's swapped addresses. So a file
// seeds:
//   - a pool or service the store lacks is created from the file (origin
//     config);
//   - one the store holds is left exactly as stored; if this file says
//     otherwise, the disagreement is logged and shown as the service's
//     "failed" status on this gateway until a reload agrees — never written;
//   - an item the file does not list is left alone (another gateway's file
//     may list it), and REST may change or delete any item: the store, not
//     a file, is the truth. To remove a seeded service, take it out of every
//     file, then DELETE it over REST.

// seedConfig applies the file by that rule, in one commit (retried from
// fresh state like any other when another gateway committed first).
func (e *Engine) seedConfig(ctx context.Context, pools []lb.Pool, specs []lb.ServiceSpec) error {
	return e.do(ctx, func() error {
		t := e.begin()
		seen := map[string]bool{}
		for _, p := range pools {
			if err := p.Validate(); err != nil {
				return fmt.Errorf("config: pool %q: %w", p.Name, err)
			}
			if seen[p.Name] {
				return &lb.FieldError{Field: "pools", Value: p.Name, Err: errors.New("duplicate pool name")}
			}
			seen[p.Name] = true
			old, ok := t.pools[p.Name]
			switch {
			case !ok:
				t.putPool(store.Pool{Pool: p, Origin: store.OriginConfig})
			case !reflect.DeepEqual(old.Pool, p):
				e.log.Warn("config file disagrees with the fleet's store: pool kept as stored", "pool", p.Name)
			}
		}
		seen = map[string]bool{}
		next := maps.Clone(e.svcs)
		for i := range specs {
			if seen[specs[i].Name] {
				return &lb.FieldError{Field: "services", Value: specs[i].Name, Err: errors.New("duplicate service name")}
			}
			seen[specs[i].Name] = true
			if _, ok := next[specs[i].Name]; !ok {
				next[specs[i].Name] = &service{Service: store.Service{Spec: specs[i], Origin: store.OriginConfig}}
			}
		}
		vo := e.validation(t.pools, next)
		disagree := map[string]string{}
		for i := range specs {
			spec := specs[i]
			old, ok := e.svcs[spec.Name]
			if ok {
				lb.NormalizeService(&spec)
				if !reflect.DeepEqual(old.Spec, spec) {
					disagree[spec.Name] = "this gateway's config file differs from the fleet's store, which is kept: " +
						"make the files agree (or change the service over REST) and reload"
					e.log.Warn("config file disagrees with the fleet's store: service kept as stored", "service", spec.Name)
				}
				continue
			}
			if err := e.validate(&spec, vo); err != nil {
				return fmt.Errorf("config: service %q: %w", spec.Name, err)
			}
			t.putService(store.Service{Spec: spec, Origin: store.OriginConfig})
		}
		if err := t.commit(); err != nil {
			return fmt.Errorf("apply config: %w", err)
		}
		e.disagree = disagree
		e.bumpVersion()
		return nil
	})
}
