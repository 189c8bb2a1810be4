package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/config"
)

// OwnAddresses are the gateway's own addresses (issue 36): every address
// of every interface, loopback and link-local included, with its subnet's
// broadcast and network addresses, and what the config binds to
// (config.OwnAddrs). The IPVS device is left out: the VIPs are bound there
// by the dataplane itself. `edgelb check` asks it too, so a config whose
// VIP or backend is an address of this host fails the check as it would
// fail `edgelb run`.
func OwnAddresses(cfg *config.Config) (*lb.OwnAddrs, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list the gateway's own addresses: %w", err)
	}
	names := map[int]string{}
	if links, err := netlink.LinkList(); err == nil {
		for _, l := range links {
			names[l.Attrs().Index] = l.Attrs().Name
		}
	}
	own := cfg.OwnAddrs()
	for _, a := range addrs {
		name := names[a.LinkIndex]
		if cfg.Dataplane.Mode == config.ModeIPVS && name == cfg.Dataplane.IPVSDevice {
			continue
		}
		if p, ok := prefixOf(a.IPNet); ok {
			if name == "" {
				name = fmt.Sprintf("index %d", a.LinkIndex)
			}
			own.AddPrefix(p, "interface "+name)
		}
	}
	return own, nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	bits, _ := n.Mask.Size()
	if a.Is4() && bits > 32 {
		bits -= 96
	}
	return netip.PrefixFrom(a, bits), true
}

// watchOwnAddresses hands the writer the gateway's own addresses again
// whenever an interface address comes or goes (netlink's address
// notifications), until ctx ends: a VIP or backend that becomes one is
// left out and reported failed, and programmed again when it goes. A burst
// of notifications (an interface going up with several addresses) is
// read as one change. Should the subscription fail, the list is read
// every 10 s instead.
func watchOwnAddresses(ctx context.Context, cfg *config.Config, set func(context.Context, *lb.OwnAddrs) error, log *slog.Logger) {
	updates := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	poll := (<-chan time.Time)(nil)
	if err := netlink.AddrSubscribeWithOptions(updates, done, netlink.AddrSubscribeOptions{
		ErrorCallback: func(err error) {
			if ctx.Err() == nil { // closing the subscription at shutdown fails its last read
				log.Warn("own addresses: netlink subscription", "err", err)
			}
		},
	}); err != nil {
		log.Warn("own addresses: cannot follow interface addresses; reading them every 10s", "err", err)
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		poll = t.C
		updates = nil
	}
	apply := func() {
		own, err := OwnAddresses(cfg)
		if err != nil {
			log.Warn("own addresses", "err", err)
			return
		}
		if err := set(ctx, own); err != nil && ctx.Err() == nil {
			log.Warn("own addresses: handing them to the writer", "err", err)
		}
	}
	apply() // an address may have come between start-up and the subscription
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll:
			apply()
		case _, ok := <-updates:
			if !ok {
				log.Warn("own addresses: netlink subscription ended; reading them every 10s")
				t := time.NewTicker(10 * time.Second)
				defer t.Stop()
				poll, updates = t.C, nil
				continue
			}
			// Take the rest of a burst before reading the list once.
			for drained := false; !drained; {
				select {
				case <-updates:
				case <-time.After(50 * time.Millisecond):
					drained = true
				}
			}
			apply()
		}
	}
}
