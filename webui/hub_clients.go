package webui

import (
	"sort"
	"sync"
)

// The hub's stream clients: each a bounded queue of frames (see hub.go).

// client is one SSE stream's queue.
type client struct {
	maxFrames, maxBytes int
	wake                chan struct{}

	mu     sync.Mutex
	q      []*frame
	qBytes int
	resync bool
	hub    *hub
}

func (c *client) push(f *frame) {
	c.mu.Lock()
	if !c.resync {
		if len(c.q) >= c.maxFrames || c.qBytes+len(f.data) > c.maxBytes {
			// Coalesce: the deltas it missed merge into one snapshot later.
			c.q, c.qBytes, c.resync = nil, 0, true
			c.hub.resyncs++
		} else {
			c.q = append(c.q, f)
			c.qBytes += len(f.data)
		}
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take hands the writer what is pending.
func (c *client) take() ([]*frame, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q, r := c.q, c.resync
	c.q, c.qBytes, c.resync = nil, 0, false
	return q, r
}

// register adds a client. With a Last-Event-ID of this boot whose
// successors are all still in history it resumes from there; otherwise it
// starts with a snapshot.
func (h *hub) register(lastEventID string) *client {
	c := &client{maxFrames: h.cfg.queueFrames, maxBytes: h.cfg.queueBytes, wake: make(chan struct{}, 1), hub: h, resync: true}
	h.mu.Lock()
	defer h.mu.Unlock()
	if last, ok := h.parseID(lastEventID); ok && last <= h.seq {
		i := sort.Search(len(h.history), func(i int) bool { return h.history[i].id > last })
		if last == h.seq || (i < len(h.history) && (i > 0 || h.history[0].id == last+1)) {
			c.resync = false
			for _, f := range h.history[i:] {
				c.push(f)
			}
		}
	}
	h.clients[c] = struct{}{}
	select {
	case c.wake <- struct{}{}:
	default: // already woken by a push above
	}
	h.poke()
	return c
}

func (h *hub) unregister(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	if len(h.clients) == 0 {
		h.lastViewer = h.cfg.now()
	}
	h.poke()
}

func (h *hub) clientCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}
