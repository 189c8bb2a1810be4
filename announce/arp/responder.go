// Package arp answers ARP for IPv4 VIPs this gateway owns, on one interface.
//
// The VIPs are not assigned to any interface (the nftables dataplane
// catches them in prerouting), so the kernel never answers ARP for them: this
// responder is the only voice for a VIP on the segment, and it speaks only
// for the addresses it was told it owns (SetOwned). When it starts owning an
// address it sends a short burst of gratuitous ARP so neighbours and switches
// move to this gateway at once; when it stops, it falls silent at once.
package arp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/packet"
)

// EtherType of ARP (the packet socket's protocol).
const etherTypeARP = 0x0806

// Defaults for Config.
const (
	DefaultGARPCount    = 3
	DefaultGARPInterval = 250 * time.Millisecond
)

// Config configures a Responder.
type Config struct {
	// Interface is the L2 interface to answer on (e.g. "eth0").
	Interface string
	// GARPCount gratuitous ARP rounds are sent when an address starts being
	// owned, GARPInterval apart (defaults 3 and 250 ms): the first moves
	// neighbours at once, the others cover a lost frame or a switch that
	// was still learning.
	GARPCount    int
	GARPInterval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Stats counts what the responder did, for tests, metrics and the page.
type Stats struct {
	Replies   uint64 // requests answered
	GARPs     uint64 // gratuitous ARP rounds sent
	Ignored   uint64 // requests for addresses not owned
	Conflicts uint64 // another MAC announced or answered for an address we own
	Reopens   uint64 // packet socket reopened after an error
}

// packetConn is the part of a packet socket the responder uses (a fake in tests).
type packetConn interface {
	ReadFrom(b []byte) (int, net.Addr, error)
	WriteTo(b []byte, addr net.Addr) (int, error)
	SetReadDeadline(t time.Time) error
	Close() error
}

// opener opens the packet socket on the named interface and returns it with
// the interface's MAC; replaced in tests.
type opener func(ifName string) (packetConn, net.HardwareAddr, error)

func openPacket(ifName string) (packetConn, net.HardwareAddr, error) {
	ifi, err := net.InterfaceByName(ifName)
	if err != nil {
		return nil, nil, fmt.Errorf("interface %q: %w", ifName, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, nil, fmt.Errorf("interface %q has no Ethernet address (%q)", ifName, ifi.HardwareAddr)
	}
	c, err := packet.Listen(ifi, packet.Raw, etherTypeARP, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("arp packet socket on %q: %w", ifName, err)
	}
	return c, ifi.HardwareAddr, nil
}

// Responder answers ARP requests for the owned IPv4 addresses.
type Responder struct {
	cfg   Config
	log   *slog.Logger
	open  opener
	retry time.Duration // pause before reopening a failed socket

	// mu guards everything below. A reply or GARP is written while mu is
	// held, so once SetOwned returns no frame for a removed address can
	// still be sent: the L2 handover relies on that.
	mu    sync.Mutex
	conn  packetConn
	mac   net.HardwareAddr
	owned map[netip.Addr]uint64 // address → claim generation (cancels stale GARP bursts)
	gen   uint64
	stats Stats

	done chan struct{}
	wg   sync.WaitGroup
}

// New opens the packet socket on cfg.Interface and starts answering (for
// nothing until SetOwned). It fails when the interface does not exist.
func New(cfg Config) (*Responder, error) {
	return newResponder(cfg, openPacket)
}

func newResponder(cfg Config, open opener) (*Responder, error) {
	if cfg.Interface == "" {
		return nil, errors.New(`arp: field "interface" is empty`)
	}
	if cfg.GARPCount <= 0 {
		cfg.GARPCount = DefaultGARPCount
	}
	if cfg.GARPInterval <= 0 {
		cfg.GARPInterval = DefaultGARPInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	r := &Responder{cfg: cfg, log: log.With("announcer", "arp", "interface", cfg.Interface), open: open,
		retry: time.Second, owned: map[netip.Addr]uint64{}, done: make(chan struct{})}
	conn, mac, err := open(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("arp: %w", err)
	}
	r.conn, r.mac = conn, mac
	r.wg.Add(1)
	go r.readLoop()
	return r, nil
}

// HardwareAddr is the MAC the responder answers with.
func (r *Responder) HardwareAddr() net.HardwareAddr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mac)
}

// SetOwned declares the complete set of IPv4 addresses to answer for. Newly
// owned addresses get a gratuitous ARP burst (the first round before SetOwned
// returns); removed ones are never answered again once it returns. Non-IPv4
// addresses are refused and nothing changes.
func (r *Responder) SetOwned(addrs []netip.Addr) error {
	next := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if !a.Is4() {
			return fmt.Errorf("arp: owned address %q is not IPv4", a)
		}
		next[a] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		return errors.New("arp: responder closed")
	default:
	}
	for a := range r.owned {
		if !next[a] {
			delete(r.owned, a)
			r.log.Info("stopped answering", "vip", a)
		}
	}
	for a := range next {
		if _, ok := r.owned[a]; ok {
			continue
		}
		r.gen++
		r.owned[a] = r.gen
		r.log.Info("answering", "vip", a, "mac", r.mac.String())
		r.sendGARPLocked(a)
		if r.cfg.GARPCount > 1 {
			r.wg.Add(1)
			go r.garpBurst(a, r.gen)
		}
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

// Close stops answering for everything and closes the socket. Safe to call twice.
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
	var err error
	if r.conn != nil {
		err = r.conn.Close()
		r.conn = nil
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// garpBurst sends the remaining gratuitous ARP rounds for a, stopping as soon
// as a is released (or released and claimed again: gen changes).
func (r *Responder) garpBurst(a netip.Addr, gen uint64) {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.GARPInterval)
	defer t.Stop()
	for i := 1; i < r.cfg.GARPCount; i++ {
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
		r.sendGARPLocked(a)
		r.mu.Unlock()
	}
}

func (r *Responder) sendGARPLocked(a netip.Addr) {
	if r.conn == nil {
		return // socket being reopened; the next rounds will go out
	}
	frames, err := garpFrames(r.mac, a)
	if err != nil {
		r.log.Warn("gratuitous arp", "vip", a, "err", err)
		return
	}
	for _, b := range frames {
		if _, err := r.conn.WriteTo(b, &packet.Addr{HardwareAddr: broadcast}); err != nil {
			r.log.Warn("send gratuitous arp", "vip", a, "err", err)
			return
		}
	}
	r.stats.GARPs++
}

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// readLoop answers requests until Close. A socket error (interface deleted
// and recreated, driver reset) reopens the socket after a pause instead of
// giving up: the announcer keeps its ownership and the answers resume.
func (r *Responder) readLoop() {
	defer r.wg.Done()
	buf := make([]byte, 1518)
	for {
		r.mu.Lock()
		conn := r.conn
		r.mu.Unlock()
		if conn == nil {
			if !r.reopen() {
				return
			}
			continue
		}
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			select {
			case <-r.done:
				return
			default:
			}
			r.log.Warn("read arp", "err", err)
			r.mu.Lock()
			if r.conn == conn {
				conn.Close()
				r.conn = nil
			}
			r.mu.Unlock()
			continue
		}
		r.handle(buf[:n])
	}
}

// reopen retries opening the socket every r.retry until it works or Close.
func (r *Responder) reopen() bool {
	for {
		select {
		case <-r.done:
			return false
		case <-time.After(r.retry):
		}
		conn, mac, err := r.open(r.cfg.Interface)
		if err != nil {
			r.log.Warn("reopen arp socket", "err", err)
			continue
		}
		r.mu.Lock()
		select {
		case <-r.done:
			r.mu.Unlock()
			conn.Close()
			return false
		default:
		}
		r.conn, r.mac = conn, mac
		r.stats.Reopens++
		// Neighbours may have missed us while the socket was down: announce again.
		for a := range r.owned {
			r.sendGARPLocked(a)
		}
		r.mu.Unlock()
		return true
	}
}

// handle decides on one received frame.
func (r *Responder) handle(b []byte) {
	f, err := parseFrame(b)
	if err != nil {
		return // not ours to judge: malformed or foreign frames are dropped
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if f.fromSelf(r.mac) {
		return
	}
	switch f.kind {
	case kindGratuitous, kindReply:
		if _, ok := r.owned[f.senderIP]; ok {
			r.stats.Conflicts++
			r.log.Warn("another host claims an address we own", "vip", f.senderIP, "mac", f.senderHW.String())
		}
	case kindRequest:
		if _, ok := r.owned[f.targetIP]; !ok {
			r.stats.Ignored++
			return
		}
		out, err := replyFrame(f, r.mac, f.targetIP)
		if err != nil {
			r.log.Warn("arp reply", "err", err)
			return
		}
		if r.conn == nil {
			return
		}
		if _, err := r.conn.WriteTo(out, &packet.Addr{HardwareAddr: f.ethSrc}); err != nil {
			r.log.Warn("send arp reply", "vip", f.targetIP, "to", f.senderIP, "err", err)
			return
		}
		r.stats.Replies++
	}
}
