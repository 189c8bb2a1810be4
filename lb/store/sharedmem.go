package store

import (
	"fmt"
	"sync"
)

// SharedMem is the fake of a store a fleet shares (Etcd), for logic tests:
// one in-memory state with a revision, and a handle per gateway. Each
// handle's Commit succeeds only if no other commit happened since the
// handle last loaded or committed (else ErrStale, nothing written), as
// Etcd's meta/commit guard; other handles are signalled on Changed.
type SharedMem struct {
	mu      sync.Mutex
	mem     *Mem
	rev     int64
	handles []*SharedHandle
	down    error
}

// NewSharedMem returns an empty shared fake store.
func NewSharedMem() *SharedMem { return &SharedMem{mem: NewMem()} }

// SetDown makes every handle report err (wrapped in ErrUnavailable) from
// Health, Load and Commit; nil: reachable again (every handle resyncs).
func (s *SharedMem) SetDown(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = err
	if err == nil {
		for _, h := range s.handles {
			h.force = true
			h.notify()
		}
	}
}

// Handle returns a new gateway's view of the store.
func (s *SharedMem) Handle() *SharedHandle {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &SharedHandle{s: s, changed: make(chan struct{}, 1)}
	s.handles = append(s.handles, h)
	return h
}

// SharedHandle is one gateway's Shared store on a SharedMem.
type SharedHandle struct {
	s       *SharedMem
	seen    int64
	force   bool
	changed chan struct{}
}

var _ Shared = (*SharedHandle)(nil)

func (h *SharedHandle) notify() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *SharedHandle) downErr() error {
	if h.s.down != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, h.s.down)
	}
	return nil
}

// Load returns the state and makes its revision the base of Commit.
func (h *SharedHandle) Load() (State, error) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if err := h.downErr(); err != nil {
		return State{}, err
	}
	st, err := h.s.mem.Load()
	if err == nil {
		h.seen, h.force = h.s.rev, false
	}
	return st, err
}

// Commit applies c if nobody committed since this handle's base revision.
func (h *SharedHandle) Commit(c Change) error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if err := h.downErr(); err != nil {
		return err
	}
	if h.seen != h.s.rev {
		return fmt.Errorf("commit to store: %w", ErrStale)
	}
	if err := h.s.mem.Commit(c); err != nil {
		return err
	}
	h.s.rev++
	h.seen = h.s.rev
	for _, o := range h.s.handles {
		if o != h {
			o.notify()
		}
	}
	return nil
}

func (h *SharedHandle) Close() error             { return nil }
func (h *SharedHandle) Changed() <-chan struct{} { return h.changed }

func (h *SharedHandle) Behind() bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.force || h.seen != h.s.rev
}

func (h *SharedHandle) Health() error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.downErr()
}

func (h *SharedHandle) Revision() int64 {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.seen
}
