// Package bgp announces VIPs to routers over BGP with an embedded GoBGP
// speaker (github.com/osrg/gobgp/v3): a host route per VIP (or the
// aggregate the pool asks for) carrying the pool's communities, large
// communities and local-pref, next hop = this gateway's end of each
// session. Every gateway that can serve a VIP announces it, so the router
// spreads traffic over them (ECMP).
//
// Speaker implements announce.Announcer declaratively: SetVIPs diffs the
// complete VIP set against what is advertised, announcing the new or
// changed routes and withdrawing those that left.
package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/edgelb/edgelb/announce"
	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
)

// ErrClosed is returned by SetVIPs after Close.
var ErrClosed = errors.New("bgp speaker closed")

var startMu sync.Mutex

// Speaker is the BGP announcer (announce.Announcer and announce.Reporter).
type Speaker struct {
	cfg       Config
	log       *slog.Logger
	srv       *server.BgpServer
	m         *metrics
	stopWatch context.CancelFunc
	stopBFD   func() // stops the BFD watcher; nil without BFD peers

	// opMu serialises SetVIPs and Close: the changes to GoBGP's RIB and
	// peers. It is taken before mu, never after.
	opMu   sync.Mutex
	cache  *attrCache
	adv    map[netip.Prefix]advertised
	closed bool

	// mu guards peers and owned: written by SetVIPs, by the event watcher
	// and by the GoBGP log hook, read by Status. Held only to copy values.
	mu    sync.Mutex
	peers map[netip.Addr]*peerState
	order []netip.Addr // config order, for Status
	owned []string
}

type advertised struct {
	r    *route
	path *api.Path // as added, so it can be deleted
	// excluded are the peers (config indexes) whose edgelb-not-to set
	// holds the prefix.
	excluded []int
}

var (
	_ announce.Announcer = (*Speaker)(nil)
	_ announce.Reporter  = (*Speaker)(nil)
)

// New validates the config and starts the speaker. Sessions are opened on
// the first SetVIPs, so that after a restart the routers' first UPDATE from
// us (and the End-of-RIB that follows it under graceful restart) already
// carries every VIP rather than an empty table.
func New(cfg Config) (*Speaker, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("bgp config: %w", err)
	}
	s := &Speaker{
		cfg:   cfg,
		log:   cfg.Logger,
		cache: newAttrCache(),
		adv:   map[netip.Prefix]advertised{},
		peers: map[netip.Addr]*peerState{},
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("announcer", "bgp")
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.m = m
	for _, p := range cfg.Peers {
		a := p.Address.Unmap()
		s.peers[a] = &peerState{cfg: p, PeerStatus: PeerStatus{Name: p.name(), Address: a, Port: p.port(), ASN: p.ASN,
			State: StateIdle, LastError: "not started: waiting for the first VIP set"}}
		s.order = append(s.order, a)
		s.m.up.WithLabelValues(p.name()).Set(0)
	}

	s.srv = server.NewBgpServer(server.LoggerOption(gobgpLogger{s}))
	go s.srv.Serve()
	ctx := context.Background()
	g := &api.Global{Asn: cfg.LocalASN, RouterId: cfg.RouterID.String(), ListenPort: -1}
	if cfg.ListenPort > 0 {
		g.ListenPort = cfg.ListenPort
		for _, a := range cfg.ListenAddresses {
			g.ListenAddresses = append(g.ListenAddresses, a.String())
		}
	}
	startMu.Lock() // GoBGP's StartBgp writes package variables (route selection options)
	err = s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: g})
	startMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("start bgp (AS %d, router ID %s, listen port %d): %w", cfg.LocalASN, cfg.RouterID, cfg.ListenPort, err)
	}
	// edgelb only originates: whatever the routers send us is refused, so it
	// is never re-advertised (edgelb must not become a transit between two
	// routers) and never fills the RIB.
	// The global import policy also sees our own paths: accept those (route
	// type "local") and nothing else.
	originateOnly := &api.Policy{Name: "edgelb-originate-only", Statements: []*api.Statement{{
		Name:       "local-paths",
		Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ACCEPT},
	}}}
	err = s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: originateOnly})
	if err == nil {
		err = s.srv.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
			Name: "global", Direction: api.PolicyDirection_IMPORT, Policies: []*api.Policy{{Name: originateOnly.Name}},
			DefaultAction: api.RouteAction_REJECT,
		}})
	}
	if err != nil {
		_ = s.srv.StopBgp(ctx, &api.StopBgpRequest{})
		return nil, fmt.Errorf("bgp: reject imported routes: %w", err)
	}
	if err := s.setupPeerSelection(ctx); err != nil {
		_ = s.srv.StopBgp(ctx, &api.StopBgpRequest{})
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.stopWatch = cancel
	if err := s.srv.WatchEvent(wctx, &api.WatchEventRequest{Peer: &api.WatchEventRequest_Peer{}}, s.onPeerEvent); err != nil {
		cancel()
		_ = s.srv.StopBgp(ctx, &api.StopBgpRequest{})
		return nil, fmt.Errorf("bgp: watch peer events: %w", err)
	}
	if err := s.startBFD(); err != nil {
		cancel()
		_ = s.srv.StopBgp(ctx, &api.StopBgpRequest{})
		return nil, err
	}
	s.log.Info("bgp speaker started", "asn", cfg.LocalASN, "routerID", cfg.RouterID, "listenPort", g.ListenPort, "peers", len(cfg.Peers))
	return s, nil
}

// Name implements announce.Announcer.
func (s *Speaker) Name() string { return "bgp" }

// SetVIPs implements announce.Announcer: afterwards exactly the routes for
// vips are advertised. VIPs whose attributes do not parse are left out and
// named in the error; the others are applied all the same.
func (s *Speaker) SetVIPs(ctx context.Context, vips []announce.VIP) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	want, err := s.cache.desiredRoutes(vips)
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("bgp: %w", err))
	}
	// Withdraw first, then announce: a prefix is either in both sets or in
	// one. A route whose peers changed is withdrawn too (peerpolicy.go).
	gone := exclusions{}
	for p, a := range s.adv {
		if r, keep := want[p]; keep && slices.Equal(a.excluded, s.excluded(r)) {
			continue
		}
		if err := s.srv.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Path: a.path}); err != nil {
			errs = append(errs, fmt.Errorf("bgp: withdraw %s: %w", p, err))
			continue
		}
		gone.add(p, a.excluded)
		delete(s.adv, p)
		s.m.updates.WithLabelValues("withdraw").Inc()
		s.log.Info("bgp route withdrawn", "prefix", p)
	}
	if err := s.applyExclusions(ctx, gone, false); err != nil {
		errs = append(errs, err)
	}
	// The new restricted routes' exclusions go in before their paths.
	fresh := exclusions{}
	for p, r := range want {
		if _, ok := s.adv[p]; !ok {
			fresh.add(p, s.excluded(r))
		}
	}
	exclErr := s.applyExclusions(ctx, fresh, true)
	if exclErr != nil {
		errs = append(errs, exclErr)
	}
	for _, p := range sortedPrefixes(want) {
		r := want[p]
		a, ok := s.adv[p]
		if ok && a.r.equal(r) {
			continue
		}
		ex := s.excluded(r)
		switch {
		case ok && !slices.Equal(a.excluded, ex):
			continue // its withdrawal failed: retried next time
		case !ok && len(ex) > 0 && exclErr != nil:
			continue // not sent at all rather than to a peer it must not reach
		}
		path, err := r.apiPath()
		if err == nil {
			_, err = s.srv.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: path})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("bgp: announce %s: %w", r, err))
			if !ok {
				// No stale exclusion may outlive the attempt: it would
				// filter a later route of the same prefix.
				undo := exclusions{}
				undo.add(p, ex)
				errs = append(errs, s.applyExclusions(ctx, undo, false))
			}
			continue
		}
		s.adv[p] = advertised{r: r, path: path, excluded: ex}
		s.m.updates.WithLabelValues("announce").Inc()
		s.log.Info("bgp route announced", "route", r.String())
	}
	errs = append(errs, s.startPeers(ctx))
	s.publish()
	return errors.Join(errs...)
}

// startPeers adds the peers not yet added (all of them on the first
// SetVIPs; a failed one again on the next).
func (s *Speaker) startPeers(ctx context.Context) error {
	var errs []error
	for _, a := range s.order {
		s.mu.Lock()
		p := s.peers[a]
		started, cfg := p.started, p.cfg
		s.mu.Unlock()
		if started {
			continue
		}
		err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: s.apiPeer(cfg)})
		s.mu.Lock()
		if err != nil {
			p.LastError, p.LastErrorAt = fmt.Sprintf("add peer: %v", err), time.Now()
		} else {
			p.started, p.LastError = true, ""
		}
		s.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("bgp: add peer %s (%s): %w", cfg.name(), cfg.Address, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Speaker) apiPeer(p Peer) *api.Peer {
	fam := family(netip.PrefixFrom(p.Address.Unmap(), 0))
	gr := p.GracefulRestart
	out := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.Unmap().String(),
			PeerAsn:         p.ASN,
			AuthPassword:    p.Password,
			Description:     p.name(),
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry:      uint64(p.connectRetry() / time.Second),
			HoldTime:          uint64(p.holdTime() / time.Second),
			KeepaliveInterval: uint64(p.keepalive() / time.Second),
			// After a reset GoBGP would otherwise wait 30 s before trying again.
			IdleHoldTimeAfterReset: uint64(p.connectRetry() / time.Second),
		}},
		Transport: &api.Transport{RemotePort: uint32(p.port()), PassiveMode: p.Passive},
		AfiSafis: []*api.AfiSafi{{
			Config:            &api.AfiSafiConfig{Family: fam, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: gr}},
		}},
	}
	if p.SourceAddress.IsValid() {
		out.Transport.LocalAddress = p.SourceAddress.Unmap().String()
	}
	if p.MultihopTTL > 0 {
		out.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.MultihopTTL)}
	}
	if gr {
		// NotificationEnabled (RFC 8538): our Close(true) goes out as a Hard
		// Reset, which makes the router drop our routes at once even though
		// graceful restart is on; a vanished process (Close(false), crash)
		// keeps them for RestartTime.
		out.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(s.cfg.restartTime() / time.Second),
			NotificationEnabled: true}
	}
	return out
}

// publish refreshes the advertised-prefix view for Status and the metrics.
// Called with opMu held.
func (s *Speaker) publish() {
	owned := make([]string, 0, len(s.adv))
	var v4, v6 int
	for _, p := range sortedPrefixes(s.adv) {
		owned = append(owned, p.String())
		if p.Addr().Is4() {
			v4++
		} else {
			v6++
		}
	}
	s.m.routes.WithLabelValues("ipv4").Set(float64(v4))
	s.m.routes.WithLabelValues("ipv6").Set(float64(v6))
	s.mu.Lock()
	s.owned = owned
	s.mu.Unlock()
}

func sortedPrefixes[V any](m map[netip.Prefix]V) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return out
}

// Close implements announce.Announcer. withdraw=true withdraws every route
// and closes the sessions (Cease; a Hard Reset where graceful restart is
// negotiated, so routers drop the routes at once). withdraw=false changes
// nothing: the sessions stay up until the process exits, and routers that
// negotiated graceful restart keep the routes as stale for RestartTime
// after that, until the restarted edgelb announces them again.
func (s *Speaker) Close(withdraw bool) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.stopBFD != nil {
		s.stopBFD()
	}
	if !withdraw {
		s.log.Info("bgp speaker closed without withdrawing: sessions stay up until the process exits",
			"routes", len(s.adv))
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	// Explicit withdrawals first, for peers that would keep the routes
	// across the session's end; then the Cease.
	if len(s.adv) > 0 {
		if err := s.srv.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL}); err != nil {
			errs = append(errs, fmt.Errorf("bgp: withdraw all: %w", err))
		} else {
			s.m.updates.WithLabelValues("withdraw").Add(float64(len(s.adv)))
		}
	}
	if err := s.srv.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
		errs = append(errs, fmt.Errorf("bgp: stop: %w", err))
	}
	// BFD after BGP: the Cease went out first, so the router does not
	// count our session's end as a failure.
	if s.cfg.BFD != nil {
		if err := s.cfg.BFD.Close(); err != nil {
			errs = append(errs, fmt.Errorf("bgp: stop bfd: %w", err))
		}
	}
	s.stopWatch()
	n := len(s.adv)
	clear(s.adv)
	s.publish()
	s.mu.Lock()
	for _, p := range s.peers {
		p.State, p.Since = StateIdle, time.Now()
		s.m.up.WithLabelValues(p.Name).Set(0)
	}
	s.mu.Unlock()
	s.log.Info("bgp speaker stopped; routes withdrawn", "routes", n)
	return errors.Join(errs...)
}

// Peers returns every configured session's state, in config order.
func (s *Speaker) Peers() []PeerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PeerStatus, 0, len(s.order))
	for _, a := range s.order {
		p := s.peers[a]
		ps := p.PeerStatus
		if p.bfd != nil {
			ps.BFD = p.bfd.report()
		}
		out = append(out, ps)
	}
	return out
}

// Advertised returns the prefixes currently advertised, sorted.
func (s *Speaker) Advertised() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.owned)
}

// Status implements announce.Reporter: Owned lists the advertised
// prefixes; each peer's Detail is its uptime when Established, else the
// last error.
func (s *Speaker) Status() announce.Status {
	now := time.Now()
	st := announce.Status{Kind: "bgp", Owned: s.Advertised()}
	for _, p := range s.Peers() {
		ps := announce.PeerState{Name: p.Name, Address: netip.AddrPortFrom(p.Address, p.Port).String(), State: p.State, Since: p.Since,
			BFD: p.BFD}
		switch {
		case p.State == StateEstablished:
			ps.Detail = fmt.Sprintf("up %s, AS %d, from %s", now.Sub(p.Since).Round(time.Second), p.ASN, p.LocalAddress)
		case p.LastError != "" && !p.LastErrorAt.IsZero():
			ps.Detail = fmt.Sprintf("%s (%s ago)", p.LastError, now.Sub(p.LastErrorAt).Round(time.Second))
		default:
			ps.Detail = p.LastError
		}
		if b := p.BFD; b != nil {
			// The page and `edgelb status` show Detail; the REST field has it all.
			ps.Detail += fmt.Sprintf("; BFD %s (%s)", b.State, b.Detect)
			if b.State != "up" && b.Diagnostic != "" {
				ps.Detail += ": " + b.Diagnostic
			}
		}
		st.Peers = append(st.Peers, ps)
	}
	return st
}
