// Package l2resp is the protocol-independent half of the ARP and NDP
// responders: the set of owned addresses, the announcement burst when an
// address is claimed, the socket that is reopened after an error, and the one
// lock that makes release strict. The protocol plugs in what differs (frames,
// sockets, group membership) through Protocol.
package l2resp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// ErrClosed is returned by SetOwned after Close.
var ErrClosed = errors.New("responder closed")

// Link is the sockets a protocol keeps open on its interface: frames are read
// from it, and it is closed (all of it) after a read error or on Close.
type Link interface {
	ReadFrom(b []byte) (int, net.Addr, error)
	Close() error
}

// Counters are what both protocols count; each maps them onto its own Stats.
type Counters struct {
	Replies   uint64 // requests answered
	Announced uint64 // unsolicited rounds sent (gratuitous ARP, unsolicited NA)
	Ignored   uint64 // requests for addresses not owned
	Conflicts uint64 // another MAC claimed an address we own
	Reopens   uint64 // link reopened after an error
}

// State is what a hook works with. It is valid only while the hook runs:
// the core's lock is held, so a frame written from a hook can never go out
// for an address that SetOwned has already released.
type State[L Link] struct {
	Link  L // zero while the link is being reopened
	MAC   net.HardwareAddr
	Count *Counters
	Log   *slog.Logger
	owned map[netip.Addr]uint64
}

// Owns reports whether a is owned right now.
func (s State[L]) Owns(a netip.Addr) bool {
	_, ok := s.owned[a]
	return ok
}

// Protocol is what differs between ARP and NDP. Open and Parse run without
// the core's lock (they touch no shared state); every other method runs with
// it held.
type Protocol[L Link, F any] interface {
	// Open opens the link on the interface and returns it with the MAC to
	// answer with.
	Open(ifName string) (L, net.HardwareAddr, error)
	// Parse reduces one received frame to what Handle decides on; an error
	// drops the frame.
	Parse(frame []byte) (F, error)
	Handle(s State[L], f F)
	// Announce sends one unsolicited round for an owned address.
	Announce(s State[L], a netip.Addr)
	// Claim and Release follow an address into and out of the owned set.
	// SetOwned reports their errors but still answers for a claimed address.
	Claim(s State[L], a netip.Addr) error
	Release(s State[L], a netip.Addr) error
	// Reopened runs when a new link replaced a failed one, before the owned
	// addresses are announced again.
	Reopened(s State[L])
}

// Defaults for Config.Count and Config.Interval: the first round moves
// neighbours at once, the others cover a lost frame or a switch that was
// still learning.
const (
	DefaultCount    = 3
	DefaultInterval = 250 * time.Millisecond
)

// Config configures a Core; the protocol fills it from its own Config.
type Config struct {
	Name      string // "arp": prefixes errors and tags log lines (announcer=arp)
	Interface string
	Count     int           // announcement rounds per claim; DefaultCount when ≤ 0
	Interval  time.Duration // between rounds; DefaultInterval when ≤ 0
	Logger    *slog.Logger  // slog.Default() when nil
	Retry     time.Duration // pause before reopening a failed link
	// ReadBuffer holds the largest frame the link delivers.
	ReadBuffer int
	// ReadFailed and ReopenFailed are the protocol's log messages for a
	// failed read and a failed reopen.
	ReadFailed, ReopenFailed string
}

// Core answers for a set of owned addresses on one link.
type Core[L Link, F any] struct {
	cfg Config
	log *slog.Logger
	p   Protocol[L, F]

	mu    sync.Mutex
	link  L
	up    bool // link is open; false while reopening and after Close
	mac   net.HardwareAddr
	owned map[netip.Addr]uint64 // address → claim generation (cancels stale bursts)
	gen   uint64
	count Counters

	done chan struct{}
	wg   sync.WaitGroup
}

// Start opens the link and answers (for nothing until SetOwned) until Close.
func Start[L Link, F any](cfg Config, p Protocol[L, F]) (*Core[L, F], error) {
	if cfg.Interface == "" {
		return nil, fmt.Errorf(`%s: field "interface" is empty`, cfg.Name)
	}
	if cfg.Count <= 0 {
		cfg.Count = DefaultCount
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	link, mac, err := p.Open(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	c := &Core[L, F]{cfg: cfg, log: log.With("announcer", cfg.Name, "interface", cfg.Interface), p: p,
		link: link, up: true, mac: mac, owned: map[netip.Addr]uint64{}, done: make(chan struct{})}
	c.wg.Add(1)
	go c.readLoop()
	return c, nil
}

// stateLocked is the hooks' view; c.mu must be held.
func (c *Core[L, F]) stateLocked() State[L] {
	return State[L]{Link: c.link, MAC: c.mac, Count: &c.count, Log: c.log, owned: c.owned}
}

// MAC is the address the responder answers with.
func (c *Core[L, F]) MAC() net.HardwareAddr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.mac)
}

// Counters returns a snapshot of the counters.
func (c *Core[L, F]) Counters() Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// Owned returns the owned addresses, sorted.
func (c *Core[L, F]) Owned() []netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]netip.Addr, 0, len(c.owned))
	for a := range c.owned {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// SetOwned makes addrs (already validated by the protocol) the complete owned
// set. A new address is announced once before SetOwned returns and the rest
// of its burst follows; a removed one is never written about again once it
// returns, which the L2 handover (old owner releases, new one claims) needs.
func (c *Core[L, F]) SetOwned(addrs []netip.Addr) error {
	next := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		next[a] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return fmt.Errorf("%s: %w", c.cfg.Name, ErrClosed)
	default:
	}
	s := c.stateLocked()
	var errs []error
	for a := range c.owned {
		if !next[a] {
			delete(c.owned, a)
			errs = append(errs, c.p.Release(s, a))
			c.log.Info("stopped answering", "vip", a)
		}
	}
	for a := range next {
		if _, ok := c.owned[a]; ok {
			continue
		}
		c.gen++
		c.owned[a] = c.gen
		errs = append(errs, c.p.Claim(s, a))
		c.log.Info("answering", "vip", a, "mac", c.mac.String())
		c.p.Announce(s, a)
		if c.cfg.Count > 1 {
			c.wg.Add(1)
			go c.burst(a, c.gen)
		}
	}
	return errors.Join(errs...)
}

// burst sends the remaining announcement rounds for a, stopping as soon as a
// is released (or released and claimed again: its generation changes).
func (c *Core[L, F]) burst(a netip.Addr, gen uint64) {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for i := 1; i < c.cfg.Count; i++ {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		c.mu.Lock()
		if c.owned[a] != gen {
			c.mu.Unlock()
			return
		}
		c.p.Announce(c.stateLocked(), a)
		c.mu.Unlock()
	}
}

// Close stops answering for everything and closes the link. Safe to call twice.
func (c *Core[L, F]) Close() error {
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return nil
	default:
	}
	close(c.done)
	clear(c.owned)
	err := c.closeLinkLocked()
	c.mu.Unlock()
	c.wg.Wait()
	return err
}

func (c *Core[L, F]) closeLinkLocked() error {
	if !c.up {
		return nil
	}
	err := c.link.Close()
	var zero L
	c.link, c.up = zero, false
	return err
}

// EthernetInterface finds the interface to answer on: both protocols answer
// with its MAC, so one without a 6-byte Ethernet address is refused.
func EthernetInterface(name string) (*net.Interface, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", name, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("interface %q has no Ethernet address (%q)", name, ifi.HardwareAddr)
	}
	return ifi, nil
}
