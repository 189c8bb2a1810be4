package bfdd

import (
	"context"
	"net/netip"
	"slices"
	"sync"
)

// Fake is a Runner for tests, obeying the Daemon's rules: Set validates and
// replaces the session set; a new session starts Down; States lists the
// sessions set, with the state the test gave them (SetStatus).
type Fake struct {
	mu       sync.Mutex
	sessions map[netip.Addr]Session
	states   map[netip.Addr]State
	closed   bool
	sets     int
}

var _ Runner = (*Fake)(nil)

func NewFake() *Fake {
	return &Fake{sessions: map[netip.Addr]Session{}, states: map[netip.Addr]State{}}
}

func (f *Fake) Set(_ context.Context, sessions []Session) error {
	for _, s := range sessions {
		if err := s.Validate(); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets++
	next := map[netip.Addr]Session{}
	for _, s := range sessions {
		next[s.Peer] = s
		if _, ok := f.states[s.Peer]; !ok {
			f.states[s.Peer] = State{Peer: s.Peer, Multihop: s.Multihop, Status: StateDown}
		}
	}
	for a := range f.states {
		if _, ok := next[a]; !ok {
			delete(f.states, a)
		}
	}
	f.sessions = next
	return nil
}

func (f *Fake) States(context.Context) ([]State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrNotRunning
	}
	out := make([]State, 0, len(f.states))
	for _, s := range f.states {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b State) int { return a.Peer.Compare(b.Peer) })
	return out, nil
}

// SetStatus moves a session to status, counting the transition as bfdd does.
func (f *Fake) SetStatus(peer netip.Addr, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.states[peer]
	if !ok || st.Status == status {
		return
	}
	st.Status = status
	switch status {
	case StateUp:
		st.Ups++
	case StateDown:
		st.Downs++
		st.Diagnostic = "control detection time expired"
	}
	f.states[peer] = st
}

// Sessions returns the session set last given to Set.
func (f *Fake) Sessions() []Session {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Session, 0, len(f.sessions))
	for _, s := range f.sessions {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Session) int { return a.Peer.Compare(b.Peer) })
	return out
}

func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}
