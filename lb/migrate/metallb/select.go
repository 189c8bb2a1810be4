package metallb

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/edgelb/edgelb/lb"
)

// MetalLB announces a pool by L2 when an L2Advertisement selects it, by
// BGP when a BGPAdvertisement does, to that advertisement's peers and on
// its interfaces (none listed: all). The converter collects what every
// advertisement says per pool and writes it as the pool's announce:
// (announcers, peers, interfaces) — edgelb's own per-pool selection.

// selection is what the advertisements selecting one pool say.
type selection struct {
	viaL2, viaBGP bool
	allIfs        bool // an L2Advertisement without interfaces: every one
	ifs           []string
	allPeers      bool // a BGPAdvertisement without peers: every one
	peers         []string
}

func (s *selection) l2(ifs []string) {
	s.viaL2 = true
	if len(ifs) == 0 {
		s.allIfs = true
	}
	s.ifs = append(s.ifs, ifs...)
}

func (s *selection) bgp(peers []string) {
	s.viaBGP = true
	if len(peers) == 0 {
		s.allPeers = true
	}
	s.peers = append(s.peers, peers...)
}

func (c *converter) selected(pool string) *selection {
	s := c.sel[pool]
	if s == nil {
		s = &selection{}
		c.sel[pool] = s
	}
	return s
}

// selectPools resolves ipAddressPools (names) and ipAddressPoolSelectors
// (labels of the IPAddressPools), either matching; neither means every
// pool, as in MetalLB.
func (c *converter) selectPools(o *Object) []*Pool {
	names := takeStrings(o.Spec, "ipAddressPools")
	var sels []lb.LabelSelector
	if v, ok := take(o.Spec, "ipAddressPoolSelectors"); ok {
		js, _ := json.Marshal(v)
		if err := json.Unmarshal(js, &sels); err != nil {
			c.unsupported(o, "spec.ipAddressPoolSelectors", show(v), fmt.Sprintf("not label selectors (%v); no pool selected by them", err))
			sels = nil
		}
	}
	var out []*Pool
	all := len(names) == 0 && len(sels) == 0
	for _, p := range c.pools {
		pick := all || slices.Contains(names, p.Name)
		for _, s := range sels {
			if src := c.objects["pool/"+p.Name]; src != nil && s.Matches(src.Labels) {
				pick = true
			}
		}
		if pick {
			out = append(out, p)
		}
	}
	for _, n := range names {
		if _, ok := c.pools[n]; !ok {
			c.note(o, "spec.ipAddressPools", n, "no such pool in the input; ignored")
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// finishSelection writes each pool's announce: from what selected it, and
// the L2 interface note when none is known.
func (c *converter) finishSelection(names []string) {
	peerNames := map[string]bool{}
	if b := c.res.Announce.BGP; b != nil {
		for _, p := range b.Peers {
			peerNames[p.Name] = true
		}
	}
	for _, n := range names {
		p, o := c.pools[n], c.objects["pool/"+n]
		s := c.selected(n)
		an := lb.PoolAnnounceInput{}
		switch {
		case !s.viaL2 && !s.viaBGP:
			c.unsupported(o, "announcement", nil, "no L2Advertisement or BGPAdvertisement selects this pool: MetalLB assigns its "+
				"addresses but announces none; edgelb has no such mode and announces it with every announcer configured")
		case s.viaBGP && c.res.Announce.BGP == nil:
			// MetalLB has nobody to tell; edgelb has no BGP to name.
			c.unsupported(o, "announcement", "bgp", "selected for BGP, but no BGPPeer was read: MetalLB announces it to no router; "+
				"the converted config has no BGP, so the pool goes to whatever announcers are configured")
			s.viaBGP = false
			if s.viaL2 {
				an.Announcers = []string{lb.AnnounceL2}
			}
		case s.viaL2 && !s.viaBGP:
			an.Announcers = []string{lb.AnnounceL2}
		case s.viaBGP && !s.viaL2:
			an.Announcers = []string{lb.AnnounceBGP}
		}
		if s.viaL2 && !s.allIfs {
			an.Interfaces = sortedUniq(s.ifs)
		}
		if s.viaBGP && !s.allPeers {
			for _, peer := range sortedUniq(s.peers) {
				if peerNames[peer] {
					an.Peers = append(an.Peers, peer)
				} else {
					c.unsupported(o, "announce.peers", peer, "a BGPAdvertisement names this peer, but no BGPPeer of that name was read; left out")
				}
			}
			if len(an.Peers) == 0 {
				c.unsupported(o, "announce.peers", strings.Join(s.peers, ","), "none of the peers its BGPAdvertisements name exists: MetalLB "+
					"announces it to no peer; edgelb announces it to every peer")
			}
		}
		if len(an.Announcers) > 0 || len(an.Peers) > 0 || len(an.Interfaces) > 0 {
			p.Announce = &an
		}
	}
	if l2 := c.res.Announce.L2; l2 != nil && l2.Interface == "" {
		c.note(c.l2From, "announce.l2.interface", nil, "MetalLB answers ARP/NDP on every interface, edgelb on one: set it (--l2-interface)")
	}
}

func sortedUniq(l []string) []string {
	out := slices.Clone(l)
	slices.Sort(out)
	return slices.Compact(out)
}
