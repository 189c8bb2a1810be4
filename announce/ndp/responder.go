// Package ndp answers IPv6 neighbour discovery for VIPs this gateway owns, on
// one interface: the IPv6 twin of announce/arp.
//
// For each owned VIP it joins the VIP's solicited-node multicast group (so a
// NIC's multicast filter and an MLD-snooping switch deliver the solicitations
// here), answers neighbour solicitations with a neighbour advertisement
// carrying the interface's MAC, and on takeover sends unsolicited neighbour
// advertisements with the Override flag so neighbours replace their cached
// entry at once. The VIPs are not assigned to the interface, so the kernel
// never answers for them.
package ndp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/net/ipv6"
)

const etherTypeIPv6 = 0x86DD

// Defaults for Config.
const (
	DefaultNACount    = 3
	DefaultNAInterval = 250 * time.Millisecond
)

// Config configures a Responder.
type Config struct {
	// Interface is the L2 interface to answer on.
	Interface string
	// NACount unsolicited advertisements are sent NAInterval apart when an
	// address starts being owned (defaults 3 and 250 ms).
	NACount    int
	NAInterval time.Duration
	Logger     *slog.Logger
}

// Stats counts what the responder did.
type Stats struct {
	Replies     uint64 // solicitations answered
	Unsolicited uint64 // unsolicited advertisements sent
	Ignored     uint64 // solicitations for addresses not owned
	Conflicts   uint64 // another MAC advertised an address we own
	Reopens     uint64
}

// packetConn is the part of a packet socket the responder uses.
type packetConn interface {
	ReadFrom(b []byte) (int, net.Addr, error)
	WriteTo(b []byte, addr net.Addr) (int, error)
	Close() error
}

// groupConn joins and leaves IPv6 multicast groups on the interface.
type groupConn interface {
	JoinGroup(group netip.Addr) error
	LeaveGroup(group netip.Addr) error
	Close() error
}

// sockets are what an opener returns: frames in and out, group membership,
// and the interface's MAC.
type sockets struct {
	frames packetConn
	groups groupConn
	mac    net.HardwareAddr
}

type opener func(ifName string) (sockets, error)

func openSockets(ifName string) (sockets, error) {
	ifi, err := net.InterfaceByName(ifName)
	if err != nil {
		return sockets{}, fmt.Errorf("interface %q: %w", ifName, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return sockets{}, fmt.Errorf("interface %q has no Ethernet address (%q)", ifName, ifi.HardwareAddr)
	}
	filter, err := ndFilter()
	if err != nil {
		return sockets{}, fmt.Errorf("assemble ND filter: %w", err)
	}
	pc, err := packet.Listen(ifi, packet.Raw, etherTypeIPv6, &packet.Config{Filter: filter})
	if err != nil {
		return sockets{}, fmt.Errorf("ipv6 packet socket on %q: %w", ifName, err)
	}
	// The ICMPv6 socket is only used to join groups (the kernel then sends
	// MLD reports and programs the NIC's multicast filter); it is not bound
	// to any address, so it works before the interface has finished DAD of
	// its link-local address. It receives nothing: everything is filtered.
	gc, _, err := ndp.Listen(ifi, ndp.Unspecified)
	if err != nil {
		pc.Close()
		return sockets{}, fmt.Errorf("icmpv6 socket on %q: %w", ifName, err)
	}
	var block ipv6.ICMPFilter
	block.SetAll(true)
	if err := gc.SetICMPFilter(&block); err != nil {
		pc.Close()
		gc.Close()
		return sockets{}, fmt.Errorf("icmpv6 filter on %q: %w", ifName, err)
	}
	return sockets{frames: pc, groups: gc, mac: ifi.HardwareAddr}, nil
}

// Responder answers neighbour solicitations for the owned IPv6 addresses.
type Responder struct {
	cfg   Config
	log   *slog.Logger
	open  opener
	retry time.Duration

	// mu guards everything below; advertisements are written under it so
	// none for a released address leaves after SetOwned returns.
	mu     sync.Mutex
	s      sockets // zero while being reopened
	owned  map[netip.Addr]uint64
	gen    uint64
	groups map[netip.Addr]int // solicited-node group → owned VIPs in it
	stats  Stats

	done chan struct{}
	wg   sync.WaitGroup
}

// New opens the sockets on cfg.Interface and starts answering (for nothing
// until SetOwned).
func New(cfg Config) (*Responder, error) {
	return newResponder(cfg, openSockets)
}

func newResponder(cfg Config, open opener) (*Responder, error) {
	if cfg.Interface == "" {
		return nil, errors.New(`ndp: field "interface" is empty`)
	}
	if cfg.NACount <= 0 {
		cfg.NACount = DefaultNACount
	}
	if cfg.NAInterval <= 0 {
		cfg.NAInterval = DefaultNAInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s, err := open(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("ndp: %w", err)
	}
	r := &Responder{cfg: cfg, log: log.With("announcer", "ndp", "interface", cfg.Interface), open: open,
		retry: time.Second, s: s, owned: map[netip.Addr]uint64{}, groups: map[netip.Addr]int{}, done: make(chan struct{})}
	r.wg.Add(1)
	go r.readLoop()
	return r, nil
}

// HardwareAddr is the MAC the responder advertises.
func (r *Responder) HardwareAddr() net.HardwareAddr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.s.mac)
}

// SetOwned declares the complete set of IPv6 addresses to answer for.
// Newly owned ones get their solicited-node group joined and an unsolicited
// advertisement burst (first one before SetOwned returns); removed ones are
// never advertised again once it returns. Non-IPv6 addresses are refused and
// nothing changes.
func (r *Responder) SetOwned(addrs []netip.Addr) error {
	next := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		a = a.WithZone("")
		if !a.Is6() || a.Is4In6() || a.IsMulticast() {
			return fmt.Errorf("ndp: owned address %q is not an IPv6 unicast address", a)
		}
		next[a] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		return errors.New("ndp: responder closed")
	default:
	}
	var errs []error
	for a := range r.owned {
		if !next[a] {
			delete(r.owned, a)
			errs = append(errs, r.leaveLocked(a))
			r.log.Info("stopped answering", "vip", a)
		}
	}
	for a := range next {
		if _, ok := r.owned[a]; ok {
			continue
		}
		r.gen++
		r.owned[a] = r.gen
		// A failed join is reported but the address is still answered:
		// unicast solicitations and links without multicast filtering
		// (veth, bridges, most virtual NICs) still reach us.
		errs = append(errs, r.joinLocked(a))
		r.log.Info("answering", "vip", a, "mac", r.s.mac.String())
		r.sendUnsolicitedLocked(a)
		if r.cfg.NACount > 1 {
			r.wg.Add(1)
			go r.burst(a, r.gen)
		}
	}
	return errors.Join(errs...)
}

func (r *Responder) joinLocked(a netip.Addr) error {
	g, _ := ndp.SolicitedNodeMulticast(a)
	r.groups[g]++
	if r.groups[g] > 1 || r.s.groups == nil {
		return nil
	}
	if err := r.s.groups.JoinGroup(g); err != nil {
		return fmt.Errorf("ndp: join %s for %s: %w", g, a, err)
	}
	return nil
}

func (r *Responder) leaveLocked(a netip.Addr) error {
	g, _ := ndp.SolicitedNodeMulticast(a)
	r.groups[g]--
	if r.groups[g] > 0 {
		return nil
	}
	delete(r.groups, g)
	if r.s.groups == nil {
		return nil
	}
	if err := r.s.groups.LeaveGroup(g); err != nil {
		return fmt.Errorf("ndp: leave %s for %s: %w", g, a, err)
	}
	return nil
}

// Owned returns the addresses currently answered for, sorted.
func (r *Responder) Owned() []netip.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]netip.Addr, 0, len(r.owned))
	for a := range r.owned {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// Stats returns the counters.
func (r *Responder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Close stops answering and closes the sockets (leaving the groups). Safe to call twice.
func (r *Responder) Close() error {
	r.mu.Lock()
	select {
	case <-r.done:
		r.mu.Unlock()
		return nil
	default:
	}
	close(r.done)
	clear(r.owned)
	clear(r.groups)
	err := r.closeSocketsLocked()
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

func (r *Responder) closeSocketsLocked() error {
	var errs []error
	if r.s.frames != nil {
		errs = append(errs, r.s.frames.Close())
	}
	if r.s.groups != nil {
		errs = append(errs, r.s.groups.Close())
	}
	r.s.frames, r.s.groups = nil, nil
	return errors.Join(errs...)
}

func (r *Responder) burst(a netip.Addr, gen uint64) {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.NAInterval)
	defer t.Stop()
	for i := 1; i < r.cfg.NACount; i++ {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		r.mu.Lock()
		if r.owned[a] != gen {
			r.mu.Unlock()
			return
		}
		r.sendUnsolicitedLocked(a)
		r.mu.Unlock()
	}
}

func (r *Responder) sendUnsolicitedLocked(a netip.Addr) {
	if r.s.frames == nil {
		return
	}
	b, err := unsolicitedFrame(r.s.mac, a)
	if err == nil {
		_, err = r.s.frames.WriteTo(b, &packet.Addr{HardwareAddr: allNodesMAC})
	}
	if err != nil {
		r.log.Warn("send unsolicited neighbour advertisement", "vip", a, "err", err)
		return
	}
	r.stats.Unsolicited++
}

// readLoop answers solicitations until Close; a socket error reopens the
// sockets (and rejoins the groups) after a pause.
func (r *Responder) readLoop() {
	defer r.wg.Done()
	buf := make([]byte, 9216)
	for {
		r.mu.Lock()
		pc := r.s.frames
		r.mu.Unlock()
		if pc == nil {
			if !r.reopen() {
				return
			}
			continue
		}
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			select {
			case <-r.done:
				return
			default:
			}
			r.log.Warn("read neighbour discovery", "err", err)
			r.mu.Lock()
			if r.s.frames == pc {
				r.closeSocketsLocked()
			}
			r.mu.Unlock()
			continue
		}
		r.handle(buf[:n])
	}
}

func (r *Responder) reopen() bool {
	for {
		select {
		case <-r.done:
			return false
		case <-time.After(r.retry):
		}
		s, err := r.open(r.cfg.Interface)
		if err != nil {
			r.log.Warn("reopen neighbour discovery sockets", "err", err)
			continue
		}
		r.mu.Lock()
		select {
		case <-r.done:
			r.mu.Unlock()
			s.frames.Close()
			s.groups.Close()
			return false
		default:
		}
		r.s = s
		r.stats.Reopens++
		for g := range r.groups {
			if err := s.groups.JoinGroup(g); err != nil {
				r.log.Warn("rejoin group", "group", g, "err", err)
			}
		}
		for a := range r.owned {
			r.sendUnsolicitedLocked(a)
		}
		r.mu.Unlock()
		return true
	}
}

func (r *Responder) handle(b []byte) {
	m, err := parseMessage(b)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.fromSelf(r.s.mac) {
		return
	}
	switch m.kind {
	case kindAdvert:
		if _, ok := r.owned[m.target]; ok {
			r.stats.Conflicts++
			r.log.Warn("another host advertises an address we own", "vip", m.target, "mac", m.lla.String())
		}
	case kindSolicit:
		if _, ok := r.owned[m.target]; !ok {
			r.stats.Ignored++
			return
		}
		out, err := answerFrame(m, r.s.mac, m.target)
		if err != nil {
			r.log.Warn("neighbour advertisement", "err", err)
			return
		}
		if r.s.frames == nil {
			return
		}
		if _, err := r.s.frames.WriteTo(out, &packet.Addr{HardwareAddr: out[0:6]}); err != nil {
			r.log.Warn("send neighbour advertisement", "vip", m.target, "to", m.src, "err", err)
			return
		}
		r.stats.Replies++
	}
}
