package daemon

import (
	"time"

	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/hostcheck"
	"github.com/edgelb/edgelb/proxy/statesync"
)

// newStateSync starts conntrackd when stateSync.conntrackd is configured
// (nil, nil otherwise); its files live in <state.dir>/conntrackd.
func newStateSync(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (statesync.Syncer, error) {
	c := cfg.StateSync.Conntrackd
	if c == nil {
		return nil, nil
	}
	addr := c.Address
	if !addr.IsValid() {
		want4 := !c.Peer.IsValid() || c.Peer.Is4()
		var err error
		if addr, err = firstAddrOn(c.Interface, want4); err != nil {
			return nil, fmt.Errorf("stateSync.conntrackd.address not set and %w", err)
		}
	}
	s, err := statesync.Start(statesync.Options{Binary: c.Binary, Dir: filepath.Join(cfg.State.Dir, "conntrackd"),
		Interface: c.Interface, Address: addr, Peer: c.Peer, Group: c.MulticastGroup, Port: c.Port,
		Ignore: ownAddrs(), SetSysctls: cfg.Dataplane.SetSysctls}, log)
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
// /api/v1/status/announcers and the page): one row for conntrackd, one per
// configured peer or group.
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
		st.Stats.Unacked, st.Stats.Unsent, st.PeerSilence.Round(time.Second))
	if st.LastError != "" {
		self.Detail += "; last error: " + st.LastError
	}
	if !st.LastTakeover.IsZero() {
		self.Detail += fmt.Sprintf("; last takeover %s (steps took %s)", st.LastTakeover.Format("15:04:05"), st.LastTakeoverTook.Round(1e5))
	}
	out.Peers = append(out.Peers, self)
	for _, p := range st.Peers {
		out.Peers = append(out.Peers, announce.PeerState{Name: "sync peer", Address: p, State: state})
	}
	return out
}

// syncCollector exports the sync's counters, read on each scrape
// (conntrackd's are cached for a second by the syncer).
type syncCollector struct{ s statesync.Syncer }

var (
	syncUp       = prometheus.NewDesc("edgelb_statesync_up", "1 when conntrackd is running.", nil, nil)
	syncPrimary  = prometheus.NewDesc("edgelb_statesync_primary", "1 when this gateway owns VIPs (conntrackd primary), 0 backup.", nil, nil)
	syncPeers    = prometheus.NewDesc("edgelb_statesync_peers", "Configured sync destinations (peer or multicast group).", nil, nil)
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
		"Seconds since a read of the counters last saw a sync packet arrive from a peer (exact to the scrape interval).", nil, nil)
)

func (c *syncCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{syncUp, syncPrimary, syncPeers, syncEntries, syncPackets, syncNetErrs, syncLost, syncErrors, syncRestarts, syncTakeover, syncQueue, syncDropped, syncSilence} {
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
}

// stateSyncFindings: what `edgelb check` can see of the state sync and of
// the routing the backends need for connections to survive a failover.
func stateSyncFindings(cfg *config.Config, linkExists func(string) bool) []hostcheck.Finding {
	var out []hostcheck.Finding
	l2 := cfg.Announce.L2
	if c := cfg.StateSync.Conntrackd; c != nil {
		if _, err := exec.LookPath(c.Binary); err != nil {
			out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "statesync-binary",
				Message: fmt.Sprintf("stateSync.conntrackd.binary %q: %v", c.Binary, err), Fix: "apt-get install conntrackd"})
		}
		if !linkExists(c.Interface) {
			out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "statesync-interface",
				Message: fmt.Sprintf("stateSync.conntrackd.interface %q: no such interface on this host", c.Interface)})
		}
	}
	if l2 != nil && l2.SourceInterface != "" && !linkExists(l2.SourceInterface) {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "source-interface",
			Message: fmt.Sprintf("announce.l2.sourceInterface %q: no such interface on this host", l2.SourceInterface)})
	}
	if l2 == nil || l2.Members == nil {
		return out // alone: nothing moves
	}
	var nat, nosnat []string
	for i, s := range cfg.Services {
		switch s.Method {
		case proxy.NAT:
			nat = append(nat, fmt.Sprintf("services[%d] (%q)", i, s.Name))
		case proxy.NATNoSNAT:
			nosnat = append(nosnat, fmt.Sprintf("services[%d] (%q)", i, s.Name))
		}
	}
	sync := cfg.StateSync.Conntrackd != nil
	switch {
	case sync && len(nat) > 0 && len(l2.SourceAddresses) == 0:
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: "statesync-no-source",
			Message: fmt.Sprintf("%s use method nat without announce.l2.sourceAddresses: backends answer the dead gateway's own address, so their connections cannot survive a failover although their state is synced", strings.Join(nat, ", ")),
			Fix:     "set announce.l2.sourceAddresses to a free address on the backend segment"})
	case !sync && len(l2.SourceAddresses) > 0:
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: "source-no-statesync",
			Message: "announce.l2.sourceAddresses is set without stateSync: the address moves on failover but the connections' state does not, so open connections are still lost",
			Fix:     "configure stateSync.conntrackd"})
	}
	if len(nosnat) > 0 && len(l2.SourceAddresses) == 0 {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: "nosnat-backend-route",
			Message: fmt.Sprintf("%s use method nat-nosnat with several gateways: backends must route replies to clients through an address that moves with the VIPs; a route via one gateway's own address blackholes them when it dies", strings.Join(nosnat, ", ")),
			Fix:     "set announce.l2.sourceAddresses and make it the backends' route to the clients"})
	}
	return out
}

// ipvsStateSyncFindings: dataplane auto chose IPVS, which neither conntrackd
// (it syncs the nftables dataplane's conntrack entries) nor the floating
// source address serves; validation refuses them with an explicit mode ipvs.
func ipvsStateSyncFindings(cfg *config.Config) []hostcheck.Finding {
	var out []hostcheck.Finding
	if cfg.StateSync.Conntrackd != nil {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "statesync-dataplane",
			Message: "stateSync.conntrackd syncs the nftables dataplane, but the IPVS dataplane would run",
			Fix:     "set dataplane.mode: nftables"})
	}
	if l2 := cfg.Announce.L2; l2 != nil && len(l2.SourceAddresses) > 0 {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "source-dataplane",
			Message: "announce.l2.sourceAddresses are translated to by the nftables dataplane, but the IPVS dataplane would run",
			Fix:     "set dataplane.mode: nftables"})
	}
	return out
}

func linkExists(name string) bool {
	_, err := netlink.LinkByName(name)
	return err == nil
}
