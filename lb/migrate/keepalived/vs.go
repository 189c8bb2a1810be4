package keepalived

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// maxGroupRange bounds one virtual_server_group range: edgelb makes a
// service per address, so a /16 would be 65,536 services.
const maxGroupRange = 1024

type frontend struct {
	addr netip.Addr
	port int
	mark uint32 // non-zero: a firewall-mark frontend (no addr, no port)
	from *Node  // the virtual_server or group entry line
}

func parseMark(n *Node, s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v == 0 {
		return 0, valueErr(n, "fwmark", s, "want 1..4294967295")
	}
	return uint32(v), nil
}

// ipvsKey is how ipvsadm -Sn names a virtual service.
func ipvsKey(proto string, a netip.Addr, port int) string {
	flag := map[string]string{"TCP": "-t", "UDP": "-u", "SCTP": "--sctp-service"}[proto]
	return fmt.Sprintf("%s %s", flag, netip.AddrPortFrom(a, uint16(port)))
}

func parsePort(n *Node, port string) (int, error) {
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return 0, valueErr(n, "port", port, "want 0..65535")
	}
	return p, nil
}

func parseAddr(n *Node, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, valueErr(n, "address", s, "not an IP address")
	}
	return a.Unmap(), nil
}

// groupEntry reads one virtual_server_group line: IP [PORT], a range
// (A.B.C.D-E, A-B, A/len) [PORT], or fwmark N [inet|inet6].
func (c *converter) groupEntry(e *Node, proto string) ([]frontend, error) {
	if e.Name == "fwmark" {
		if len(e.Args) < 1 || len(e.Args) > 2 || len(e.Args) == 2 && e.Args[1] != "inet" && e.Args[1] != "inet6" {
			return nil, valueErr(e, "virtual_server_group entry", keyword(e), "want fwmark N [inet|inet6]")
		}
		m, err := parseMark(e, e.Args[0])
		if err != nil {
			return nil, err
		}
		if len(e.Args) == 2 {
			c.note(e, "the family is the real servers' in edgelb (one IPVS service per family they have)")
		}
		return []frontend{{mark: m, from: e}}, nil
	}
	if len(e.Args) > 1 {
		return nil, valueErr(e, "virtual_server_group entry", keyword(e), "want IP [PORT], a range [PORT] or fwmark N")
	}
	port := 0
	if len(e.Args) == 1 {
		var err error
		if port, err = parsePort(e, e.Args[0]); err != nil {
			return nil, err
		}
	}
	var first, last netip.Addr
	var err error
	switch {
	case strings.Contains(e.Name, "/"):
		p, perr := netip.ParsePrefix(e.Name)
		if perr != nil {
			return nil, valueErr(e, "range", e.Name, "not a prefix")
		}
		p = p.Masked()
		if p.Addr().BitLen()-p.Bits() > 10 {
			c.unsupported(e, fmt.Sprintf("a range over %d addresses: edgelb makes a service per address; not converted", maxGroupRange))
			return nil, nil
		}
		first = p.Addr().Unmap()
		last = first
		for nx := last.Next(); nx.IsValid() && p.Contains(nx); nx = nx.Next() {
			last = nx
		}
	case strings.Contains(e.Name, "-"):
		a, b, _ := strings.Cut(e.Name, "-")
		if first, err = parseAddr(e, a); err != nil {
			return nil, err
		}
		if strings.ContainsAny(b, ".:") {
			if last, err = parseAddr(e, b); err != nil {
				return nil, err
			}
		} else {
			// The last part replaces the address's last byte (IPv4) or
			// 16-bit group (IPv6).
			bs := first.AsSlice()
			if first.Is4() {
				v, perr := strconv.ParseUint(b, 10, 8)
				if perr != nil {
					return nil, valueErr(e, "range", e.Name, "want A.B.C.D-E with E in 0..255")
				}
				bs[3] = byte(v)
			} else {
				v, perr := strconv.ParseUint(b, 16, 16)
				if perr != nil {
					return nil, valueErr(e, "range", e.Name, "want an IPv6 address-XXXX (hex)")
				}
				bs[14], bs[15] = byte(v>>8), byte(v)
			}
			last, _ = netip.AddrFromSlice(bs)
		}
		if last.Less(first) || first.Is4() != last.Is4() {
			return nil, valueErr(e, "range", e.Name, "the end is below the start or of another family")
		}
	default:
		if first, err = parseAddr(e, e.Name); err != nil {
			return nil, err
		}
		last = first
	}
	var out []frontend
	for a := first; ; a = a.Next() {
		if len(out) == maxGroupRange {
			c.unsupported(e, fmt.Sprintf("a range over %d addresses: edgelb makes a service per address; not converted", maxGroupRange))
			return nil, nil
		}
		out = append(out, frontend{addr: a, port: port, from: e})
		if a == last {
			break
		}
	}
	return out, nil
}

// frontends reads "IP [PORT]", "fwmark N" or "group NAME".
func (c *converter) frontends(vs *Node, proto string) ([]frontend, error) {
	switch {
	case len(vs.Args) == 2 && vs.Args[0] == "fwmark":
		m, err := parseMark(vs, vs.Args[1])
		if err != nil {
			return nil, err
		}
		return []frontend{{mark: m, from: vs}}, nil
	case len(vs.Args) == 2 && vs.Args[0] == "group":
		g, ok := c.groups[vs.Args[1]]
		if !ok {
			return nil, valueErr(vs, "group", vs.Args[1], "no virtual_server_group of this name")
		}
		var out []frontend
		for _, e := range g.Children {
			fs, err := c.groupEntry(e, proto)
			if err != nil {
				return nil, err
			}
			out = append(out, fs...)
		}
		return out, nil
	case len(vs.Args) == 1 || len(vs.Args) == 2:
		a, err := parseAddr(vs, vs.Args[0])
		if err != nil {
			return nil, err
		}
		port := 0
		if len(vs.Args) == 2 {
			if port, err = parsePort(vs, vs.Args[1]); err != nil {
				return nil, err
			}
		}
		return []frontend{{addr: a, port: port, from: vs}}, nil
	}
	return nil, valueErr(vs, "virtual_server", strings.Join(vs.Args, " "), "want IP [PORT], fwmark N or group NAME")
}

// vsSettings are a virtual_server's own values, read before its real servers.
type vsSettings struct {
	svc   lb.ServiceInput
	proto string
	timer timers
	real  []*Node
	// flagged: keywords that change the IPVS service line or real servers,
	// reported per frontend once the frontends are known.
	perService []deferred
}

type deferred struct {
	n     *Node
	note  string
	scope Scope
}

// timers are the checker timings keepalived lets a virtual_server and a
// real_server set for the checkers below them.
type timers struct {
	delayLoop, connectTimeout string
	retry                     int64
	delayBeforeRetry          string
	set                       bool // retry given
}

func (c *converter) timer(t *timers, k *Node) (bool, error) {
	var err error
	switch k.Name {
	case "delay_loop":
		t.delayLoop, err = seconds(k)
	case "connect_timeout":
		t.connectTimeout, err = seconds(k)
	case "delay_before_retry":
		t.delayBeforeRetry, err = seconds(k)
	case "retry", "nb_get_retry":
		t.retry, err = strconv.ParseInt(arg(k), 10, 32)
		if err != nil || t.retry < 0 {
			return true, valueErr(k, k.Name, arg(k), "want a count, 0 or more")
		}
		t.set = true
	case "warmup":
		_, err = seconds(k)
	default:
		return false, nil
	}
	return true, err
}

func (c *converter) virtualServer(vs *Node) error {
	// keepalived 2.2 sets UDP when a virtual server names no protocol
	// (check_data.c: "no protocol set - defaulting to UDP").
	st := vsSettings{proto: "", svc: lb.ServiceInput{Scheduler: defaultScheduler, Method: string(proxy.NAT)}}
	persistence := 0
	for _, k := range vs.Children {
		if ok, err := c.timer(&st.timer, k); ok {
			if err != nil {
				return err
			}
			continue
		}
		switch k.Name {
		case "lb_algo", "lvs_sched":
			s := arg(k)
			if _, err := proxy.ParseScheduler(s); err != nil {
				st.perService = append(st.perService, deferred{k, fmt.Sprintf("edgelb's schedulers are %v; %s (keepalived's default) used instead", proxy.Schedulers, defaultScheduler), ScopeService})
				continue
			}
			st.svc.Scheduler = s
		case "lb_kind", "lvs_method":
			m, err := method(k)
			if err != nil {
				return err
			}
			st.svc.Method = m
			if len(k.Args) > 1 && !(len(k.Args) == 3 && k.Args[1] == "type" && k.Args[2] == "ipip") {
				st.perService = append(st.perService, deferred{k, "tunnel options: edgelb's tunnel method is IPIP", ScopeReal})
			}
		case "persistence_timeout":
			persistence = defaultPersistence
			if len(k.Args) > 0 {
				v, err := strconv.Atoi(arg(k))
				if err != nil || v < 0 {
					return valueErr(k, k.Name, arg(k), "want seconds")
				}
				persistence = v
			}
		case "protocol":
			switch p := strings.ToUpper(arg(k)); p {
			case "TCP", "UDP":
				st.proto = p
			case "SCTP":
				st.proto = p
			default:
				return valueErr(k, k.Name, arg(k), "want TCP, UDP or SCTP")
			}
		case "real_server":
			st.real = append(st.real, k)
		case "persistence_granularity", "persistence_engine", "ops", "hashed", "flag-1", "flag-2", "flag-3",
			"sh-port", "sh-fallback", "mh-port", "mh-fallback":
			st.perService = append(st.perService, deferred{k, "an IPVS service option edgelb does not set", ScopeService})
		case "alpha":
			st.perService = append(st.perService, deferred{k, "keepalived starts every real server down until its checker passes; edgelb starts backends up", ScopeReal})
		case "sorry_server", "sorry_server_inhibit", "sorry_server_lvs_method":
			st.perService = append(st.perService, deferred{k, "edgelb has no sorry server: with every backend down it keeps them all (health.allDown keep) or withdraws the VIP", ScopeReal})
		case "inhibit_on_failure":
			c.note(k, "edgelb sets a failed backend's weight to 0, as inhibit_on_failure does")
		case "virtualhost":
			st.svc.HealthCheck = &lb.HealthCheckInput{Host: arg(k)} // the checkers below read it
		default:
			if !vsKeywords[k.Name] {
				if err := c.unknown(k, "in a virtual_server"); err != nil {
					return err
				}
				continue
			}
			c.unsupported(k, "no edgelb equivalent")
		}
	}
	noProto := st.proto == ""
	if noProto {
		st.proto = "UDP"
	}
	fes, err := c.frontends(vs, st.proto)
	if err != nil || len(fes) == 0 {
		return err
	}
	for _, fe := range fes {
		if noProto && fe.mark == 0 { // a firewall mark has no protocol
			c.note(vs, "no protocol: keepalived 2.2 defaults to UDP (and warns); carried as UDP")
			break
		}
	}
	if st.proto == "SCTP" {
		// A firewall mark has no protocol: its frontends still convert.
		var marks []frontend
		for _, fe := range fes {
			if fe.mark != 0 {
				marks = append(marks, fe)
				continue
			}
			c.unsupportedIn(fe.from, "SCTP: edgelb's services are TCP or UDP; not converted", ipvsKey(st.proto, fe.addr, fe.port), ScopeAll)
		}
		if fes = marks; len(fes) == 0 {
			return nil
		}
	}
	if persistence > 0 {
		st.svc.Affinity = &lb.AffinityInput{Type: "ClientIP", Timeout: strconv.Itoa(persistence) + "s"}
	}
	if err := c.realServers(vs, &st); err != nil {
		return err
	}
	for _, fe := range fes {
		key := ipvsKey(st.proto, fe.addr, fe.port)
		if fe.mark != 0 {
			key = fmt.Sprintf("-f %d", fe.mark)
		}
		for _, d := range st.perService {
			c.unsupportedIn(d.n, d.note, key, d.scope)
		}
		if fe.mark != 0 {
			c.markService(vs, fe, &st, key)
			continue
		}
		if fe.port == 0 {
			c.unsupportedIn(fe.from, "port 0 (every port, persistent): edgelb's services have one port each; not converted", key, ScopeAll)
			continue
		}
		if !c.vrrpVIPs[fe.addr] {
			c.note(fe.from, fmt.Sprintf("%s is in no vrrp_instance, so keepalived does not announce it; edgelb announces every service VIP (announce.l2)", fe.addr))
		}
		s := st.svc
		s.Name = serviceName(fe, st.proto)
		s.VIP = fe.addr.String()
		s.Ports = []lb.PortInput{{Port: int64(fe.port), Protocol: st.proto}}
		c.vips[fe.addr] = true
		c.res.Config.Services = append(c.res.Config.Services, s)
		c.svcNodes = append(c.svcNodes, vs)
		c.svcFrom = append(c.svcFrom, svcOrigin{fe: fe.from, real: st.real, key: key})
	}
	return nil
}

// markService converts a firewall-mark frontend: an edgelb fwmark
// service (IPVS dataplane) with the virtual server's settings. keepalived
// neither writes the marking rules nor masquerades (its NAT is edgelb's
// nat-nosnat); the operator's firewall marks the packets, as before.
func (c *converter) markService(vs *Node, fe frontend, st *vsSettings, key string) {
	s := st.svc
	s.Name = fmt.Sprintf("vs-fwmark-%d", fe.mark)
	s.FWMark = int64(fe.mark)
	if s.Method == string(proxy.NAT) {
		s.Method = string(proxy.NATNoSNAT)
		c.note(fe.from, "fwmark with NAT: carried as nat-nosnat, which is what keepalived's NAT does (no masquerade; edgelb's nat would mark the packet and so change the firewall mark). The firewall rules that mark the packets stay the operator's: edgelb does not write them")
	} else {
		c.note(fe.from, "the firewall rules that mark the packets stay the operator's: edgelb does not write them")
	}
	if h := s.HealthCheck; h != nil && h.Port == 0 {
		for k, b := range s.Backends {
			if b.Port == 0 {
				c.unsupportedIn(st.real[k], "a fwmark real server without a port and a checker without connect_port: edgelb cannot tell which port to check; this service's check is not carried (every backend stays in rotation)", key, ScopeReal)
				s.HealthCheck = nil
				break
			}
		}
	}
	c.res.Config.Services = append(c.res.Config.Services, s)
	c.svcNodes = append(c.svcNodes, vs)
	c.svcFrom = append(c.svcFrom, svcOrigin{fe: fe.from, real: st.real, key: key})
}

func method(k *Node) (string, error) {
	switch strings.ToUpper(arg(k)) {
	case "NAT":
		return string(proxy.NAT), nil
	case "DR":
		return string(proxy.DirectRouting), nil
	case "TUN":
		return string(proxy.Tunnel), nil
	}
	return "", valueErr(k, k.Name, arg(k), "want NAT, DR or TUN")
}

func serviceName(fe frontend, proto string) string {
	a := strings.NewReplacer(".", "-", ":", "-").Replace(fe.addr.String())
	return fmt.Sprintf("vs-%s-%d-%s", a, fe.port, strings.ToLower(proto))
}
