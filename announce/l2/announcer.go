// Package l2 announces VIPs on a shared L2 segment: among the gateways on the
// segment exactly one owns each VIP, answers ARP (IPv4) and NDP (IPv6) for it
// and announces it with gratuitous ARP / unsolicited neighbour advertisements
// when it takes it over; the others stay silent.
//
// Membership and failure detection are hashicorp/memberlist's (SWIM), tuned
// for sub-second detection; ownership is rendezvous hashing of each VIP over
// the live, ready members (see ownership.go); the handover protocol that
// keeps two gateways from ever answering for one VIP at once is described in
// README.md.
//
// One goroutine owns the ownership state (keeper.go, as lb/engine owns the
// services): the public methods, memberlist's callbacks, the uplink watch
// and the timers send it events; readers see immutable snapshots
// (status.go).
package l2

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/announce/arp"
	"github.com/edgelb/edgelb/announce/ndp"
	"github.com/hashicorp/memberlist"
)

// Responder answers for the owned addresses of one family (announce/arp,
// announce/ndp, or a fake).
type Responder interface {
	SetOwned([]netip.Addr) error
	Close() error
}

// Announcer is the L2 announcer: announce.Announcer and announce.Reporter.
// Its fields are set by New and never change afterwards; the state that
// changes lives in the keeper, touched by its goroutine only.
type Announcer struct {
	cfg        Config
	log        *slog.Logger
	settle     time.Duration
	stateWait  time.Duration
	claimDelay time.Duration
	arp, ndp   Responder // ndp is nil when IPv6 neighbour discovery could not start
	// srcARP/srcNDP answer for the source addresses on SourceInterface when
	// it is not Interface (nil otherwise: arp/ndp answer for them).
	srcARP, srcNDP Responder
	sources        map[netip.Addr]bool
	ndpErr         error
	ml             *memberlist.Memberlist // nil when alone
	acks           *acks                  // when each member last answered a probe (nil when alone)
	name           string                 // member name
	advertise      string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the keeper, the join loop and the state sends

	k     *keeper
	inbox inbox
	done  chan struct{} // closed when the keeper's goroutine has returned
	// snap is the keeper's latest published snapshot: Status, Owned,
	// memberlist's push/pull and the send retries read it without asking.
	snap atomic.Pointer[snapshot]

	closeOnce sync.Once
	closeErr  error
}

var (
	_ announce.Announcer = (*Announcer)(nil)
	_ announce.Reporter  = (*Announcer)(nil)
)

// errClosed is returned by SetVIPs once Close has begun.
var errClosed = errors.New("l2: announcer closed")

// New starts the L2 announcer: responders on cfg.Interface, the uplink
// watch and, with cfg.Members, the memberlist cluster (joined in the
// background). It owns nothing until SetVIPs.
func New(cfg Config) (*Announcer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &Announcer{cfg: cfg, log: log.With("announcer", "l2"), done: make(chan struct{})}
	a.inbox.init()
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.sources = map[netip.Addr]bool{}
	for _, s := range cfg.SourceAddresses {
		a.sources[s.Unmap()] = true
	}
	name := "local"
	if m := cfg.Members; m != nil {
		name = m.Name
		a.settle, a.stateWait, a.claimDelay = m.SettleTime, m.StateWait, m.ClaimDelay
		if a.settle <= 0 {
			a.settle = DefaultSettleTime
		}
		if a.stateWait <= 0 {
			a.stateWait = DefaultStateWait
		}
		if a.claimDelay <= 0 {
			a.claimDelay = DefaultClaimDelay
		}
	}
	a.name = name
	a.k = newKeeper(a)

	a.arp, a.ndp = cfg.ARP, cfg.NDP
	if a.arp == nil {
		r, err := arp.New(arp.Config{Interface: cfg.Interface, GARPCount: cfg.GARPCount, GARPInterval: cfg.GARPInterval, Logger: log})
		if err != nil {
			a.cancel()
			return nil, fmt.Errorf("l2: %w", err)
		}
		a.arp = r
	}
	if a.ndp == nil {
		r, err := ndp.New(ndp.Config{Interface: cfg.Interface, NACount: cfg.GARPCount, NAInterval: cfg.GARPInterval, Logger: log})
		if err != nil {
			// IPv4-only gateways (IPv6 disabled on the uplink) still work;
			// IPv6 VIPs are then refused by SetVIPs and left to others.
			a.ndpErr = err
			a.log.Warn("IPv6 neighbour discovery unavailable: IPv6 VIPs will not be announced from this gateway", "err", err)
		} else {
			a.ndp = r
		}
	}
	if err := a.startSourceResponders(log); err != nil {
		a.closeResponders()
		a.cancel()
		return nil, err
	}
	up := cfg.Uplink
	if up == nil {
		up = NetlinkUplink{Interface: cfg.Interface}
	}
	upc, err := up.Watch(a.ctx)
	if err != nil {
		a.closeResponders()
		a.cancel()
		return nil, err
	}
	// The keeper's goroutine has not started: New may still set its state.
	a.k.uplink = <-upc
	if !a.k.uplink {
		a.log.Warn("uplink down: owning nothing until it is up", "interface", cfg.Interface)
	}
	a.k.updateReadiness()
	a.k.publish()
	if cfg.Members != nil {
		if err := a.startCluster(); err != nil {
			a.closeResponders()
			a.cancel()
			return nil, err
		}
	}

	a.wg.Add(1)
	go a.k.run(upc)
	if cfg.Members != nil {
		a.wg.Add(1)
		go a.joinLoop()
	}
	a.inbox.post(event{kind: evPoke})
	return a, nil
}

// Name implements announce.Announcer.
func (a *Announcer) Name() string { return "l2" }

// SetVIPs implements announce.Announcer: vips is every VIP this gateway can
// serve; it answers for those it owns, of those whose pool L2 announces on
// this interface (VIP.ViaL2). It returns once the responders match
// the decision taken with what is known now. IPv6 VIPs are refused (and
// left to other gateways) when neighbour discovery could not start here.
func (a *Announcer) SetVIPs(ctx context.Context, vips []announce.VIP) error {
	set := map[netip.Addr]bool{}
	var errs []error
	// The floating source addresses are always served: they are owned like
	// a VIP, and the VIPs of their family follow them (keeper.view).
	for s := range a.sources {
		if s.Is4() || a.ndp != nil || a.srcNDP != nil {
			set[s] = true
		}
	}
	for _, v := range vips {
		if !v.ViaL2(a.cfg.Interface) {
			continue // its pool is not announced by L2 on this interface
		}
		addr := v.Addr.Unmap().WithZone("")
		switch {
		case !addr.IsValid() || addr.IsUnspecified() || addr.IsMulticast() || addr.IsLoopback():
			errs = append(errs, fmt.Errorf("l2: VIP %q is not a unicast address", v.Addr))
		case addr.Is6() && a.ndp == nil:
			errs = append(errs, fmt.Errorf("l2: IPv6 VIP %q not announced here: %w", addr, a.ndpErr))
		default:
			set[addr] = true
		}
	}
	if a.closing() {
		return errClosed
	}
	// The VIPs are stored even when ctx has ended: the next decision uses them.
	reply := make(chan error, 1)
	a.inbox.post(event{kind: evSetVIPs, vips: sortedAddrs(set), noReconcile: ctx.Err() != nil, reply: reply})
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case err := <-reply:
		errs = append(errs, err)
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	case <-a.done:
		errs = append(errs, errClosed)
	}
	return errors.Join(errs...)
}

// SetHealthy is the daemon's verdict on the dataplane: an unhealthy gateway
// gives all its VIPs up at once (others take them over) and, once healthy
// again, waits SettleTime before it may own VIPs again. It returns once the
// responders match the new verdict.
func (a *Announcer) SetHealthy(ok bool) {
	reply := make(chan error, 1)
	a.inbox.post(event{kind: evHealthy, up: ok, reply: reply})
	select {
	case <-reply:
	case <-a.done:
	}
}

// closing reports whether Close has begun (from the last snapshot).
func (a *Announcer) closing() bool { return a.snap.Load().closing }

// Close implements announce.Announcer. withdraw=true releases every VIP,
// tells the other gateways at once (they take over without waiting for
// failure detection) and leaves the cluster. withdraw=false stops answering
// without a word, like a crash: the neighbours' caches keep pointing here
// (the dataplane keeps forwarding) until the other gateways detect the
// failure and announce themselves, or this gateway comes back.
func (a *Announcer) Close(withdraw bool) error {
	a.closeOnce.Do(func() {
		var errs []error
		reply := make(chan error, 1)
		a.inbox.post(event{kind: evClose, noReconcile: !withdraw, reply: reply})
		errs = append(errs, <-reply)
		if withdraw && a.ml != nil {
			a.sendStateSync(500 * time.Millisecond)
			errs = append(errs, a.ml.Leave(time.Second))
		}
		// No state is sent from now on: memberlist is shutting down.
		quiet := make(chan error, 1)
		a.inbox.post(event{kind: evStopSends, reply: quiet})
		<-quiet
		if a.ml != nil {
			errs = append(errs, a.ml.Shutdown())
		}
		a.cancel()
		a.wg.Wait()
		errs = append(errs, a.closeResponders())
		a.closeErr = errors.Join(errs...)
	})
	return a.closeErr
}

func (a *Announcer) closeResponders() error {
	var errs []error
	if a.arp != nil {
		errs = append(errs, a.arp.Close())
	}
	if a.ndp != nil {
		errs = append(errs, a.ndp.Close())
	}
	if a.srcARP != nil {
		errs = append(errs, a.srcARP.Close())
	}
	if a.srcNDP != nil {
		errs = append(errs, a.srcNDP.Close())
	}
	return errors.Join(errs...)
}

// Owned returns the VIPs this gateway answers for now, sorted.
func (a *Announcer) Owned() []netip.Addr {
	return append([]netip.Addr(nil), a.snap.Load().owned...)
}
