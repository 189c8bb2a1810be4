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
package l2

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
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
	name           string                 // member name (immutable)
	advertise      string

	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{}
	wg     sync.WaitGroup

	// mu guards the knowledge below; callbacks from memberlist only take mu
	// and poke, so they never block memberlist on network I/O.
	mu         sync.Mutex
	vips       []netip.Addr // what SetVIPs declared that we can answer for
	healthy    bool
	uplink     bool
	joined     bool // first join attempt done (cluster mode)
	closing    bool
	readySince time.Time
	readyEpoch uint64
	settled    bool
	peers      map[string]*peer
	self       nodeState // last published
	owners     map[netip.Addr]string
	waiting    map[netip.Addr]string
	// eligibleSince: when each of our VIPs became claimable by us (ready and
	// served), for the claim delay (rule 5 in ownership.go).
	eligibleSince map[netip.Addr]time.Time

	// recMu serialises reconcile; claimed is what the responders answer for.
	recMu   sync.Mutex
	claimed map[netip.Addr]bool

	closeOnce sync.Once
	closeErr  error
	// sendMu orders background sends against Close: none starts once
	// sendsClosed is set, so Close's wg.Wait never races a wg.Add.
	sendMu      sync.Mutex
	sendsClosed bool
}

// stateRetry is how often a live member whose state we lack is asked again.
const stateRetry = 300 * time.Millisecond

// peer is what we know of another member.
type peer struct {
	node       memberlist.Node
	alive      bool
	left       bool // left gracefully (vs failed)
	since      time.Time
	state      *nodeState
	vips       map[netip.Addr]bool
	claimed    map[netip.Addr]bool
	lastGen    uint64    // highest gen seen, kept across death so late messages stay stale
	needsState bool      // joined (or asked) since we last sent it our state
	askState   bool      // we have no state of it: ask with our next message
	askedAt    time.Time // last time we asked it for its state
	warned     bool      // "no state" warning logged for this life
}

var (
	_ announce.Announcer = (*Announcer)(nil)
	_ announce.Reporter  = (*Announcer)(nil)
)

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
	a := &Announcer{cfg: cfg, log: log.With("announcer", "l2"), kick: make(chan struct{}, 1),
		healthy: true, peers: map[string]*peer{}, claimed: map[netip.Addr]bool{},
		owners: map[netip.Addr]string{}, waiting: map[netip.Addr]string{}, eligibleSince: map[netip.Addr]time.Time{}}
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
	} else {
		a.joined = true // alone: nothing to learn before owning
	}
	a.name = name
	a.self = nodeState{Name: name, Gen: uint64(time.Now().UnixNano())}

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
	a.uplink = <-upc
	if !a.uplink {
		a.log.Warn("uplink down: owning nothing until it is up", "interface", cfg.Interface)
	}
	if cfg.Members != nil {
		if err := a.startCluster(); err != nil {
			a.closeResponders()
			a.cancel()
			return nil, err
		}
	}
	a.mu.Lock()
	a.updateReadinessLocked()
	a.mu.Unlock()

	a.wg.Add(2)
	go a.loop()
	go a.watchUplink(upc)
	a.poke()
	return a, nil
}

// Name implements announce.Announcer.
func (a *Announcer) Name() string { return "l2" }

// SetVIPs implements announce.Announcer: vips is every VIP this gateway can
// serve; it answers for those it owns. It returns once the responders match
// the decision taken with what is known now. IPv6 VIPs are refused (and
// left to other gateways) when neighbour discovery could not start here.
func (a *Announcer) SetVIPs(ctx context.Context, vips []announce.VIP) error {
	a.mu.Lock()
	closing := a.closing
	a.mu.Unlock()
	if closing {
		return errors.New("l2: announcer closed")
	}
	set := map[netip.Addr]bool{}
	var errs []error
	// The floating source addresses are always served: they are owned like
	// a VIP, and the VIPs of their family follow them (viewLocked).
	for s := range a.sources {
		if s.Is4() || a.ndp != nil || a.srcNDP != nil {
			set[s] = true
		}
	}
	for _, v := range vips {
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
	a.mu.Lock()
	a.vips = sortedAddrs(set)
	a.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	errs = append(errs, a.reconcile())
	return errors.Join(errs...)
}

// SetHealthy is the daemon's verdict on the dataplane: an unhealthy gateway
// gives all its VIPs up at once (others take them over) and, once healthy
// again, waits SettleTime before it may own VIPs again.
func (a *Announcer) SetHealthy(ok bool) {
	a.mu.Lock()
	changed := a.healthy != ok
	a.healthy = ok
	a.updateReadinessLocked()
	a.mu.Unlock()
	if changed {
		a.log.Info("dataplane health", "healthy", ok)
		a.reconcile()
	}
}

// Close implements announce.Announcer. withdraw=true releases every VIP,
// tells the other gateways at once (they take over without waiting for
// failure detection) and leaves the cluster. withdraw=false stops answering
// without a word, like a crash: the neighbours' caches keep pointing here
// (the dataplane keeps forwarding) until the other gateways detect the
// failure and announce themselves, or this gateway comes back.
func (a *Announcer) Close(withdraw bool) error {
	a.closeOnce.Do(func() {
		a.mu.Lock()
		a.closing = true
		a.updateReadinessLocked()
		a.mu.Unlock()
		var errs []error
		if withdraw {
			errs = append(errs, a.reconcile())
			if a.ml != nil {
				a.sendStateSync(500 * time.Millisecond)
				errs = append(errs, a.ml.Leave(time.Second))
			}
		}
		a.sendMu.Lock()
		a.sendsClosed = true
		a.sendMu.Unlock()
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

// poke asks the loop to reconcile (coalesced).
func (a *Announcer) poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

func (a *Announcer) loop() {
	defer a.wg.Done()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.kick:
		}
		if err := a.reconcile(); err != nil {
			a.log.Warn("reconcile", "err", err)
		}
	}
}

func (a *Announcer) watchUplink(ch <-chan bool) {
	defer a.wg.Done()
	for up := range ch {
		a.mu.Lock()
		a.uplink = up
		a.updateReadinessLocked()
		a.mu.Unlock()
		if up {
			a.log.Info("uplink up", "interface", a.cfg.Interface)
		} else {
			a.log.Warn("uplink down: giving VIPs up", "interface", a.cfg.Interface)
		}
		a.poke()
	}
}

// updateReadinessLocked starts or stops the settle period: a gateway may own
// VIPs only once it has been healthy, with its uplink up and in the cluster,
// for SettleTime without interruption.
func (a *Announcer) updateReadinessLocked() {
	want := a.healthy && a.uplink && a.joined && !a.closing
	if !want {
		a.readySince, a.settled = time.Time{}, false
		a.readyEpoch++
		return
	}
	if !a.readySince.IsZero() {
		return
	}
	a.readySince = time.Now()
	a.readyEpoch++
	if a.cfg.Members == nil || a.settle <= 0 {
		a.settled = true
		return
	}
	epoch := a.readyEpoch
	time.AfterFunc(a.settle, func() {
		a.mu.Lock()
		if a.readyEpoch == epoch {
			a.settled = true
		}
		a.mu.Unlock()
		a.poke()
	})
}

// reconcile decides, applies the decision to the responders, then publishes
// the resulting state. The order is the handover's safety: a VIP released
// here is silent on the wire (SetOwned returned) before any other gateway can
// learn of the release, and so before it can claim the VIP.
func (a *Announcer) reconcile() error {
	a.recMu.Lock()
	defer a.recMu.Unlock()

	a.mu.Lock()
	v := a.viewLocked(time.Now())
	a.mu.Unlock()
	d := decide(v)

	var errs []error
	next := map[netip.Addr]bool{}
	for _, c := range d.Claim {
		next[c] = true
	}
	if !equalSets(next, a.claimed) {
		var gained, released []netip.Addr
		for _, c := range d.Claim {
			if !a.claimed[c] {
				gained = append(gained, c)
			}
		}
		for _, c := range sortedAddrs(a.claimed) {
			if !next[c] {
				released = append(released, c)
			}
		}
		// The handover's state goes into the kernel before anyone is told
		// to send here: a packet arriving first would be tracked as new.
		if h := a.cfg.Handover; h != nil && len(gained) > 0 {
			if err := h.Gaining(a.ctx, gained); err != nil {
				a.log.Warn("handover before owning", "vips", gained, "err", err)
			}
		}
		errs = append(errs, a.setOwned(d.Claim)...)
		if h := a.cfg.Handover; h != nil && len(released) > 0 {
			if err := h.Released(a.ctx, released, len(next)); err != nil {
				a.log.Warn("handover after releasing", "vips", released, "err", err)
			}
		}
		for c := range next {
			if !a.claimed[c] {
				a.log.Info("owning VIP", "vip", c)
			}
		}
		for c := range a.claimed {
			if !next[c] {
				a.log.Info("released VIP", "vip", c, "owner", d.Owner[c])
			}
		}
		a.claimed = next
	}

	a.mu.Lock()
	a.owners, a.waiting = d.Owner, d.Waiting
	st := nodeState{Name: a.name, Healthy: a.healthy && !a.closing, Uplink: a.uplink, Settled: a.settled,
		VIPs: slices.Clone(a.vips), Claimed: slices.Clone(d.Claim)}
	changed := !sameState(st, a.self)
	if changed {
		st.Gen = a.self.Gen + 1
		a.self = st
	}
	type out struct {
		n   memberlist.Node
		ask bool
	}
	var sends []out
	now := time.Now()
	unknown := false
	// A handover waits for the holder's published release; should that
	// message be lost, asking the holder again beats waiting for push/pull.
	for _, holder := range d.Waiting {
		if p := a.peers[holder]; p != nil && p.alive && now.Sub(p.askedAt) >= stateRetry {
			p.askState = true
		}
	}
	if len(d.Waiting) > 0 {
		unknown = true // re-check soon
	}
	for name, p := range a.peers {
		if !p.alive {
			continue
		}
		// A live member whose state we lack blocks every new claim (it might
		// answer for anything): ask again until it answers.
		if p.state == nil {
			unknown = true
			if now.Sub(p.askedAt) >= stateRetry {
				p.askState = true
			}
			if !p.warned && now.Sub(p.since) >= a.stateWait {
				p.warned = true
				a.log.Warn("no state from a live member yet: new claims wait for it", "member", name, "since", p.since)
			}
		}
		if !(changed || p.needsState || p.askState) {
			continue
		}
		ask := p.askState
		if ask {
			p.askedAt = now
		}
		sends = append(sends, out{p.node, ask})
		p.needsState, p.askState = false, false
	}
	if unknown {
		time.AfterFunc(stateRetry, a.poke)
	}
	plain := a.self.marshal()
	asking := a.self
	asking.WantReply = true
	ask := asking.marshal()
	a.mu.Unlock()

	if a.ml != nil {
		for _, o := range sends {
			if o.ask {
				a.send(o.n, ask)
			} else {
				a.send(o.n, plain)
			}
		}
	}
	return errors.Join(errs...)
}

// viewLocked builds decide's input from what we know now.
func (a *Announcer) viewLocked(now time.Time) view {
	v := view{Self: a.name, VIPs: a.vips, Claimed: a.claimed,
		Ready: a.healthy && a.uplink && a.settled && !a.closing, Fresh: map[netip.Addr]bool{}}
	if len(a.sources) > 0 {
		// One owner for every VIP and source address, both families: the
		// connection-state sync is primary-backup (conntrack-tools), and a
		// gateway primary for one family only would commit, flush and
		// resend the other family's connections it does not carry.
		k := sortedAddrs(a.sources)[0]
		v.Key = map[netip.Addr]netip.Addr{}
		for _, vip := range a.vips {
			v.Key[vip] = k
		}
	}
	// Rule 5 bookkeeping: eligibility starts now for VIPs that just became
	// claimable, ends for those that stopped being.
	if !v.Ready {
		clear(a.eligibleSince)
	} else {
		keep := map[netip.Addr]bool{}
		for _, vip := range a.vips {
			keep[vip] = true
			since, ok := a.eligibleSince[vip]
			if !ok {
				since = now
				a.eligibleSince[vip] = now
				if a.claimDelay > 0 {
					time.AfterFunc(a.claimDelay, a.poke)
				}
			}
			if now.Sub(since) < a.claimDelay {
				v.Fresh[vip] = true
			}
		}
		for vip := range a.eligibleSince {
			if !keep[vip] {
				delete(a.eligibleSince, vip)
			}
		}
	}
	for name, p := range a.peers {
		pv := peerView{Name: name, Alive: p.alive}
		switch {
		case p.state != nil:
			pv.Known, pv.Ready, pv.VIPs, pv.Claimed = true, p.state.Ready(), p.vips, p.claimed
		}
		v.Peers = append(v.Peers, pv)
	}
	return v
}

func sameState(a, b nodeState) bool {
	return a.Healthy == b.Healthy && a.Uplink == b.Uplink && a.Settled == b.Settled &&
		slices.Equal(a.VIPs, b.VIPs) && slices.Equal(a.Claimed, b.Claimed)
}

func equalSets(a, b map[netip.Addr]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// Owned returns the VIPs this gateway answers for now, sorted.
func (a *Announcer) Owned() []netip.Addr {
	a.recMu.Lock()
	defer a.recMu.Unlock()
	return sortedAddrs(a.claimed)
}

// Status implements announce.Reporter: the owned VIPs, then this gateway
// and every member with its state.
func (a *Announcer) Status() announce.Status {
	owned := a.Owned()
	var suspect map[string]bool
	if a.ml != nil {
		suspect = map[string]bool{}
		for _, n := range a.ml.Members() {
			if n.State == memberlist.StateSuspect {
				suspect[n.Name] = true
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st := announce.Status{Kind: "l2"}
	for _, o := range owned {
		st.Owned = append(st.Owned, o.String())
	}
	self := announce.PeerState{Name: a.name, Address: a.advertise, State: "alive",
		Detail: "self, " + readiness(a.self, a.closing) + fmt.Sprintf(", serves %d, owns %d", len(a.vips), len(owned))}
	if len(a.waiting) > 0 {
		var w []string
		for _, vip := range sortedKeys(a.waiting) {
			w = append(w, fmt.Sprintf("%s (held by %s)", vip, a.waiting[vip]))
		}
		self.Detail += "; waiting to take " + strings.Join(w, ", ")
	}
	st.Peers = append(st.Peers, self)
	names := make([]string, 0, len(a.peers))
	for n := range a.peers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := a.peers[n]
		ps := announce.PeerState{Name: n, Address: p.node.Address()}
		switch {
		case p.alive && suspect[n]:
			ps.State = "suspect"
		case p.alive:
			ps.State = "alive"
		case p.left:
			ps.State = "left"
		default:
			ps.State = "dead"
		}
		switch {
		case !p.alive:
			ps.Detail = "since " + p.since.Format(time.RFC3339)
		case p.state == nil:
			ps.Detail = "state not received yet"
		default:
			ps.Detail = readiness(*p.state, false) + fmt.Sprintf(", serves %d, owns %d", len(p.state.VIPs), len(p.state.Claimed))
		}
		st.Peers = append(st.Peers, ps)
	}
	return st
}

func readiness(s nodeState, closing bool) string {
	var why []string
	if closing {
		why = append(why, "closing")
	} else if !s.Healthy {
		why = append(why, "dataplane unhealthy")
	}
	if !s.Uplink {
		why = append(why, "uplink down")
	}
	if !s.Settled && s.Healthy && s.Uplink {
		why = append(why, "settling")
	}
	if len(why) == 0 {
		return "ready"
	}
	return "not ready (" + strings.Join(why, ", ") + ")"
}

func sortedKeys(m map[netip.Addr]string) []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
