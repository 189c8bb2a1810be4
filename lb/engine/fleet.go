package engine

import (
	"errors"
	"fmt"

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
	for i := 0; i < maxStaleRetries && errors.Is(err, store.ErrStale); i++ {
		e.met.staleRetries.Inc()
		if rerr := e.reload(); rerr != nil && !errors.Is(rerr, store.ErrStale) {
			return rerr
		}
		err = f()
	}
	return err
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
