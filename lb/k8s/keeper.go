package k8s

// The keeper is the one goroutine that owns the controller's mutable
// state, as lb/engine's loop owns the services and announce/l2's keeper
// the announcer's: the leadership term (its allocator, pools, requests,
// pending reasons, Warnings sent, decisions and stripped addresses), the
// published Desired and its subscribers, and the dataplane refusals.
// Nothing else touches that state. Workqueue workers hand it operations
// (do) and wait for them; informer handlers and readers (IsLeader,
// Desired, the Manager's lists) never wait: they read the immutable
// snapshot the keeper publishes after each batch. An operation never does
// I/O (API calls, Events and waits happen on the worker, before or after
// it), so no worker waits behind another's network round trip and no
// decision is taken on a half-updated view.

import (
	"maps"
	"sync"

	"github.com/edgelb/edgelb/lb"
)

// keeper is the state; only the keeper goroutine (keep) touches it.
type keeper struct {
	term *term // nil unless leading
	// inherited: the decisions of the last term this gateway led, each
	// kept while the cached Service is the version it was when the term
	// ended (status.go, stepDown).
	inherited map[string]inheritedDecision
	last      lb.Desired
	built     bool // last was computed from synced caches
	subs      []chan lb.Desired
	// refused: Service key → last refusal Warning; refusals: what each
	// source reported last (refused.go).
	refused  map[string]string
	refusals [refusalSources]map[string]string
	// termDone closes when the latest leadership term has ended: the next
	// term starts after it (one term at a time), Run stops after it.
	termDone chan struct{}
	dirty    bool // the snapshot is stale
	bump     bool // the Manager's lists may show a change: move the version
}

// snapshot is what readers see; never mutated once published.
type snapshot struct {
	term    *term // its queues are safe to use from any goroutine
	last    lb.Desired
	pending map[string]string // the term's pending reasons
}

// op is one operation on the keeper's state; done closes once it has run
// and the snapshot that follows it is published.
type op struct {
	f    func(k *keeper)
	done chan struct{}
}

// ops queues operations. Posting never blocks (informer handlers post
// Subscribe's channel; a bounded channel could fill up while the keeper
// is busy); the keeper takes the whole queue at once.
type ops struct {
	mu    sync.Mutex
	q     []op
	ready chan struct{} // capacity 1: "the queue is not empty"
}

func (b *ops) post(o op) {
	b.mu.Lock()
	b.q = append(b.q, o)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

func (b *ops) take() []op {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.q
	b.q = nil
	return q
}

// startKeeper starts the keeper goroutine; stopKeeper (end of Run) ends it.
func (c *Controller) startKeeper() {
	c.inbox.ready = make(chan struct{}, 1)
	c.kstop, c.kdone = make(chan struct{}), make(chan struct{})
	c.snap.Store(&snapshot{})
	k := &keeper{refused: map[string]string{}}
	go c.keep(k)
}

func (c *Controller) stopKeeper() {
	c.kstopOnce.Do(func() { close(c.kstop) })
	<-c.kdone
}

func (c *Controller) keep(k *keeper) {
	defer close(c.kdone)
	for {
		select {
		case <-c.kstop:
			return
		case <-c.inbox.ready:
		}
		batch := c.inbox.take()
		for _, o := range batch {
			o.f(k)
		}
		if k.dirty {
			k.dirty = false
			s := &snapshot{term: k.term, last: k.last}
			if k.term != nil {
				s.pending = maps.Clone(k.term.pending)
			}
			c.snap.Store(s)
		}
		if k.bump {
			k.bump = false
			c.changed() // after the change is visible to readers
		}
		for _, o := range batch {
			if o.done != nil {
				close(o.done)
			}
		}
	}
}

// do runs f on the keeper and waits until it has run and its snapshot is
// published. It reports false, without running f, once the keeper has
// stopped (Run returned).
func (c *Controller) do(f func(k *keeper)) bool {
	done := make(chan struct{})
	c.inbox.post(op{f: f, done: done})
	select {
	case <-done:
		return true
	case <-c.kdone:
		return false
	}
}

// view returns the latest snapshot.
func (c *Controller) view() *snapshot { return c.snap.Load() }
