package l2

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// FakeResponder records what it is told to answer for, with timestamps, so
// tests can check that two gateways never answered for one VIP at once.
type FakeResponder struct {
	mu     sync.Mutex
	owned  map[netip.Addr]bool
	events []OwnershipEvent
	closed bool
}

// OwnershipEvent is one change of what a responder answers for.
type OwnershipEvent struct {
	At    time.Time
	Addr  netip.Addr
	Owned bool
}

// NewFakeResponder returns an empty fake.
func NewFakeResponder() *FakeResponder { return &FakeResponder{owned: map[netip.Addr]bool{}} }

// SetOwned implements Responder.
func (f *FakeResponder) SetOwned(addrs []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	next := setOf(addrs)
	for a := range f.owned {
		if !next[a] {
			f.events = append(f.events, OwnershipEvent{now, a, false})
		}
	}
	for _, a := range sortedAddrs(next) {
		if !f.owned[a] {
			f.events = append(f.events, OwnershipEvent{now, a, true})
		}
	}
	f.owned = next
	return nil
}

// Close implements Responder: the fake stops answering for everything.
func (f *FakeResponder) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for _, a := range sortedAddrs(f.owned) {
		f.events = append(f.events, OwnershipEvent{now, a, false})
	}
	clear(f.owned)
	f.closed = true
	return nil
}

// Owned returns what the fake answers for now, sorted.
func (f *FakeResponder) Owned() []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedAddrs(f.owned)
}

// Events returns every change so far.
func (f *FakeResponder) Events() []OwnershipEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// FakeUplink is an Uplink driven by Set.
type FakeUplink struct {
	mu   sync.Mutex
	up   bool
	subs []chan bool
}

// NewFakeUplink starts in the given state.
func NewFakeUplink(up bool) *FakeUplink { return &FakeUplink{up: up} }

// Watch implements Uplink.
func (u *FakeUplink) Watch(ctx context.Context) (<-chan bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch := make(chan bool, 16)
	ch <- u.up
	u.subs = append(u.subs, ch)
	go func() {
		<-ctx.Done()
		u.mu.Lock()
		defer u.mu.Unlock()
		if i := slices.Index(u.subs, ch); i >= 0 {
			u.subs = slices.Delete(u.subs, i, i+1)
			close(ch)
		}
	}()
	return ch, nil
}

// Set changes the state and tells the watchers.
func (u *FakeUplink) Set(up bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.up = up
	for _, ch := range u.subs {
		ch <- up
	}
}
