package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/announce/bfdd"
	"github.com/edgelb/edgelb/announce/bgp"
	"github.com/edgelb/edgelb/announce/l2"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/preflight"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/conntrack"
	"github.com/edgelb/edgelb/proxy/ipvs"
	"github.com/edgelb/edgelb/proxy/nft"
)

// newDataplane builds the configured (or auto-chosen) dataplane and the
// flow source that goes with it.
func newDataplane(cfg *config.Config, log *slog.Logger) (proxy.Dataplane, proxy.FlowSource, func() error, error) {
	mode, why := preflight.ChooseDataplane(cfg.Dataplane.Mode)
	log.Info(why, "dataplane", string(mode))
	switch mode {
	case config.ModeIPVS:
		dp, err := ipvs.New(ipvs.Options{
			Device:       cfg.Dataplane.IPVSDevice,
			DrainTimeout: cfg.Dataplane.DrainTimeout,
			SetSysctls:   cfg.Dataplane.SetSysctls,
			Logf:         func(f string, a ...any) { log.Info(fmt.Sprintf(f, a...), "dataplane", "ipvs") },
		})
		if err != nil {
			return nil, nil, nil, err
		}
		fl, err := dp.Flows()
		if err != nil {
			dp.Close()
			return nil, nil, nil, err
		}
		return dp, fl, fl.Close, nil
	default:
		if names := cfg.NeedsIPVS(); len(names) > 0 {
			return nil, nil, nil, fmt.Errorf("services %q need dr/tunnel forwarding, which the nftables dataplane cannot do: %w", names, proxy.ErrUnsupported)
		}
		// Byte counts of flows; the dataplane sets what forwarding needs.
		if cfg.Dataplane.SetSysctls {
			if err := conntrack.EnableAccounting(0); err != nil {
				log.Warn("conntrack accounting unavailable: flows will show no byte counts", "err", err)
			}
		}
		opts := nft.Options{Log: log.With("dataplane", "nftables"), SetSysctls: cfg.Dataplane.SetSysctls}
		if l2 := cfg.Announce.L2; l2 != nil {
			opts.SourceAddresses = l2.SourceAddresses
		}
		// Every sync channel is FTFW over unicast between two gateways (a
		// conntrackd per peer): each message is acknowledged or resent, so
		// a connection's established state and its end suffice —
		// conntrackd gets two events a connection, not eight.
		opts.SyncEvents = cfg.StateSync.Conntrackd != nil
		dp, err := nft.New(opts)
		if err != nil {
			return nil, nil, nil, err
		}
		// With SyncEvents a flow's first event is its "assured" update.
		src, err := conntrack.New(conntrack.Options{Updates: opts.SyncEvents})
		if err != nil {
			dp.Close()
			return nil, nil, nil, err
		}
		return dp, src, src.Close, nil
	}
}

// newAnnouncers builds the L2 and BGP announcers the config asks for.
// ho (nil: none) is told of L2 ownership changes (the state sync).
func newAnnouncers(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer, ho l2.Handover) ([]announce.Announcer, error) {
	var out []announce.Announcer
	closeAll := func() {
		for _, a := range out {
			a.Close(true)
		}
	}
	if c := cfg.Announce.L2; c != nil {
		lc := l2.Config{Interface: c.Interface, Logger: log, SourceAddresses: c.SourceAddresses, SourceInterface: c.SourceInterface, Handover: ho}
		if m := c.Members; m != nil {
			name := m.Name
			if name == "" {
				name, _ = os.Hostname()
			}
			lc.Members = &l2.Members{Name: name, Bind: m.Bind, Advertise: m.Advertise, Join: m.Join, Key: []byte(string(m.Key)),
				Tuning: l2.Tuning{ProbeInterval: m.ProbeInterval, ProbeTimeout: m.ProbeTimeout, SuspicionMult: m.SuspicionMult}}
		}
		a, err := l2.New(lc)
		if err != nil {
			return nil, fmt.Errorf("L2 announcer on %q: %w", c.Interface, err)
		}
		out = append(out, a)
	}
	if c := cfg.Announce.BGP; c != nil {
		a, err := newBGP(c, log, reg)
		if err != nil {
			closeAll()
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func newBGP(c *config.BGP, log *slog.Logger, reg prometheus.Registerer) (announce.Announcer, error) {
	rid := c.RouterID
	if !rid.IsValid() {
		var err error
		if rid, err = firstIPv4(); err != nil {
			return nil, fmt.Errorf("bgp: routerID not set and %w", err)
		}
	}
	bc := bgp.Config{LocalASN: c.LocalASN, RouterID: rid, ListenPort: int32(c.ListenPort), Logger: log, Registerer: reg}
	if c.ListenPort == 0 {
		bc.ListenPort = -1
	}
	for _, p := range c.Peers {
		bc.Peers = append(bc.Peers, bgp.Peer{
			Name: p.Name, Address: p.Address, ASN: p.ASN, Port: p.Port, SourceAddress: p.SourceAddress,
			MultihopTTL: p.MultihopTTL, Password: string(p.Password), HoldTime: p.HoldTime, Keepalive: p.Keepalive,
			Passive: p.Passive, GracefulRestart: p.GracefulRestart,
		})
		if b := p.BFD; b != nil {
			bc.Peers[len(bc.Peers)-1].BFD = &bgp.BFD{ReceiveInterval: b.ReceiveInterval, TransmitInterval: b.TransmitInterval,
				Multiplier: uint8(b.Multiplier), Passive: b.Passive}
		}
	}
	if slices.ContainsFunc(c.Peers, func(p config.BGPPeer) bool { return p.BFD != nil }) {
		// bfdd's own directory (a temporary one): bfdd drops to the frr
		// user, who cannot enter edgelb's private state directory.
		d, err := bfdd.Start(bfdd.Options{Logger: log})
		switch {
		case errors.Is(err, bfdd.ErrPrivileges):
			// FRR would refuse the identity edgelb can give bfdd (the
			// packaged unit). Earlier versions ran BGP without BFD here,
			// silently; refusing to start now would turn an upgrade into
			// an outage. So BGP runs, every BFD peer shows "unavailable"
			// with this reason (status, page, edgelb_bgp_bfd_session_up 0
			// and its alert), and edgelb check reports the same error.
			log.Error("bfd cannot run on this gateway: BGP runs without it", "err", err)
			bc.BFD = bfdd.Unavailable(err)
		case err != nil:
			return nil, err
		default:
			bc.BFD = d
		}
	}
	s, err := bgp.New(bc)
	if err != nil && bc.BFD != nil {
		bc.BFD.Close()
	}
	return s, err
}

func firstIPv4() (netip.Addr, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok && ip.IsGlobalUnicast() {
			return ip, nil
		}
	}
	return netip.Addr{}, errors.New("this host has no global IPv4 address to use as router ID")
}

// nodeAddresses are where node ports listen: configured, or every global
// unicast address of the gateway.
func nodeAddresses(cfg *config.Config) ([]netip.Addr, error) {
	if len(cfg.Dataplane.NodeAddresses) > 0 {
		return cfg.Dataplane.NodeAddresses, nil
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list the gateway's addresses for node ports: %w", err)
	}
	// VIPs bound on the IPVS device are not node addresses.
	skip := -1
	if l, err := netlink.LinkByName(cfg.Dataplane.IPVSDevice); err == nil {
		skip = l.Attrs().Index
	}
	var out []netip.Addr
	for _, a := range addrs {
		if a.LinkIndex == skip {
			continue
		}
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsGlobalUnicast() && !ip.IsLinkLocalUnicast() {
			out = append(out, ip)
		}
	}
	return out, nil
}
