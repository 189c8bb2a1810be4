package daemon

import (
	"time"

	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/statesync"
)

// newStateSync starts one conntrackd per peer when stateSync.conntrackd is
// configured (nil, nil otherwise); their files live in
// <state.dir>/conntrackd/<port>.
func newStateSync(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (statesync.Syncer, error) {
	c := cfg.StateSync.Conntrackd
	if c == nil {
		return nil, nil
	}
	addr := c.Address
	if !addr.IsValid() {
		want4 := c.Peers[0].Is4()
		var err error
		if addr, err = firstAddrOn(c.Interface, want4); err != nil {
			return nil, fmt.Errorf("stateSync.conntrackd.address not set and %w", err)
		}
	}
	s, err := statesync.StartMesh(statesync.Options{Binary: c.Binary, Dir: filepath.Join(cfg.State.Dir, "conntrackd"),
		Interface: c.Interface, Address: addr, Port: c.Port, CommitTimeout: c.CommitTimeout,
		Ignore: ownAddrs()}, c.Peers, log)
	if err != nil {
		return nil, err
	}
	if reg != nil {
		reg.MustRegister(&syncCollector{s: s})
	}
	return s, nil
}

// ownAddrs are the gateway's own addresses: connections to and from the
// gateway itself (memberlist, the API, BGP) are its own business and are not
// synced, as in conntrack-tools' examples. VIPs and source addresses are
// never local addresses with the nftables dataplane.
func ownAddrs() []netip.Addr {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && !ip.Unmap().IsLinkLocalUnicast() {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// firstAddrOn is the first global unicast address of a family on a link.
func firstAddrOn(ifname string, want4 bool) (netip.Addr, error) {
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("interface %q: %w", ifname, err)
	}
	fam := netlink.FAMILY_V6
	if want4 {
		fam = netlink.FAMILY_V4
	}
	addrs, err := netlink.AddrList(l, fam)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %q: %w", ifname, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().IsGlobalUnicast() && !ip.IsLinkLocalUnicast() {
			return ip.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %q has no usable address of the channel's family", ifname)
}

// syncReporter shows the sync beside the announcers (REST
// /api/v1/status/announcers and the page): one row for conntrackd (the
// links' counters summed), one per peer with its own channel's.
type syncReporter struct{ s statesync.Syncer }

func (r syncReporter) Status() announce.Status {
	st := r.s.Status()
	state := "stopped"
	if st.Running {
		state = "running"
	}
	out := announce.Status{Kind: "statesync"}
	self := announce.PeerState{Name: st.Kind, Address: st.Channel, State: state,
		Detail: fmt.Sprintf("%s; %d own and %d synced connections; %d sent, %d received sync packets; %d errors, %d restarts",
			st.Role, st.Stats.Internal, st.Stats.External, st.Stats.SentPackets, st.Stats.RecvPackets, st.Errors, st.Restarts)}
	self.Detail += fmt.Sprintf("; lag: %d messages unacknowledged, %d unsent; last sync packet from a peer %s ago",
		st.Stats.Unacked, st.Stats.Unsent, st.PeerSilence.Round(10*time.Millisecond))
	if st.LastError != "" {
		self.Detail += "; last error: " + st.LastError
	}
	if !st.LastTakeover.IsZero() {
		self.Detail += fmt.Sprintf("; last takeover %s (steps took %s)", st.LastTakeover.Format("15:04:05"), st.LastTakeoverTook.Round(1e5))
	}
	out.Peers = append(out.Peers, self)
	for _, l := range st.Links {
		for _, p := range l.Peers {
			out.Peers = append(out.Peers, syncPeerRow(l, p))
		}
	}
	return out
}

// syncPeerRow is one peer: its state is the peer's own (alive, dead after
// statesync.PeerDeadAfter of silence, unknown while the local conntrackd
// is down), not the local conntrackd's.
func syncPeerRow(l statesync.Status, peer string) announce.PeerState {
	q := l.Stats.Unacked
	row := announce.PeerState{Name: "sync peer", Address: peer, State: l.PeerState, LastPacket: l.LastPacket,
		Silence: l.PeerSilence, Queue: &q}
	local := "conntrackd running"
	if !l.Running {
		local = "conntrackd stopped"
	}
	heard := "no sync packet seen yet"
	if !l.LastPacket.IsZero() {
		heard = fmt.Sprintf("last sync packet %s ago", l.PeerSilence.Round(10*time.Millisecond))
	}
	row.Detail = fmt.Sprintf("%s; %s; %d synced connections; %d sent, %d received sync packets; %d unacknowledged; %s; %d restarts",
		l.Channel, local, l.Stats.External, l.Stats.SentPackets, l.Stats.RecvPackets, l.Stats.Unacked, heard, l.Restarts)
	return row
}

// syncCollector exports the sync's counters, read on each scrape
// (conntrackd's are cached for a second by the syncer).
type syncCollector struct{ s statesync.Syncer }

var (
	syncUp       = prometheus.NewDesc("edgelb_statesync_up", "1 when conntrackd is running.", nil, nil)
	syncPrimary  = prometheus.NewDesc("edgelb_statesync_primary", "1 when this gateway owns VIPs (conntrackd primary), 0 backup.", nil, nil)
	syncPeers    = prometheus.NewDesc("edgelb_statesync_peers", "Configured sync peers (a conntrackd each).", nil, nil)
	syncEntries  = prometheus.NewDesc("edgelb_statesync_entries", "Connections in conntrackd's caches: internal (this gateway's), external (received).", []string{"cache"}, nil)
	syncPackets  = prometheus.NewDesc("edgelb_statesync_packets_total", "Sync packets sent and received.", []string{"direction"}, nil)
	syncNetErrs  = prometheus.NewDesc("edgelb_statesync_network_errors_total", "Sync packets that failed to send or receive.", []string{"direction"}, nil)
	syncLost     = prometheus.NewDesc("edgelb_statesync_lost_messages_total", "Sync messages lost (sequence tracking).", nil, nil)
	syncErrors   = prometheus.NewDesc("edgelb_statesync_errors_total", "Failed conntrackd commands and unexpected exits.", nil, nil)
	syncRestarts = prometheus.NewDesc("edgelb_statesync_restarts_total", "conntrackd restarts.", nil, nil)
	syncTakeover = prometheus.NewDesc("edgelb_statesync_last_takeover_seconds", "How long the last takeover's steps took.", nil, nil)
	// The lag: what a peer has not acknowledged yet, and how long no peer
	// has been heard from (FTFW peers send at least one packet a second).
	syncQueue = prometheus.NewDesc("edgelb_statesync_queue_messages",
		"Sync messages waiting: unacked (sent, not yet acknowledged by a peer; FTFW resend queue) and unsent.", []string{"queue"}, nil)
	syncDropped = prometheus.NewDesc("edgelb_statesync_resend_dropped_total",
		"Sync messages dropped because the resend queue was full (a peer needs a resync).", nil, nil)
	syncSilence = prometheus.NewDesc("edgelb_statesync_peer_silence_seconds",
		"Seconds since the last sync packet from a peer, the most silent peer's (counters read every 200 ms).", nil, nil)
	// Per peer: 1 alive, 0 dead (silent for longer than
	// statesync.PeerDeadAfter) or unknown (the local conntrackd is down).
	syncPeerAlive = prometheus.NewDesc("edgelb_statesync_peer_alive",
		"1 while a sync peer is heard from (a packet within the last 1.5 s), 0 when dead or unknown.", []string{"peer"}, nil)
)

func (c *syncCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{syncUp, syncPrimary, syncPeers, syncEntries, syncPackets, syncNetErrs, syncLost, syncErrors, syncRestarts, syncTakeover, syncQueue, syncDropped, syncSilence, syncPeerAlive} {
		ch <- d
	}
}

func (c *syncCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Status()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	g, ct := prometheus.GaugeValue, prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(syncUp, g, b(st.Running))
	ch <- prometheus.MustNewConstMetric(syncPrimary, g, b(st.Role == "primary"))
	ch <- prometheus.MustNewConstMetric(syncPeers, g, float64(len(st.Peers)))
	ch <- prometheus.MustNewConstMetric(syncEntries, g, float64(st.Stats.Internal), "internal")
	ch <- prometheus.MustNewConstMetric(syncEntries, g, float64(st.Stats.External), "external")
	ch <- prometheus.MustNewConstMetric(syncPackets, ct, float64(st.Stats.SentPackets), "sent")
	ch <- prometheus.MustNewConstMetric(syncPackets, ct, float64(st.Stats.RecvPackets), "received")
	ch <- prometheus.MustNewConstMetric(syncNetErrs, ct, float64(st.Stats.SendErrors), "sent")
	ch <- prometheus.MustNewConstMetric(syncNetErrs, ct, float64(st.Stats.RecvErrors), "received")
	ch <- prometheus.MustNewConstMetric(syncLost, ct, float64(st.Stats.Lost))
	ch <- prometheus.MustNewConstMetric(syncErrors, ct, float64(st.Errors))
	ch <- prometheus.MustNewConstMetric(syncRestarts, ct, float64(st.Restarts))
	ch <- prometheus.MustNewConstMetric(syncTakeover, g, st.LastTakeoverTook.Seconds())
	ch <- prometheus.MustNewConstMetric(syncQueue, g, float64(st.Stats.Unacked), "unacked")
	ch <- prometheus.MustNewConstMetric(syncQueue, g, float64(st.Stats.Unsent), "unsent")
	ch <- prometheus.MustNewConstMetric(syncDropped, ct, float64(st.Stats.ResendDropped))
	ch <- prometheus.MustNewConstMetric(syncSilence, g, st.PeerSilence.Seconds())
	for _, l := range st.Links {
		for _, p := range l.Peers {
			ch <- prometheus.MustNewConstMetric(syncPeerAlive, g, b(l.PeerState == statesync.PeerAlive), p)
		}
	}
}
