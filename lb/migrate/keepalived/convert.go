package keepalived

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
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

// Finding is one report line: a keyword with no edgelb equivalent or a
// choice the conversion made.
type Finding struct {
	Line    int    `json:"line"`
	Keyword string `json:"keyword"`
	Note    string `json:"note"`
}

func (f Finding) String() string { return fmt.Sprintf("line %d: %s: %s", f.Line, f.Keyword, f.Note) }

// Result is the converted config and its report.
type Result struct {
	Config      Config
	Unsupported []Finding
	Notes       []Finding
}

type converter struct {
	res    Result
	groups map[string]*Node
	vips   map[netip.Addr]bool
	// svcNodes[i] is the virtual_server services[i] came from (check.go).
	svcNodes []*Node
}

func (c *converter) unsupported(n *Node, note string) {
	kw := strings.TrimSpace(n.Name + " " + strings.Join(n.Args, " "))
	c.res.Unsupported = append(c.res.Unsupported, Finding{Line: n.Line, Keyword: kw, Note: note})
}

func (c *converter) note(n *Node, note string) {
	kw := strings.TrimSpace(n.Name + " " + strings.Join(n.Args, " "))
	c.res.Notes = append(c.res.Notes, Finding{Line: n.Line, Keyword: kw, Note: note})
}

func convErr(n *Node, field, value, why string) error {
	return fmt.Errorf("%w: line %d: %s %q: %s", ErrSyntax, n.Line, field, value, why)
}

// Convert turns parsed statements into an edgelb config. Every VIP goes
// into one pool "keepalived" (autoAssign off: only these services use it),
// as a /32 or /128, so the addresses stay exactly the ones keepalived used.
func Convert(nodes []*Node) (*Result, error) {
	c := &converter{groups: map[string]*Node{}, vips: map[netip.Addr]bool{}}
	for _, n := range nodes {
		if n.Name == "virtual_server_group" && len(n.Args) == 1 {
			c.groups[n.Args[0]] = n
		}
	}
	for _, n := range nodes {
		var err error
		switch n.Name {
		case "virtual_server":
			err = c.virtualServer(n)
		case "virtual_server_group":
			// read through the virtual_server that uses it
		case "vrrp_instance":
			err = c.vrrp(n)
		case "include":
			c.unsupported(n, "included files are not read: run the migration on them too (or concatenate them)")
		case "global_defs", "vrrp_sync_group", "vrrp_script", "static_ipaddress", "static_routes":
			c.unsupported(n, "VRRP/host settings: edgelb's gateways own VIPs through announce.l2 (or BGP), not VRRP")
		default:
			c.unsupported(n, "not known to the migration")
		}
		if err != nil {
			return nil, err
		}
	}
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
	if err := c.check(); err != nil {
		return nil, err
	}
	return &c.res, nil
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
		if count[s.VIP] > 1 {
			s.SharingKey = "vip-" + strings.NewReplacer(".", "-", ":", "-").Replace(s.VIP)
		}
	}
}

type frontend struct {
	addr netip.Addr
	port int
}

func parseAddrPort(n *Node, addr, port string) (frontend, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return frontend{}, convErr(n, "address", addr, "not an IP address")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return frontend{}, convErr(n, "port", port, "want 1..65535")
	}
	return frontend{a.Unmap(), p}, nil
}

// frontends reads "IP PORT" or "group NAME" (virtual_server_group: IP PORT
// and IP-RANGE PORT lines; fwmark entries are reported).
func (c *converter) frontends(vs *Node) ([]frontend, error) {
	if len(vs.Args) == 2 && vs.Args[0] == "group" {
		g, ok := c.groups[vs.Args[1]]
		if !ok {
			return nil, convErr(vs, "group", vs.Args[1], "no virtual_server_group of this name")
		}
		var out []frontend
		for _, e := range g.Children {
			if e.Name == "fwmark" {
				c.unsupported(e, "fwmark virtual servers: edgelb matches address and port, not marks")
				continue
			}
			if len(e.Args) != 1 {
				return nil, convErr(e, "virtual_server_group entry", e.Name, "want IP PORT or IP-LASTOCTET PORT")
			}
			first, last, isRange := strings.Cut(e.Name, "-")
			f, err := parseAddrPort(e, first, e.Args[0])
			if err != nil {
				return nil, err
			}
			out = append(out, f)
			if isRange {
				end, err := strconv.Atoi(last)
				b := f.addr.As16()
				if err != nil || !f.addr.Is4() || end < int(b[15]) || end > 255 {
					return nil, convErr(e, "range", e.Name, "want A.B.C.D-E with E ≥ D (IPv4)")
				}
				for a, n := f.addr, int(b[15]); n < end; n++ {
					a = a.Next()
					out = append(out, frontend{a, f.port})
				}
			}
		}
		return out, nil
	}
	if len(vs.Args) == 1 && vs.Args[0] != "" {
		c.unsupported(vs, "fwmark virtual servers: edgelb matches address and port, not marks")
		return nil, nil
	}
	if len(vs.Args) != 2 {
		return nil, convErr(vs, "virtual_server", strings.Join(vs.Args, " "), "want IP PORT or group NAME")
	}
	f, err := parseAddrPort(vs, vs.Args[0], vs.Args[1])
	if err != nil {
		return nil, err
	}
	return []frontend{f}, nil
}

func arg(n *Node) string {
	if len(n.Args) == 0 {
		return ""
	}
	return n.Args[0]
}

func seconds(n *Node) (string, error) {
	v, err := strconv.ParseFloat(arg(n), 64)
	if err != nil || v < 0 {
		return "", convErr(n, n.Name, arg(n), "want seconds")
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + "s", nil
}

func (c *converter) virtualServer(vs *Node) error {
	fes, err := c.frontends(vs)
	if err != nil || len(fes) == 0 {
		return err
	}
	tmpl := lb.ServiceInput{Scheduler: string(proxy.WeightedRoundRobin), Method: string(proxy.NAT)}
	proto := "TCP"
	interval := ""
	var real []*Node
	for _, k := range vs.Children {
		switch k.Name {
		case "lb_algo", "lvs_sched":
			s := arg(k)
			if _, err := proxy.ParseScheduler(s); err != nil {
				c.unsupported(k, fmt.Sprintf("edgelb's schedulers are %v; wrr used", proxy.Schedulers))
				continue
			}
			tmpl.Scheduler = s
		case "lb_kind", "lvs_method":
			switch strings.ToUpper(arg(k)) {
			case "NAT":
				tmpl.Method = string(proxy.NAT)
			case "DR":
				tmpl.Method = string(proxy.DirectRouting)
			case "TUN":
				tmpl.Method = string(proxy.Tunnel)
			default:
				return convErr(k, k.Name, arg(k), "want NAT, DR or TUN")
			}
		case "persistence_timeout":
			if _, err := strconv.Atoi(arg(k)); err != nil {
				return convErr(k, k.Name, arg(k), "want seconds")
			}
			tmpl.Affinity = &lb.AffinityInput{Type: "ClientIP", Timeout: arg(k) + "s"}
		case "protocol":
			switch strings.ToUpper(arg(k)) {
			case "TCP", "UDP", "SCTP":
				proto = strings.ToUpper(arg(k))
			default:
				return convErr(k, k.Name, arg(k), "want TCP, UDP or SCTP")
			}
		case "delay_loop":
			if interval, err = seconds(k); err != nil {
				return err
			}
		case "real_server":
			real = append(real, k)
		default:
			c.unsupported(k, "no edgelb equivalent")
		}
	}
	var health *lb.HealthCheckInput
	var healthFrom *Node
	for _, rs := range real {
		if len(rs.Args) != 2 {
			return convErr(rs, "real_server", strings.Join(rs.Args, " "), "want IP PORT")
		}
		f, err := parseAddrPort(rs, rs.Args[0], rs.Args[1])
		if err != nil {
			return err
		}
		b := lb.BackendInput{Address: f.addr.String(), Port: int64(f.port), Weight: new(int64(1))}
		for _, k := range rs.Children {
			switch k.Name {
			case "weight":
				w, err := strconv.ParseInt(arg(k), 10, 32)
				if err != nil || w < 0 {
					return convErr(k, "weight", arg(k), "want 0 or more")
				}
				b.Weight = &w
			case "TCP_CHECK", "HTTP_GET", "SSL_GET":
				h, err := c.checker(k, interval)
				if err != nil {
					return err
				}
				switch {
				case health == nil:
					health, healthFrom = h, k
				case !sameCheck(health, h):
					c.unsupported(k, fmt.Sprintf("edgelb runs one check per service; the one from line %d is used", healthFrom.Line))
				}
			default:
				c.unsupported(k, "no edgelb equivalent")
			}
		}
		tmpl.Backends = append(tmpl.Backends, b)
	}
	if len(real) > 0 && health == nil {
		c.note(vs, "no checker: edgelb sends to every backend, as keepalived would with no checker")
	}
	tmpl.HealthCheck = health
	for _, fe := range fes {
		s := tmpl
		s.Name = serviceName(fe, proto)
		s.VIP = fe.addr.String()
		s.Ports = []lb.PortInput{{Port: int64(fe.port), Protocol: proto}}
		c.vips[fe.addr] = true
		c.res.Config.Services = append(c.res.Config.Services, s)
		c.svcNodes = append(c.svcNodes, vs)
	}
	return nil
}

// sameCheck: two real servers' checkers are one check.
func sameCheck(a, b *lb.HealthCheckInput) bool {
	ia, ib := *a, *b
	ia.Fall, ib.Fall = nil, nil
	fa, fb := int64(0), int64(0)
	if a.Fall != nil {
		fa = *a.Fall
	}
	if b.Fall != nil {
		fb = *b.Fall
	}
	return ia == ib && fa == fb
}

func serviceName(fe frontend, proto string) string {
	a := strings.NewReplacer(".", "-", ":", "-").Replace(fe.addr.String())
	return fmt.Sprintf("vs-%s-%d-%s", a, fe.port, strings.ToLower(proto))
}

func (c *converter) checker(k *Node, interval string) (*lb.HealthCheckInput, error) {
	h := &lb.HealthCheckInput{Type: "tcp", Interval: interval}
	if k.Name != "TCP_CHECK" {
		h.Type = "http"
		if k.Name == "SSL_GET" {
			h.Type = "https"
		}
	}
	for _, o := range k.Children {
		var err error
		switch o.Name {
		case "connect_timeout":
			h.Timeout, err = seconds(o)
		case "connect_port":
			h.Port, err = strconv.ParseInt(arg(o), 10, 64)
			if err == nil && (h.Port < 1 || h.Port > 65535) {
				err = convErr(o, o.Name, arg(o), "want 1..65535")
			}
		case "retry", "nb_get_retry":
			var r int64
			if r, err = strconv.ParseInt(arg(o), 10, 64); err == nil && r > 0 {
				h.Fall = &r
			}
		case "url":
			if h.Type == "tcp" {
				c.unsupported(o, "url in a TCP_CHECK")
				continue
			}
			if h.Path != "" {
				c.unsupported(o, "edgelb checks one URL; the first is used")
				continue
			}
			for _, u := range o.Children {
				switch u.Name {
				case "path":
					h.Path = arg(u)
				case "status_code":
					h.ExpectStatus, err = strconv.ParseInt(arg(u), 10, 64)
				default:
					c.unsupported(u, "edgelb checks the status code only")
				}
			}
		default:
			c.unsupported(o, "no edgelb equivalent")
		}
		if err != nil {
			return nil, convErr(o, o.Name, arg(o), err.Error())
		}
	}
	if h.Type != "tcp" && h.Path == "" {
		h.Path = "/"
	}
	return h, nil
}

// vrrp takes the instance's VIPs into the pool and its interface into
// announce.l2; the VRRP machinery itself (priorities, adverts,
// authentication) is reported: edgelb owns addresses its own way.
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
				s, _, _ := strings.Cut(v.Name, "/")
				a, err := netip.ParseAddr(s)
				if err != nil {
					return convErr(v, k.Name, v.Name, "not an address")
				}
				c.vips[a.Unmap()] = true
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
