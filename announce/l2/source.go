package l2

// The floating source addresses (Config.SourceAddresses): owned like VIPs,
// answered for on the backend segment.

import (
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/edgelb/edgelb/announce/arp"
	"github.com/edgelb/edgelb/announce/ndp"
)

// startSourceResponders answers for the source addresses on the backend
// segment when that is not Interface.
func (a *Announcer) startSourceResponders(log *slog.Logger) error {
	ifc := a.cfg.SourceInterface
	if len(a.sources) == 0 || ifc == "" || ifc == a.cfg.Interface {
		return nil
	}
	a.srcARP, a.srcNDP = a.cfg.SourceARP, a.cfg.SourceNDP
	if a.srcARP == nil {
		r, err := arp.New(arp.Config{Interface: ifc, GARPCount: a.cfg.GARPCount, GARPInterval: a.cfg.GARPInterval, Logger: log})
		if err != nil {
			return fmt.Errorf("l2: source addresses on %q: %w", ifc, err)
		}
		a.srcARP = r
	}
	if a.srcNDP == nil {
		r, err := ndp.New(ndp.Config{Interface: ifc, NACount: a.cfg.GARPCount, NAInterval: a.cfg.GARPInterval, Logger: log})
		if err != nil {
			a.log.Warn("IPv6 neighbour discovery unavailable on the source interface", "interface", ifc, "err", err)
		} else {
			a.srcNDP = r
		}
	}
	return nil
}

// setOwned tells each responder its share of the claims: source addresses
// go to the source interface's responders when it has its own.
func (a *Announcer) setOwned(claim []netip.Addr) []error {
	var v4, v6, s4, s6 []netip.Addr
	for _, c := range claim {
		src := a.sources[c] && a.srcARP != nil
		switch {
		case src && c.Is4():
			s4 = append(s4, c)
		case src:
			s6 = append(s6, c)
		case c.Is4():
			v4 = append(v4, c)
		default:
			v6 = append(v6, c)
		}
	}
	var errs []error
	set := func(r Responder, addrs []netip.Addr) {
		if r != nil {
			if err := r.SetOwned(addrs); err != nil {
				errs = append(errs, err)
			}
		}
	}
	set(a.arp, v4)
	set(a.ndp, v6)
	set(a.srcARP, s4)
	set(a.srcNDP, s6)
	return errs
}
