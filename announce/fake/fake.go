// Package fake is an announce.Announcer that tells the network nothing: it
// records every VIP set it is given and whether it was closed, so logic
// tests of what drives announcers (the effects loop, the daemon) read what
// would have been announced. See README.md.
package fake

import (
	"context"
	"slices"
	"sync"

	"github.com/edgelb/edgelb/announce"
)

// Announcer records SetVIPs and Close calls. The zero value is ready; it is
// safe for concurrent use.
type Announcer struct {
	mu       sync.Mutex
	sets     [][]announce.VIP
	closed   bool
	withdraw bool
}

var _ announce.Announcer = (*Announcer)(nil)

// Name is "fake".
func (a *Announcer) Name() string { return "fake" }

// SetVIPs records a copy of vips (the caller may reuse its slice).
func (a *Announcer) SetVIPs(_ context.Context, vips []announce.VIP) error {
	a.mu.Lock()
	a.sets = append(a.sets, slices.Clone(vips))
	a.mu.Unlock()
	return nil
}

// Close records that it was closed and with which withdraw.
func (a *Announcer) Close(withdraw bool) error {
	a.mu.Lock()
	a.closed, a.withdraw = true, withdraw
	a.mu.Unlock()
	return nil
}

// Last is the last VIP set and how many SetVIPs calls there were (nil, 0:
// none yet).
func (a *Announcer) Last() ([]announce.VIP, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.sets) == 0 {
		return nil, 0
	}
	return a.sets[len(a.sets)-1], len(a.sets)
}

// Closed is whether Close was called, and its withdraw argument.
func (a *Announcer) Closed() (closed, withdraw bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed, a.withdraw
}
