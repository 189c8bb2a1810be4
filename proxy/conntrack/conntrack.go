// Package conntrack is a proxy.FlowSource over the kernel's connection
// tracking table (ctnetlink, github.com/ti-mo/conntrack): the live flows the
// nftables dataplane load-balances. It reads only connections carrying
// edgelb's ct mark (proxy.CTMark under proxy.CTMarkMask), so the host's other
// traffic is never dumped, converted or shown.
//
// Watch dumps the table at start, then follows the NEW/UPDATE/DESTROY event
// groups, and re-dumps periodically: the kernel drops multicast events when
// the socket buffer fills (ENOBUFS), and it never sends events for counter
// changes, so the periodic dump is both the repair and the byte counters.
package conntrack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"github.com/ti-mo/netfilter"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
)

// Options configures a Source. The zero value reads edgelb's flows in the
// caller's network namespace and resyncs every DefaultResync.
type Options struct {
	// NetNS is an open network-namespace file descriptor to read from;
	// 0 means the namespace of the calling thread.
	NetNS int
	// Mark and Mask select the connections to read; Mask 0 means
	// proxy.CTMark under proxy.CTMarkMask.
	Mark, Mask uint32
	// Resync is how often Watch re-dumps the table (default DefaultResync).
	Resync time.Duration
	// ReadBuffer is the event socket's receive buffer (default 4 MiB), so
	// bursts of new connections are less likely to overflow it.
	ReadBuffer int
	// Now is the clock for flows whose kernel start timestamp is missing
	// (nf_conntrack_timestamp off); default time.Now.
	Now func() time.Time
	// Updates has Watch follow update events (a flow's state changes) as
	// they happen. Without it Watch hears of new and destroyed flows at
	// once and of state changes at the next re-dump: a connection opened
	// and reset costs it two events instead of five (SYN_RECV,
	// ESTABLISHED and CLOSE are updates), at 1,000 new flows/s the larger
	// part of its CPU. Set it when the dataplane limits flows' events to
	// "destroy" and "assured" (nft.Options.SyncEvents, for state sync):
	// there a flow's first event is the assured update.
	Updates bool
}

// DefaultResync is how often Watch re-dumps: often enough that byte counters
// on the page move visibly, rarely enough to cost nothing at 10k flows.
const DefaultResync = 2 * time.Second

// Source reads edgelb's flows from conntrack. It is safe for concurrent use.
type Source struct {
	opts Options

	mu   sync.Mutex // serialises dumps on conn and guards seen
	conn *ct.Conn
	// seen remembers when a flow was first observed, for flows without a
	// kernel timestamp, so their age stays stable across dumps.
	seen map[uint32]time.Time
	// resynced, when set (tests), runs after each of Watch's dumps.
	resynced func()
}

var _ proxy.FlowSource = (*Source)(nil)

// New opens the dump socket. It fails when ctnetlink is unavailable.
func New(opts Options) (*Source, error) {
	if opts.Mask == 0 {
		opts.Mark, opts.Mask = proxy.CTMark, proxy.CTMarkMask
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	if opts.ReadBuffer <= 0 {
		opts.ReadBuffer = 4 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c, err := ct.Dial(&netlink.Config{NetNS: opts.NetNS})
	if err != nil {
		return nil, fmt.Errorf("conntrack: dial ctnetlink: %w", err)
	}
	return &Source{opts: opts, conn: c, seen: map[uint32]time.Time{}}, nil
}

// Close releases the dump socket. Watch calls already running end on their own
// when their context ends.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

// Snapshot dumps edgelb's flows (the kernel filters by mark).
func (s *Source) Snapshot(ctx context.Context) ([]proxy.Flow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil, fmt.Errorf("conntrack: snapshot: %w", net.ErrClosed)
	}
	raw, err := s.conn.DumpFilter(ct.Filter{Mark: s.opts.Mark, Mask: s.opts.Mask}, nil)
	if err != nil {
		return nil, fmt.Errorf("conntrack: dump flows with mark %#x/%#x: %w", s.opts.Mark, s.opts.Mask, err)
	}
	now := s.opts.Now()
	out := make([]proxy.Flow, 0, len(raw))
	live := make(map[uint32]time.Time, len(raw))
	for i := range raw {
		f := &raw[i]
		start, ok := s.seen[f.ID]
		if !ok {
			start = now
		}
		live[f.ID] = start
		if fl, ok := Convert(f, start); ok {
			out = append(out, fl)
		}
	}
	// Forget flows that are gone so the map stays the size of the table.
	s.seen = live
	return out, nil
}

// firstSeen records (or recalls) when a flow announced by an event appeared.
func (s *Source) firstSeen(id uint32, destroy bool) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.seen[id]
	if !ok {
		t = s.opts.Now()
		if !destroy {
			s.seen[id] = t
		}
	}
	if destroy {
		delete(s.seen, id)
	}
	return t
}

func (s *Source) matches(f *ct.Flow) bool {
	return f.Mark&s.opts.Mask == s.opts.Mark&s.opts.Mask
}

// Watch reports changes to edgelb's flows until ctx ends: first a FlowNew for
// every flow already there, then events, with a re-dump every Options.Resync
// that reports whatever the events missed (and the new byte counters) as
// FlowNew/FlowUpdate/FlowDestroy. fn runs on Watch's goroutine; keep it quick,
// since the kernel drops events while it is busy.
func (s *Source) Watch(ctx context.Context, fn func(proxy.FlowEvent)) error {
	w := &watcher{src: s, fn: fn, known: map[uint64]proxy.Flow{}}
	for {
		err := w.run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		// The kernel overran our socket buffer: events are lost. Open a new
		// socket and resync at once instead of waiting for the next tick.
		if errors.Is(err, unix.ENOBUFS) {
			w.overruns++
			continue
		}
		return err
	}
}

type watcher struct {
	src      *Source
	fn       func(proxy.FlowEvent)
	known    map[uint64]proxy.Flow // what fn has been told is live
	overruns int
}

func (w *watcher) run(ctx context.Context) error {
	s := w.src
	ec, err := ct.Dial(&netlink.Config{NetNS: s.opts.NetNS})
	if err != nil {
		return fmt.Errorf("conntrack: dial event socket: %w", err)
	}
	if err := ec.SetReadBuffer(s.opts.ReadBuffer); err != nil {
		ec.Close()
		return fmt.Errorf("conntrack: set event buffer to %d bytes: %w", s.opts.ReadBuffer, err)
	}
	evc := make(chan ct.Event, 1024)
	groups := []netfilter.NetlinkGroup{netfilter.GroupCTNew, netfilter.GroupCTDestroy}
	if s.opts.Updates {
		groups = netfilter.GroupsCT
	}
	errc, err := ec.Listen(evc, 1, groups)
	if err != nil {
		ec.Close()
		return fmt.Errorf("conntrack: join event groups: %w", err)
	}
	// Close waits for the library's worker, which may be blocked handing us
	// an event or an error: keep draining both until it has stopped.
	defer func() {
		done := make(chan struct{})
		go func() { ec.Close(); close(done) }()
		for {
			select {
			case <-evc:
			case <-errc:
			case <-done:
				return
			}
		}
	}()

	// Listen first, then dump: a flow created in between shows up in both
	// and the dump-then-event order is harmless (known makes it an update).
	if err := w.resync(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(s.opts.Resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return fmt.Errorf("conntrack: events: %w", err)
		case <-tick.C:
			if err := w.resync(ctx); err != nil {
				return err
			}
		case ev := <-evc:
			w.event(ev)
		}
	}
}

func (w *watcher) event(ev ct.Event) {
	if ev.Flow == nil {
		return
	}
	s := w.src
	f := ev.Flow
	id := uint64(f.ID)
	old, wasKnown := w.known[id]
	// Events are not filtered by the kernel: skip other traffic unless it is
	// a flow we reported (whose destroy may lack the mark attribute).
	if !s.matches(f) && !wasKnown {
		return
	}
	destroy := ev.Type == ct.EventDestroy
	fl, ok := Convert(f, s.firstSeen(f.ID, destroy))
	if !ok {
		return
	}
	switch {
	case destroy:
		if !wasKnown {
			return
		}
		// A destroy event may carry no counters: keep the last ones we know.
		if fl.OrigBytes < old.OrigBytes || fl.ReplyBytes < old.ReplyBytes {
			fl.OrigBytes, fl.OrigPackets, fl.ReplyBytes, fl.ReplyPackets = old.OrigBytes, old.OrigPackets, old.ReplyBytes, old.ReplyPackets
		}
		delete(w.known, id)
		w.fn(proxy.FlowEvent{Type: proxy.FlowDestroy, Flow: fl})
	case wasKnown:
		if fl == old {
			return
		}
		w.known[id] = fl
		w.fn(proxy.FlowEvent{Type: proxy.FlowUpdate, Flow: fl})
	default:
		w.known[id] = fl
		w.fn(proxy.FlowEvent{Type: proxy.FlowNew, Flow: fl})
	}
}

// resync dumps and reports the difference from what fn was told.
func (w *watcher) resync(ctx context.Context) error {
	flows, err := w.src.Snapshot(ctx)
	if err != nil {
		return err
	}
	for _, ev := range Diff(w.known, flows) {
		w.fn(ev)
	}
	if w.src.resynced != nil {
		w.src.resynced()
	}
	return nil
}

// Diff turns a fresh dump into the events that bring known up to date, and
// updates known in place: FlowNew for unseen IDs, FlowUpdate for changed
// ones, FlowDestroy (with the last counters seen) for vanished ones.
func Diff(known map[uint64]proxy.Flow, now []proxy.Flow) []proxy.FlowEvent {
	var evs []proxy.FlowEvent
	live := make(map[uint64]struct{}, len(now))
	for _, f := range now {
		live[f.ID] = struct{}{}
		old, ok := known[f.ID]
		switch {
		case !ok:
			evs = append(evs, proxy.FlowEvent{Type: proxy.FlowNew, Flow: f})
		case old != f:
			evs = append(evs, proxy.FlowEvent{Type: proxy.FlowUpdate, Flow: f})
		default:
			continue
		}
		known[f.ID] = f
	}
	for id, f := range known {
		if _, ok := live[id]; !ok {
			evs = append(evs, proxy.FlowEvent{Type: proxy.FlowDestroy, Flow: f})
			delete(known, id)
		}
	}
	return evs
}

// tcpStates are the kernel's enum tcp_conntrack names, as conntrack(8) prints them.
var tcpStates = [...]string{"NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT",
	"CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE", "SYN_SENT2"}

// Convert maps a conntrack entry to a proxy.Flow: the original tuple is
// client → frontend (VIP or node address), the reply tuple's source is the
// backend the DNAT chose. firstSeen stands in for the kernel's start
// timestamp when that is off. Only TCP and UDP flows convert.
func Convert(f *ct.Flow, firstSeen time.Time) (proxy.Flow, bool) {
	o, r := f.TupleOrig, f.TupleReply
	p := proxy.Protocol(o.Proto.Protocol)
	if p != proxy.TCP && p != proxy.UDP {
		return proxy.Flow{}, false
	}
	fl := proxy.Flow{
		ID:           uint64(f.ID),
		Protocol:     p,
		Client:       netip.AddrPortFrom(o.IP.SourceAddress.Unmap(), o.Proto.SourcePort),
		Frontend:     netip.AddrPortFrom(o.IP.DestinationAddress.Unmap(), o.Proto.DestinationPort),
		Backend:      netip.AddrPortFrom(r.IP.SourceAddress.Unmap(), r.Proto.SourcePort),
		Start:        firstSeen,
		OrigBytes:    f.CountersOrig.Bytes,
		OrigPackets:  f.CountersOrig.Packets,
		ReplyBytes:   f.CountersReply.Bytes,
		ReplyPackets: f.CountersReply.Packets,
	}
	if !f.Timestamp.Start.IsZero() {
		fl.Start = f.Timestamp.Start
	}
	if p == proxy.TCP && f.ProtoInfo.TCP != nil {
		if st := int(f.ProtoInfo.TCP.State); st < len(tcpStates) {
			fl.State = tcpStates[st]
		} else {
			fl.State = fmt.Sprintf("STATE_%d", st)
		}
	}
	return fl, true
}
