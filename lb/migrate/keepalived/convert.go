package keepalived

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/lb"
)

// keepalived's defaults (keepalived.conf(5) and check_data.c of 2.2):
// written into the output explicitly wherever edgelb's own default
// differs, so the converted config means what keepalived did.
const (
	defaultScheduler      = "wlc" // IPVS_DEF_SCHED
	defaultDelayLoop      = "60s" // KEEPALIVED_DEFAULT_DELAY
	defaultConnectTimeout = "5s"
	defaultPersistence    = 360 // IPVS_SVC_PERSISTENT_TIMEOUT, persistence_timeout without a value
	defaultRetry          = 1   // "Default: 1" (DNS_CHECK 3, not carried)
)

// Config is the edgelb config the conversion writes (pools, services,
// announce.l2): pools and services in lb's input schema, the config
// file's own structs.
type Config struct {
	Pools    []lb.PoolInput    `json:"pools"`
	Services []lb.ServiceInput `json:"services"`
	Announce *Announce         `json:"announce,omitempty"`
}

type Announce struct {
	L2 *L2 `json:"l2,omitempty"`
}

type L2 struct {
	Interface string `json:"interface"`
}

// Scope says which lines of an IPVS virtual service's `ipvsadm -Sn`
// listing a finding can change: the service line (-A), its real servers
// (-a), or all of them (the service is not programmed by edgelb at all).
type Scope string

const (
	ScopeService Scope = "service"
	ScopeReal    Scope = "real"
	ScopeAll     Scope = "all"
)

// Finding is one report line: a keyword with no edgelb equivalent, or a
// value carried approximately. Service and Scope, when set, name the IPVS
// virtual service whose table the difference shows in (ipvsadm -Sn's
// "-t VIP:PORT", "-u …", "--sctp-service …", "-f MARK"), so a table
// compared with keepalived's can be matched to the report line by line.
type Finding struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Keyword string `json:"keyword"`
	Note    string `json:"note"`
	Service string `json:"service,omitempty"`
	Scope   Scope  `json:"scope,omitempty"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", f.File, f.Line, f.Keyword, f.Note)
}

// Result is the converted config and its report.
type Result struct {
	Config      Config
	Unsupported []Finding
	Notes       []Finding
}

// Options: SkipUnknown reports a keyword keepalived itself does not know
// (and skips it) instead of refusing the conversion.
type Options struct {
	SkipUnknown bool
}

type converter struct {
	opts     Options
	res      Result
	groups   map[string]*Node
	vips     map[netip.Addr]bool // pool addresses
	vrrpVIPs map[netip.Addr]bool // addresses some vrrp_instance holds
	// svcNodes[i] is the virtual_server services[i] came from (check.go),
	// svcFrom[i] its frontend line, real server lines and IPVS key.
	svcNodes []*Node
	svcFrom  []svcOrigin
}

type svcOrigin struct {
	fe   *Node
	real []*Node // real[k] made backend k
	key  string
}

func keyword(n *Node) string { return strings.TrimSpace(n.Name + " " + strings.Join(n.Args, " ")) }

func (c *converter) unsupported(n *Node, note string) { c.unsupportedIn(n, note, "", "") }

func (c *converter) unsupportedIn(n *Node, note, svc string, scope Scope) {
	c.res.Unsupported = append(c.res.Unsupported, Finding{File: n.File, Line: n.Line, Keyword: keyword(n), Note: note, Service: svc, Scope: scope})
}

func (c *converter) note(n *Node, note string) { c.noteIn(n, note, "", "") }

func (c *converter) noteIn(n *Node, note, svc string, scope Scope) {
	c.res.Notes = append(c.res.Notes, Finding{File: n.File, Line: n.Line, Keyword: keyword(n), Note: note, Service: svc, Scope: scope})
}

// unknown refuses a keyword keepalived does not know, or reports it when
// asked to skip.
func (c *converter) unknown(n *Node, where string) error {
	if c.opts.SkipUnknown {
		c.unsupported(n, "unknown to keepalived 2.2 "+where+": skipped")
		return nil
	}
	return &Error{n.File, n.Line, fmt.Sprintf("%q is not a keepalived keyword %s (a typo? --skip-unknown reports and skips it)", n.Name, where), ErrUnknown}
}

func valueErr(n *Node, field, value, why string) error {
	return &Error{n.File, n.Line, fmt.Sprintf("%s %q: %s", field, value, why), ErrValue}
}

// Convert turns parsed statements into an edgelb config. Every VIP goes
// into one pool "keepalived" (autoAssign off: only these services use it),
// as a /32 or /128, so the addresses stay exactly the ones keepalived used.
func Convert(nodes []*Node, opts Options) (*Result, error) {
	c := &converter{opts: opts, groups: map[string]*Node{}, vips: map[netip.Addr]bool{}, vrrpVIPs: map[netip.Addr]bool{}}
	for _, n := range nodes {
		if n.Name == "virtual_server_group" && len(n.Args) == 1 {
			c.groups[n.Args[0]] = n
		}
	}
	// VRRP first: whether a virtual server's address is announced by keepalived
	// depends on every vrrp_instance, wherever it stands in the file.
	for _, n := range nodes {
		if n.Name == "vrrp_instance" {
			if err := c.vrrp(n); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range nodes {
		var err error
		switch {
		case n.Name == "virtual_server":
			err = c.virtualServer(n)
		case n.Name == "virtual_server_group":
			if len(n.Args) != 1 {
				err = valueErr(n, "virtual_server_group", strings.Join(n.Args, " "), "want one name")
			}
		case n.Name == "vrrp_instance":
		case isInclude(n.Name):
			c.include(n)
		case strings.HasPrefix(n.Name, "@"):
			c.unsupported(n, "conditional configuration (@config_id): edgelb has no per-host lines; skipped")
		case strings.HasPrefix(n.Name, "$"):
			c.unsupported(n, "parameter definition: the migration does not substitute $parameters")
		case rootKeywords[n.Name]:
			c.unsupported(n, "VRRP/host settings: edgelb's gateways own VIPs through announce.l2 (or BGP), not VRRP")
		default:
			err = c.unknown(n, "at the top level")
		}
		if err != nil {
			return nil, err
		}
	}
	c.dropLoops()
	if len(c.vips) > 0 {
		var addrs []netip.Addr
		for a := range c.vips {
			addrs = append(addrs, a)
		}
		sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
		p := lb.PoolInput{Name: "keepalived", AutoAssign: new(false)}
		for _, a := range addrs {
			p.Addresses = append(p.Addresses, netip.PrefixFrom(a, a.BitLen()).String())
		}
		c.res.Config.Pools = []lb.PoolInput{p}
	}
	c.shareVIPs()
	for _, fs := range [][]Finding{c.res.Unsupported, c.res.Notes} {
		sort.SliceStable(fs, func(i, j int) bool {
			if fs[i].File != fs[j].File {
				return fs[i].File < fs[j].File
			}
			return fs[i].Line < fs[j].Line
		})
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return &c.res, nil
}

func (c *converter) include(n *Node) {
	switch {
	case n.Included == nil:
		c.unsupported(n, "included files are not read from text without a directory: convert the file itself (edgelb migrate keepalived -f FILE follows includes)")
	case len(n.Included) == 0:
		c.note(n, "matches no file: nothing included (keepalived ignores it too)")
	default:
		c.note(n, "read "+strings.Join(n.Included, ", "))
	}
}

// dropLoops leaves out the virtual services whose VIP is also a real
// server (keepalived's own sample.virtual_server_group has 192.168.200.1
// as both): IPVS takes it, edgelb refuses a backend that is a VIP (the
// packet would come back through the gateway). Dropping the services on
// that VIP, reported, keeps every other service as written; dropping the
// backend instead would change every service that has it.
func (c *converter) dropLoops() {
	backendAt := map[netip.Addr]*Node{}
	for i, s := range c.res.Config.Services {
		for k, b := range s.Backends {
			if a, err := netip.ParseAddr(b.Address); err == nil && backendAt[a] == nil {
				backendAt[a] = c.svcFrom[i].real[k]
			}
		}
	}
	keep := 0
	kept := map[netip.Addr]bool{}
	for i, s := range c.res.Config.Services {
		a, _ := netip.ParseAddr(s.VIP) // invalid for a fwmark service: never a backend
		if rs := backendAt[a]; rs != nil {
			c.unsupportedIn(c.svcFrom[i].fe, fmt.Sprintf("VIP %s is also a real server (%s:%d): edgelb refuses a backend that is a VIP (the packet would come back through the gateway); this virtual service is not converted",
				a, rs.File, rs.Line), c.svcFrom[i].key, ScopeAll)
			continue
		}
		kept[a] = true
		c.res.Config.Services[keep], c.svcNodes[keep], c.svcFrom[keep] = s, c.svcNodes[i], c.svcFrom[i]
		keep++
	}
	c.res.Config.Services, c.svcNodes, c.svcFrom = c.res.Config.Services[:keep], c.svcNodes[:keep], c.svcFrom[:keep]
	for a := range c.vips {
		if backendAt[a] != nil && !kept[a] && !c.vrrpVIPs[a] {
			delete(c.vips, a)
		}
	}
}

// shareVIPs gives services on one VIP a common sharing key: keepalived
// puts many ports on one address, edgelb allows it with a key.
func (c *converter) shareVIPs() {
	count := map[string]int{}
	for _, s := range c.res.Config.Services {
		count[s.VIP]++
	}
	for i := range c.res.Config.Services {
		s := &c.res.Config.Services[i]
		if s.VIP != "" && count[s.VIP] > 1 {
			s.SharingKey = "vip-" + strings.NewReplacer(".", "-", ":", "-").Replace(s.VIP)
		}
	}
}

func arg(n *Node) string {
	if len(n.Args) == 0 {
		return ""
	}
	return n.Args[0]
}

// seconds reads a keepalived TIMER (seconds, fractions allowed).
func seconds(n *Node) (string, error) {
	v, err := strconv.ParseFloat(arg(n), 64)
	if err != nil || v < 0 || v > 1e9 {
		return "", valueErr(n, n.Name, arg(n), "want seconds")
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + "s", nil
}

func (c *converter) vrrp(n *Node) error {
	for _, k := range n.Children {
		switch k.Name {
		case "interface":
			if c.res.Config.Announce == nil {
				c.res.Config.Announce = &Announce{L2: &L2{Interface: arg(k)}}
			} else if c.res.Config.Announce.L2.Interface != arg(k) {
				c.unsupported(k, fmt.Sprintf("edgelb announces on one interface (%s)", c.res.Config.Announce.L2.Interface))
			}
		case "virtual_ipaddress", "virtual_ipaddress_excluded":
			for _, v := range k.Children {
				s, bits, hasBits := strings.Cut(v.Name, "/")
				a, err := netip.ParseAddr(s)
				if err != nil {
					return valueErr(v, k.Name, v.Name, "not an IP address")
				}
				a = a.Unmap()
				if hasBits {
					b, err := strconv.Atoi(bits)
					if err != nil || b < 0 || b > a.BitLen() {
						return valueErr(v, k.Name, v.Name, fmt.Sprintf("prefix length want 0..%d", a.BitLen()))
					}
					if b != a.BitLen() {
						c.note(v, fmt.Sprintf("carried as %s/%d: keepalived adds the address with /%d (and so a connected route for %s); edgelb answers for the address only",
							a, a.BitLen(), b, netip.PrefixFrom(a, b).Masked()))
					}
				}
				c.vips[a] = true
				c.vrrpVIPs[a] = true
				if len(v.Args) > 0 {
					c.note(v, "dev/label/scope options dropped: edgelb does not add VIPs to interfaces by hand")
				}
			}
		default:
			c.unsupported(k, "VRRP: edgelb owns VIPs through announce.l2 members or BGP, not VRRP")
		}
	}
	return nil
}
