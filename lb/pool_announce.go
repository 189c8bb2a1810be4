package lb

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edgelb/edgelb/lb/fielderr"
)

// A pool's announcement selection and per-family aggregation, judged here
// for every way a pool is written (config file, REST, IPPool, migrate):
// CheckPool checks what a pool says on its own; CheckPoolAnnounce what it
// says against the gateway's announcers (names of peers, the L2 interface).

// checkAggregation: aggregationLength bounds the IPv4 routes (0-32, every
// IPv4 range in whole blocks), aggregationLengthV6 the IPv6 ones (0-128);
// a pool with no IPv4 range may still write its IPv6 length as
// aggregationLength (the spelling before aggregationLengthV6), not both.
func checkAggregation(c *fielderr.Collector, path string, p *Pool) {
	var v4, v6 []Range
	for _, r := range p.Ranges {
		if r.Is4() {
			v4 = append(v4, r)
		} else {
			v6 = append(v6, r)
		}
	}
	adv := &p.Advertisement
	f4, f6 := fielderr.Join(path, "advertisement.aggregationLength"), fielderr.Join(path, "advertisement.aggregationLengthV6")
	if n := adv.AggregationLen; n != 0 && !c.Failed(f4) {
		switch {
		case len(v4) == 0 && adv.AggregationLenV6 != 0:
			c.Add(f4, fmt.Sprint(n), "the pool has no IPv4 range; its IPv6 length is aggregationLengthV6 (%d)", adv.AggregationLenV6)
		case len(v4) == 0:
			if err := ValidateAggregation(n, v6); err != nil {
				c.AddErr(f4, fmt.Sprint(n), err)
			}
		case n > 32:
			c.Add(f4, fmt.Sprint(n), "out of range 0-32 for the pool's IPv4 routes (IPv6 routes take aggregationLengthV6)")
		default:
			if err := ValidateAggregation(n, v4); err != nil {
				c.AddErr(f4, fmt.Sprint(n), err)
			}
		}
	}
	if n := adv.AggregationLenV6; n != 0 && !c.Failed(f6) {
		if len(v6) == 0 {
			c.Add(f6, fmt.Sprint(n), "the pool has no IPv6 range")
		} else if err := ValidateAggregation(n, v6); err != nil {
			c.AddErr(f6, fmt.Sprint(n), err)
		}
	}
}

// checkAnnounce: known announcers, each listed once; peers only on a pool
// BGP announces, interfaces only on one L2 announces; BGP attributes not
// on an L2-only pool (they would be dropped).
func checkAnnounce(c *fielderr.Collector, path string, p *Pool) {
	a := &p.Announce
	at := func(f string) string { return fielderr.Join(path, "announce."+f) }
	uniq(c, at("announcers"), a.Announcers, func(s string) error {
		if s != AnnounceL2 && s != AnnounceBGP {
			return fmt.Errorf("want %s or %s", AnnounceL2, AnnounceBGP)
		}
		return nil
	})
	uniq(c, at("peers"), a.Peers, func(s string) error {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("want a peer's name (announce.bgp.peers[].name, or its address when it has none)")
		}
		return nil
	})
	uniq(c, at("interfaces"), a.Interfaces, CheckInterfaceName)
	if len(a.Peers) > 0 && !a.Via(AnnounceBGP) {
		c.Add(at("peers"), strings.Join(a.Peers, ","), "BGP peers on a pool BGP does not announce (announcers: %s)", strings.Join(a.Announcers, ","))
	}
	if len(a.Interfaces) > 0 && !a.Via(AnnounceL2) {
		c.Add(at("interfaces"), strings.Join(a.Interfaces, ","), "L2 interfaces on a pool L2 does not announce (announcers: %s)", strings.Join(a.Announcers, ","))
	}
	adv := &p.Advertisement
	if !a.Via(AnnounceBGP) && (len(adv.Communities) > 0 || len(adv.LargeCommunities) > 0 || adv.LocalPref != 0 ||
		adv.AggregationLen != 0 || adv.AggregationLenV6 != 0) {
		c.Add(fielderr.Join(path, "advertisement"), "", "BGP route attributes on a pool BGP does not announce (announcers: %s)", strings.Join(a.Announcers, ","))
	}
}

func uniq(c *fielderr.Collector, field string, list []string, check func(string) error) {
	for i, s := range list {
		f := fielderr.Index(field, i)
		if err := check(s); err != nil {
			c.AddErr(f, s, err)
			continue
		}
		if j := slices.Index(list[:i], s); j >= 0 {
			c.Add(f, s, "listed twice (also [%d])", j)
		}
	}
}

// CheckInterfaceName applies the kernel's rules for interface names (IFNAMSIZ).
func CheckInterfaceName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("required (an interface name)")
	case len(s) > 15:
		return fmt.Errorf("longer than 15 characters")
	case s == "." || s == ".." || strings.ContainsAny(s, "/: \t\n\x00"):
		return fmt.Errorf("not a valid interface name")
	}
	return nil
}

// Announcers is what a gateway announces with, for CheckPoolAnnounce.
type Announcers struct {
	// L2Interface is announce.l2.interface ("": no L2 announcer).
	L2Interface string
	// BGP: a BGP speaker runs; BGPPeers are its peers' names.
	BGP      bool
	BGPPeers []string
}

// CheckPoolAnnounce checks a pool's announce: against the gateway's
// announcers (standalone: the config file's announce section): every
// announcer named is configured, every peer named is a peer, and the L2
// interface is among the interfaces listed — else the pool would silently
// never be announced the way it asks.
func CheckPoolAnnounce(c *fielderr.Collector, path string, p *Pool, an Announcers) {
	a := &p.Announce
	at := func(f string) string { return fielderr.Join(path, "announce."+f) }
	for i, s := range a.Announcers {
		switch {
		case s == AnnounceL2 && an.L2Interface == "":
			c.Add(fielderr.Index(at("announcers"), i), s, "announce.l2 is not configured on this gateway")
		case s == AnnounceBGP && !an.BGP:
			c.Add(fielderr.Index(at("announcers"), i), s, "announce.bgp is not configured on this gateway")
		}
	}
	if len(a.Peers) > 0 && !an.BGP {
		c.Add(at("peers"), strings.Join(a.Peers, ","), "announce.bgp is not configured on this gateway")
	}
	if len(a.Interfaces) > 0 && an.L2Interface == "" {
		c.Add(at("interfaces"), strings.Join(a.Interfaces, ","), "announce.l2 is not configured on this gateway")
	}
	for i, s := range a.Peers {
		if an.BGP && !slices.Contains(an.BGPPeers, s) && !c.Failed(fielderr.Index(at("peers"), i)) {
			c.Add(fielderr.Index(at("peers"), i), s, "no BGP peer of this name (announce.bgp.peers: %s)", strings.Join(an.BGPPeers, ", "))
		}
	}
	if len(a.Interfaces) > 0 && an.L2Interface != "" && a.Via(AnnounceL2) && !slices.Contains(a.Interfaces, an.L2Interface) &&
		!c.Failed(at("interfaces")) {
		c.Add(at("interfaces"), strings.Join(a.Interfaces, ","),
			"does not include announce.l2.interface (%s): L2 would never answer for this pool here", an.L2Interface)
	}
}

// ValidatePoolAnnounce is CheckPoolAnnounce for a first-error caller (the
// standalone writer): nil or *Errors.
func ValidatePoolAnnounce(p *Pool, an Announcers) error {
	var c fielderr.Collector
	CheckPoolAnnounce(&c, "", p, an)
	return c.Err()
}
