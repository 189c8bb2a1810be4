package store

import (
	"fmt"
	"slices"
	"sync"
)

// Mem is the in-memory fake Store for logic tests. It keeps the same
// all-or-nothing Commit semantics, hands out deep copies, and can be told
// to fail commits (to test that callers roll back).
type Mem struct {
	mu      sync.Mutex
	st      State
	closed  bool
	failErr error
	commits int
}

// NewMem returns an empty in-memory store.
func NewMem() *Mem { return &Mem{st: NewState()} }

// NewMemFrom returns an in-memory store holding a copy of st.
func NewMemFrom(st State) *Mem { return &Mem{st: st.Clone()} }

// FailCommits makes every later Commit fail with err (nil: succeed again).
func (m *Mem) FailCommits(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failErr = err
}

// Commits counts the successful commits (tests check "nothing written").
func (m *Mem) Commits() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commits
}

// Load returns a copy of the state.
func (m *Mem) Load() (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return State{}, ErrClosed
	}
	return m.st.Clone(), nil
}

// Commit applies c; a refused change (check, FailCommits) changes nothing.
func (m *Mem) Commit(c Change) error {
	if err := c.check(); err != nil {
		return fmt.Errorf("commit to store: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.failErr != nil {
		return fmt.Errorf("commit to store: %w", m.failErr)
	}
	// check() above refused everything that could fail, so applying in
	// place is all-or-nothing (and O(change), not O(state)).
	next := m.st
	for _, n := range c.DeletePools {
		delete(next.Pools, n)
	}
	for _, n := range c.DeleteServices {
		delete(next.Services, n)
	}
	for _, n := range c.DeleteAssignments {
		delete(next.Assignments, n)
	}
	for _, p := range c.PutPools {
		next.Pools[p.Name] = clonePool(p)
	}
	for _, s := range c.PutServices {
		next.Services[s.Spec.Name] = Service{Spec: CloneSpec(s.Spec), Origin: s.Origin}
	}
	for n, ips := range c.PutAssignments {
		if len(ips) == 0 {
			delete(next.Assignments, n)
		} else {
			next.Assignments[n] = slices.Clone(ips)
		}
	}
	m.commits++
	return nil
}

// Close marks the store closed.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
