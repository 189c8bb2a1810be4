package statesync

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// Fake is a Syncer that records what it was told and the steps it would
// have taken (the same Takeover/Release functions as Conntrackd) as a
// transcript, for tests of whoever drives it.
type Fake struct {
	mu         sync.Mutex
	owned      int
	transcript []string
	closed     bool
}

var _ Syncer = (*Fake)(nil)

// NewFake returns a fake that starts as a backup, as conntrackd does.
func NewFake() *Fake {
	f := &Fake{}
	f.record("start", Restart(false))
	return f
}

func (f *Fake) record(event string, steps []Step) {
	line := event
	for _, s := range steps {
		line += " " + string(s)
	}
	f.transcript = append(f.transcript, line)
}

// Gaining implements Syncer.
func (f *Fake) Gaining(ctx context.Context, vips []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("statesync: fake closed")
	}
	f.owned += len(vips)
	f.record(fmt.Sprintf("gaining %v:", vips), Takeover())
	return nil
}

// Released implements Syncer.
func (f *Fake) Released(ctx context.Context, vips []netip.Addr, owned int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("statesync: fake closed")
	}
	f.owned = owned
	f.record(fmt.Sprintf("released %v (owning %d):", vips, owned), Release(owned))
	return nil
}

// Status implements Syncer.
func (f *Fake) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := Status{Kind: "fake", Channel: "fake", Running: !f.closed, Role: "backup"}
	if f.owned > 0 {
		st.Role = "primary"
	}
	return st
}

// Close implements Syncer.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.transcript = append(f.transcript, "closed")
	return nil
}

// Transcript returns the events so far, one line each.
func (f *Fake) Transcript() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.transcript)
}
