package metallb

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/edgelb/edgelb/lb"
)

// Pool, Advertisement and Peer are lb's input schema: a config file's
// pools[] and announce.bgp.peers[], and an IPPool's spec, field for field.
type (
	Pool          = lb.PoolInput
	Advertisement = lb.AdvertisementInput
	Peer          = lb.PeerInput
	BFD           = lb.BFDInput
)

// BGP is config `announce.bgp`.
type BGP struct {
	LocalASN int64  `json:"localASN"`
	RouterID string `json:"routerID,omitempty"`
	Peers    []Peer `json:"peers"`
}

// L2 is config `announce.l2`. Interface is left out when neither MetalLB
// nor --l2-interface named one (a note says to set it).
type L2 struct {
	Interface string `json:"interface,omitempty"`
}

// Announce is config `announce`.
type Announce struct {
	L2  *L2  `json:"l2,omitempty"`
	BGP *BGP `json:"bgp,omitempty"`
}

// Finding is one line of the report: a field with no edgelb equivalent, or
// a choice the conversion made that the user should know about.
type Finding struct {
	Object string `json:"object"` // Kind/name
	Source string `json:"source"`
	Field  string `json:"field"`
	Value  string `json:"value,omitempty"`
	Note   string `json:"note"`
}

func (f Finding) String() string {
	v := ""
	if f.Value != "" {
		v = fmt.Sprintf(" = %s", f.Value)
	}
	return fmt.Sprintf("%s (%s) %s%s: %s", f.Object, f.Source, f.Field, v, f.Note)
}

// Result is the converted configuration and its report.
type Result struct {
	Pools    []Pool
	Announce Announce
	// Unsupported lists every MetalLB field without an equivalent.
	Unsupported []Finding
	// Notes are conversions that changed meaning slightly or need a hand.
	Notes []Finding
	// Skipped lists input documents that were not MetalLB objects.
	Skipped []string
}

// Options are what the conversion cannot learn from MetalLB's objects.
type Options struct {
	// L2Interface is used when an L2Advertisement names no interface
	// (MetalLB then answers on every interface; edgelb on one).
	L2Interface string
	// SecretDir is where password files for BGPPeers' passwordSecret are
	// expected (default /etc/edgelb): bgp-PEER.password.
	SecretDir string
}

type converter struct {
	res         Result
	opts        Options
	pools       map[string]*Pool
	communities map[string]string
	// objects: "pool/NAME" and "peer/NAME" → the MetalLB object it came
	// from, to name it when edgelb refuses the result (check.go).
	objects map[string]*Object
	// bfd: BFDProfiles by name, for the peers naming them.
	bfd map[string]*BFD
	// sel: per pool, what the advertisements selecting it say (select.go).
	sel map[string]*selection
	// l2From is the object that made announce.l2 (for its note).
	l2From *Object
}

func (c *converter) unsupported(o *Object, field string, v any, note string) {
	c.res.Unsupported = append(c.res.Unsupported, Finding{Object: o.Ref(), Source: o.Source, Field: field, Value: show(v), Note: note})
}

func (c *converter) note(o *Object, field string, v any, note string) {
	c.res.Notes = append(c.res.Notes, Finding{Object: o.Ref(), Source: o.Source, Field: field, Value: show(v), Note: note})
}

func show(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return fmt.Sprint(int64(x))
	}
	return fmt.Sprintf("%v", v)
}

// Convert turns MetalLB objects into edgelb pools and announce settings.
// Order: Communities (aliases), pools, then advertisements and peers.
func Convert(objs []*Object, opts Options) (*Result, error) {
	c := &converter{opts: opts, pools: map[string]*Pool{}, communities: map[string]string{}, objects: map[string]*Object{}, bfd: map[string]*BFD{},
		sel: map[string]*selection{}}
	rank := map[string]int{"Community": 0, "IPAddressPool": 1, "AddressPool": 1, "BFDProfile": 1, "BGPPeer": 2, "BGPAdvertisement": 3, "L2Advertisement": 3}
	sorted := append([]*Object(nil), objs...)
	sort.SliceStable(sorted, func(i, j int) bool { return rank[sorted[i].Kind] < rank[sorted[j].Kind] })
	for _, o := range sorted {
		var err error
		switch o.Kind {
		case "Community":
			c.community(o)
		case "IPAddressPool":
			err = c.ipAddressPool(o)
		case "AddressPool":
			err = c.addressPool(o)
		case "BGPPeer":
			err = c.bgpPeer(o)
		case "BGPAdvertisement":
			err = c.bgpAdvertisement(o)
		case "L2Advertisement":
			c.l2Advertisement(o)
		case "BFDProfile":
			c.bfdProfile(o)
		case "ConfigMap":
			// A pre-0.13 ConfigMap's keys other than the four it converts
			// (legacy.go): reported below as having no equivalent.
		default:
			c.unsupported(o, "*", nil, "kind not known to the migration; nothing converted")
			o.Spec = map[string]any{}
		}
		if err != nil {
			return nil, err
		}
		for _, p := range leftovers("spec", o.Spec) {
			c.unsupported(o, p, nil, "no edgelb equivalent")
		}
	}
	names := make([]string, 0, len(c.pools))
	for n := range c.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	c.finishSelection(names)
	for _, n := range names {
		c.res.Pools = append(c.res.Pools, *c.pools[n])
	}
	if b := c.res.Announce.BGP; b != nil {
		sort.Slice(b.Peers, func(i, j int) bool { return b.Peers[i].Name < b.Peers[j].Name })
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return &c.res, nil
}

func fieldErr(o *Object, field, value, why string) error {
	return fmt.Errorf("%w: %s (%s): %s %q: %s", ErrInput, o.Ref(), o.Source, field, value, why)
}

func (c *converter) community(o *Object) {
	v, _ := take(o.Spec, "communities")
	list, _ := v.([]any)
	for i, it := range list {
		m, _ := it.(map[string]any)
		name, value := takeString(m, "name"), takeString(m, "value")
		if name != "" && value != "" {
			c.communities[name] = value
		}
		for _, p := range leftovers(fmt.Sprintf("spec.communities[%d]", i), m) {
			c.unsupported(o, p, nil, "no edgelb equivalent")
		}
	}
}

// checkAddresses accepts MetalLB's CIDR and "first-last" forms, which
// edgelb's pools take as they are. A CIDR with host bits set is read as
// MetalLB reads it (Go's net.ParseCIDR keeps the network: 192.0.2.5/24 is
// 192.0.2.0/24), where edgelb's own parser refuses it as a likely typo; the
// report notes the change.
func (c *converter) checkAddresses(o *Object, addrs []string) error {
	if len(addrs) == 0 {
		return fieldErr(o, "spec.addresses", "", "a pool needs addresses")
	}
	for i, a := range addrs {
		a = strings.TrimSpace(a)
		addrs[i] = a
		if p, err := netip.ParsePrefix(a); err == nil {
			if m := p.Masked(); m != p {
				addrs[i] = m.String()
				c.note(o, fmt.Sprintf("spec.addresses[%d]", i), a, fmt.Sprintf("host bits set: MetalLB reads it as %s, and so does the converted pool", m))
			}
			continue
		}
		lo, hi, ok := strings.Cut(a, "-")
		if ok {
			l, e1 := netip.ParseAddr(strings.TrimSpace(lo))
			h, e2 := netip.ParseAddr(strings.TrimSpace(hi))
			if e1 == nil && e2 == nil && l.Is4() == h.Is4() && l.Compare(h) <= 0 {
				addrs[i] = l.String() + "-" + h.String()
				continue
			}
		}
		return fieldErr(o, fmt.Sprintf("spec.addresses[%d]", i), a, "want a CIDR or FIRST-LAST")
	}
	return nil
}

func (c *converter) ipAddressPool(o *Object) error {
	p := &Pool{Name: o.Name, Addresses: takeStrings(o.Spec, "addresses"), AutoAssign: new(true)}
	if err := c.checkAddresses(o, p.Addresses); err != nil {
		return err
	}
	if b, ok := takeBool(o.Spec, "autoAssign"); ok {
		p.AutoAssign = &b
	}
	p.AvoidBuggyIPs, _ = takeBool(o.Spec, "avoidBuggyIPs")
	if sa, ok := take(o.Spec, "serviceAllocation"); ok {
		m, isMap := sa.(map[string]any)
		if !isMap {
			return fieldErr(o, "spec.serviceAllocation", show(sa), "want a mapping")
		}
		if err := c.serviceAllocation(o, m, p); err != nil {
			return err
		}
	}
	return c.addPool(o, p)
}

// addressPool is the deprecated v1beta1 AddressPool, which also carried
// its protocol and BGP advertisements.
func (c *converter) addressPool(o *Object) error {
	proto := takeString(o.Spec, "protocol")
	p := &Pool{Name: o.Name, Addresses: takeStrings(o.Spec, "addresses"), AutoAssign: new(true)}
	if err := c.checkAddresses(o, p.Addresses); err != nil {
		return err
	}
	if b, ok := takeBool(o.Spec, "autoAssign"); ok {
		p.AutoAssign = &b
	}
	p.AvoidBuggyIPs, _ = takeBool(o.Spec, "avoidBuggyIPs")
	switch proto {
	case "layer2":
		c.ensureL2(o)
		c.selected(p.Name).l2(nil)
	case "bgp":
		c.selected(p.Name).bgp(nil)
		if v, ok := take(o.Spec, "bgpAdvertisements"); ok {
			list, _ := v.([]any)
			for i, it := range list {
				m, _ := it.(map[string]any)
				if err := c.applyAdvertisement(o, fmt.Sprintf("spec.bgpAdvertisements[%d]", i), m, p); err != nil {
					return err
				}
				for _, f := range leftovers(fmt.Sprintf("spec.bgpAdvertisements[%d]", i), m) {
					c.unsupported(o, f, nil, "no edgelb equivalent")
				}
			}
		}
	default:
		return fieldErr(o, "spec.protocol", proto, "want layer2 or bgp")
	}
	return c.addPool(o, p)
}

func (c *converter) addPool(o *Object, p *Pool) error {
	if _, dup := c.pools[p.Name]; dup {
		return fieldErr(o, "metadata.name", p.Name, "a pool of this name was already read")
	}
	c.pools[p.Name] = p
	c.objects["pool/"+p.Name] = o
	return nil
}

func (c *converter) ensureL2(o *Object) {
	if c.res.Announce.L2 != nil {
		return
	}
	c.res.Announce.L2 = &L2{Interface: c.opts.L2Interface}
	c.l2From = o
}

// l2Advertisement: the pools it selects are announced by L2, on its
// interfaces (none: every interface). edgelb answers on one interface
// per gateway: the first named becomes announce.l2.interface unless
// --l2-interface says otherwise, and each pool keeps its list.
func (c *converter) l2Advertisement(o *Object) {
	ifs := takeStrings(o.Spec, "interfaces")
	c.ensureL2(o)
	l2 := c.res.Announce.L2
	if l2.Interface == "" && len(ifs) > 0 {
		l2.Interface = ifs[0]
		if len(ifs) > 1 {
			c.note(o, "spec.interfaces", strings.Join(ifs, ","), fmt.Sprintf(
				"edgelb answers on one interface per gateway: announce.l2.interface %s; the pools keep the list in announce.interfaces", ifs[0]))
		}
	}
	for _, p := range c.selectPools(o) {
		c.selected(p.Name).l2(ifs)
	}
	if v, ok := take(o.Spec, "nodeSelectors"); ok {
		c.unsupported(o, "spec.nodeSelectors", show(v),
			"edgelb runs on gateways, not on every node: the gateways in announce.l2.members announce, whichever nodes the selector named")
	}
}

func (c *converter) bgp(o *Object) *BGP {
	if c.res.Announce.BGP == nil {
		c.res.Announce.BGP = &BGP{}
	}
	return c.res.Announce.BGP
}

func (c *converter) bgpPeer(o *Object) error {
	b := c.bgp(o)
	my, _ := takeInt(o.Spec, "myASN")
	switch {
	case b.LocalASN == 0:
		b.LocalASN = my
	case my != b.LocalASN:
		c.unsupported(o, "spec.myASN", my, fmt.Sprintf("edgelb speaks BGP with one local ASN (%d, from the first peer)", b.LocalASN))
	}
	p := Peer{Name: o.Name, Address: takeString(o.Spec, "peerAddress")}
	if _, err := netip.ParseAddr(p.Address); err != nil {
		return fieldErr(o, "spec.peerAddress", p.Address, "not an IP address")
	}
	p.ASN, _ = takeInt(o.Spec, "peerASN")
	if p.ASN == 0 {
		if v, ok := take(o.Spec, "dynamicASN"); ok {
			c.unsupported(o, "spec.dynamicASN", v, "edgelb needs the peer's ASN written out: set announce.bgp.peers[].asn")
		}
	}
	p.Port, _ = takeInt(o.Spec, "peerPort")
	p.SourceAddress = takeString(o.Spec, "sourceAddress")
	if id := takeString(o.Spec, "routerID"); id != "" {
		if b.RouterID != "" && b.RouterID != id {
			c.unsupported(o, "spec.routerID", id, fmt.Sprintf("edgelb has one router ID (%s)", b.RouterID))
		} else {
			b.RouterID = id
		}
	}
	for _, t := range []struct {
		key string
		dst *string
	}{{"holdTime", &p.HoldTime}, {"keepaliveTime", &p.Keepalive}} {
		if s := takeString(o.Spec, t.key); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				return fieldErr(o, "spec."+t.key, s, "not a duration")
			}
			*t.dst = d.String()
		}
	}
	if ct := takeString(o.Spec, "connectTime"); ct != "" {
		c.unsupported(o, "spec.connectTime", ct, "edgelb's BGP speaker uses its own connect retry timer")
	}
	p.Password = takeString(o.Spec, "password")
	if v, ok := take(o.Spec, "passwordSecret"); ok {
		m, _ := v.(map[string]any)
		ref := fmt.Sprintf("%v/%v", m["namespace"], m["name"])
		dir := c.opts.SecretDir
		if dir == "" {
			dir = "/etc/edgelb"
		}
		p.PasswordFile = filepath.Join(dir, "bgp-"+o.Name+".password")
		c.note(o, "spec.passwordSecret", ref, fmt.Sprintf("write the Secret's \"password\" key to %s on each gateway (passwordFile)", p.PasswordFile))
	}
	if mh, ok := takeBool(o.Spec, "ebgpMultiHop"); ok && mh {
		if p.ASN == my {
			c.unsupported(o, "spec.ebgpMultiHop", true, "multihop only applies to eBGP; this peer is iBGP")
		} else {
			p.MultihopTTL = 255
			c.note(o, "spec.ebgpMultiHop", true, "multihopTTL 255 (MetalLB's multihop has no TTL; lower it to the real hop count)")
		}
	}
	if gr, ok := takeBool(o.Spec, "enableGracefulRestart"); ok {
		p.GracefulRestart = gr
	}
	if name := takeString(o.Spec, "bfdProfile"); name != "" {
		switch b, ok := c.bfd[name]; {
		case !ok:
			c.unsupported(o, "spec.bfdProfile", name, "no BFDProfile of that name among the objects read; BFD left off")
		case p.MultihopTTL > 1 && p.SourceAddress == "":
			c.unsupported(o, "spec.bfdProfile", name, "multihop BFD (RFC 5883) needs sourceAddress on the peer; BFD left off")
		default:
			cp := *b
			p.BFD = &cp
		}
	}
	for _, k := range []struct{ key, why string }{
		{"nodeSelectors", "edgelb peers from the gateways it runs on, not from selected nodes"},
		{"vrf", "edgelb does not peer inside a VRF"},
		{"disableMP", "edgelb's sessions carry the families of the peer address"},
		{"dualStackAddressFamily", "edgelb's sessions carry the families of the peer address"},
		{"ebgpMultiHop", "false is edgelb's default"},
		{"enableGracefulRestart", ""},
	} {
		if v, ok := take(o.Spec, k.key); ok && k.why != "" {
			c.unsupported(o, "spec."+k.key, v, k.why)
		}
	}
	b.Peers = append(b.Peers, p)
	c.objects["peer/"+p.Name] = o
	return nil
}

// bfdProfile keeps a BFDProfile for the peers that name it (MetalLB's
// intervals are milliseconds; its defaults, 300/300/3, are edgelb's).
func (c *converter) bfdProfile(o *Object) {
	b := &BFD{Enabled: true}
	if v, ok := takeInt(o.Spec, "receiveInterval"); ok {
		b.ReceiveInterval = (time.Duration(v) * time.Millisecond).String()
	}
	if v, ok := takeInt(o.Spec, "transmitInterval"); ok {
		b.TransmitInterval = (time.Duration(v) * time.Millisecond).String()
	}
	b.Multiplier, _ = takeInt(o.Spec, "detectMultiplier")
	b.Passive, _ = takeBool(o.Spec, "passiveMode")
	for _, k := range []struct{ key, why string }{
		{"echoMode", "edgelb's BFD (FRR bfdd, sessions keyed by address) runs no echo function"},
		{"echoInterval", "edgelb's BFD runs no echo function"},
		{"minimumTtl", "edgelb derives the multihop minimum TTL from the peer's multihopTTL (256 - multihopTTL)"},
	} {
		if v, ok := take(o.Spec, k.key); ok {
			c.unsupported(o, "spec."+k.key, v, k.why)
		}
	}
	c.bfd[o.Name] = b
}

// bgpAdvertisement: the pools it selects are announced by BGP, to its
// peers (none: every peer), with its route attributes.
func (c *converter) bgpAdvertisement(o *Object) error {
	targets := c.selectPools(o)
	m := o.Spec
	peers := takeStrings(m, "peers")
	if v, ok := take(m, "nodeSelectors"); ok {
		c.unsupported(o, "spec.nodeSelectors", show(v), "edgelb advertises from the gateways it runs on")
	}
	for _, p := range targets {
		c.selected(p.Name).bgp(peers)
		cp := map[string]any{}
		for k, v := range m {
			cp[k] = v
		}
		if err := c.applyAdvertisement(o, "spec", cp, p); err != nil {
			return err
		}
	}
	// What applyAdvertisement reads is taken from the original once.
	for _, k := range []string{"aggregationLength", "aggregationLengthV6", "localPref", "communities"} {
		delete(m, k)
	}
	return nil
}

// poolFamilies reports whether p has IPv4 and IPv6 ranges.
func poolFamilies(p *Pool) (v4, v6 bool) {
	for _, a := range p.Addresses {
		if strings.Contains(a, ":") {
			v6 = true
		} else {
			v4 = true
		}
	}
	return v4, v6
}

// applyAdvertisement sets p's route attributes from one advertisement. A
// pool can carry one set; a second, different one is reported.
func (c *converter) applyAdvertisement(o *Object, path string, m map[string]any, p *Pool) error {
	ad := Advertisement{}
	// MetalLB: aggregationLength (default 32) for IPv4 routes,
	// aggregationLengthV6 (default 128) for IPv6 ones; a family the pool
	// does not have ignores its length (noted).
	agg, hasAgg := takeInt(m, "aggregationLength")
	agg6, hasAgg6 := takeInt(m, "aggregationLengthV6")
	v4, v6 := poolFamilies(p)
	switch {
	case hasAgg && !v4 && agg != 32:
		c.note(o, path+".aggregationLength", agg, fmt.Sprintf("pool %s has no IPv4 range: MetalLB ignores it, and so does the converted pool", p.Name))
	case hasAgg && agg != 32:
		ad.AggregationLength = agg
	}
	switch {
	case hasAgg6 && !v6 && agg6 != 128:
		c.note(o, path+".aggregationLengthV6", agg6, fmt.Sprintf("pool %s has no IPv6 range: MetalLB ignores it, and so does the converted pool", p.Name))
	case hasAgg6 && agg6 != 128:
		ad.AggregationLengthV6 = agg6
	}
	ad.LocalPref, _ = takeInt(m, "localPref")
	for _, cm := range takeStrings(m, "communities") {
		v := cm
		if alias, ok := c.communities[cm]; ok {
			v = alias
		}
		if rest, ok := strings.CutPrefix(v, "large:"); ok {
			ad.LargeCommunities = append(ad.LargeCommunities, rest)
		} else {
			ad.Communities = append(ad.Communities, v)
		}
	}
	if ad.AggregationLength == 0 && ad.AggregationLengthV6 == 0 && ad.LocalPref == 0 && len(ad.Communities) == 0 && len(ad.LargeCommunities) == 0 {
		return nil
	}
	if p.Advertisement != nil && fmt.Sprint(*p.Advertisement) != fmt.Sprint(ad) {
		c.unsupported(o, path, fmt.Sprint(ad), fmt.Sprintf("pool %s already has route attributes %v; edgelb keeps one set per pool", p.Name, *p.Advertisement))
		return nil
	}
	p.Advertisement = &ad
	return nil
}
