package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

func convertPool(r *rawPool, path string, c *collector) lb.Pool {
	p := lb.Pool{Name: r.Name, AutoAssign: true, AvoidBuggyIPs: r.AvoidBuggyIPs, Allocation: r.ServiceAllocation}
	if r.AutoAssign != nil {
		p.AutoAssign = *r.AutoAssign
	}
	for i, s := range r.Addresses {
		rg, err := lb.ParseRange(s)
		if err != nil {
			c.addErr(index(join(path, "addresses"), i), s, err)
			continue
		}
		p.Ranges = append(p.Ranges, rg)
	}
	a := r.Advertisement
	p.Advertisement = lb.Advertisement{
		Communities:      a.Communities,
		LargeCommunities: a.LargeCommunities,
		AggregationLen:   a.AggregationLength,
	}
	if a.LocalPref < 0 || a.LocalPref > 1<<32-1 {
		c.add(join(path, "advertisement.localPref"), fmt.Sprint(a.LocalPref), "out of range 0-4294967295")
	} else {
		p.Advertisement.LocalPref = uint32(a.LocalPref)
	}
	return p
}

// parseAddr parses one IP address (no zone, IPv4-mapped IPv6 unmapped).
func parseAddr(c *collector, field, s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		c.add(field, s, "not an IP address")
		return netip.Addr{}, false
	}
	if a.Zone() != "" {
		c.add(field, s, "zones are not allowed")
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func convertService(r *rawService, path string, snat bool, c *collector) lb.ServiceSpec {
	s := lb.ServiceSpec{Name: r.Name, Pool: r.Pool, SharingKey: r.SharingKey}
	switch {
	case r.VIP != "" && len(r.VIPs) > 0:
		c.add(join(path, "vip"), r.VIP, "set vip or vips, not both")
	case r.VIP != "":
		if a, ok := parseAddr(c, join(path, "vip"), r.VIP); ok {
			s.VIPs = []netip.Addr{a}
		}
	default:
		for i, v := range r.VIPs {
			if a, ok := parseAddr(c, index(join(path, "vips"), i), v); ok {
				s.VIPs = append(s.VIPs, a)
			}
		}
	}
	for i, f := range r.Families {
		switch strings.ToLower(f) {
		case "ipv4":
			s.Families = append(s.Families, lb.IPv4)
		case "ipv6":
			s.Families = append(s.Families, lb.IPv6)
		default:
			c.add(index(join(path, "families"), i), f, "want IPv4 or IPv6")
		}
	}
	if len(r.Ports) > 0 {
		s.Ports = make([]lb.PortSpec, 0, len(r.Ports))
	}
	for i := range r.Ports {
		s.Ports = append(s.Ports, convertPort(&r.Ports[i], elem{path, "ports", i}, c))
	}
	if len(r.Backends) > 0 {
		s.Backends = make([]lb.BackendSpec, 0, len(r.Backends))
	}
	for i := range r.Backends {
		s.Backends = append(s.Backends, convertBackend(&r.Backends[i], elem{path, "backends", i}, c))
	}
	var err error
	if s.Scheduler, err = proxy.ParseScheduler(r.Scheduler); err != nil {
		c.addErr(join(path, "scheduler"), r.Scheduler, fmt.Errorf("want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh"))
		s.Scheduler = proxy.DefaultScheduler
	}
	switch {
	case r.Method != "":
		if s.Method, err = proxy.ParseMethod(r.Method); err != nil {
			c.addErr(join(path, "method"), r.Method, fmt.Errorf("want nat, nat-nosnat, dr or tunnel"))
			s.Method = proxy.NAT
		}
	case snat:
		s.Method = proxy.NAT
	default:
		s.Method = proxy.NATNoSNAT
	}
	if a := r.Affinity; a != nil {
		f := join(path, "affinity")
		switch a.Type {
		case "ClientIP":
			s.Affinity = parseDuration(c, join(f, "timeout"), a.Timeout, DefaultAffinityTimeout)
			if s.Affinity == 0 && a.Timeout != "" {
				c.add(join(f, "timeout"), string(a.Timeout), "must be more than 0 (use type: None to turn affinity off)")
			}
		case "None", "":
			if a.Timeout != "" {
				c.add(join(f, "timeout"), string(a.Timeout), "only applies to type: ClientIP")
			}
		default:
			c.add(join(f, "type"), a.Type, "want ClientIP or None")
		}
	}
	if r.HealthCheck != nil {
		s.Health = convertHealthCheck(r.HealthCheck, join(path, "healthCheck"), c)
	}
	return s
}

// elem is a list element's path, rendered only for an error: a config of
// 10,000 services × 10 backends has 110,000 of them, and building each
// one's path and its fields' paths eagerly was a tenth of a parse's CPU and
// ~9 MB of garbage (issue 18: start-up).
type elem struct {
	parent, list string
	i            int
}

// field is the path of one of the element's fields: services[4].ports[0].port.
func (e elem) field(name string) string { return join(index(join(e.parent, e.list), e.i), name) }

// port is port16 with the field's path built only when v is refused.
func (e elem) port(c *collector, name string, v, lo int64) uint16 {
	if v == 0 && lo == 0 || v >= lo && v <= 65535 {
		return uint16(v)
	}
	return port16(c, e.field(name), v, lo)
}

func convertPort(r *rawPort, at elem, c *collector) lb.PortSpec {
	p := lb.PortSpec{Name: r.Name}
	if r.Port == 0 {
		c.add(at.field("port"), "", "required (1-65535)")
	} else {
		p.Port = at.port(c, "port", r.Port, 1)
	}
	p.NodePort = at.port(c, "nodePort", r.NodePort, 0)
	p.TargetPort = at.port(c, "targetPort", r.TargetPort, 0)
	var err error
	if p.Protocol, err = proxy.ParseProtocol(r.Protocol); err != nil {
		c.add(at.field("protocol"), r.Protocol, "want TCP or UDP")
		p.Protocol = proxy.TCP
	}
	return p
}

// convertBackend accepts "198.51.100.2:8080", "[2001:db8::2]:8080" or a
// bare address with an optional port field (not both).
func convertBackend(r *rawBackend, at elem, c *collector) lb.BackendSpec {
	b := lb.BackendSpec{Weight: DefaultWeight}
	if r.Address == "" {
		c.add(at.field("address"), "", "required (an IP address, optionally with :port)")
	} else if ap, err := netip.ParseAddrPort(r.Address); err == nil {
		if ap.Addr().Zone() != "" {
			c.add(at.field("address"), r.Address, "zones are not allowed")
		}
		b.Addr, b.Port = ap.Addr().Unmap(), ap.Port()
		if b.Port == 0 {
			c.add(at.field("address"), r.Address, "port 0 is not a port (leave it out to use the service's targetPort)")
		}
		if r.Port != 0 {
			c.add(at.field("port"), fmt.Sprint(r.Port), "the address already has a port (%d)", ap.Port())
		}
	} else if a, ok := parseAddr(c, at.field("address"), r.Address); ok {
		b.Addr = a
		b.Port = at.port(c, "port", r.Port, 0)
	}
	if w := r.Weight; w != nil {
		if *w >= 0 && *w <= MaxWeight {
			b.Weight = uint32(*w)
		} else {
			b.Weight = uint32(intIn(c, at.field("weight"), *w, 0, MaxWeight))
		}
	}
	return b
}

func convertHealthCheck(r *rawHealthCheck, path string, c *collector) *lb.HealthCheck {
	h := &lb.HealthCheck{Type: strings.ToLower(r.Type), Path: r.Path, Host: r.Host}
	if r.URL != "" {
		f := join(path, "url")
		switch {
		case r.Path != "" || r.Host != "":
			c.add(f, r.URL, "set url or path/host, not both")
		default:
			u, err := url.Parse(r.URL)
			switch {
			case err != nil:
				c.add(f, r.URL, "not a URL: %v", err)
			case u.Scheme != "http" && u.Scheme != "https":
				c.add(f, r.URL, "want an http:// or https:// URL")
			case u.Host == "":
				c.add(f, r.URL, "URL has no host (write http://HOST/PATH; the check still connects to each backend)")
			case h.Type != "" && h.Type != u.Scheme:
				c.add(f, r.URL, "scheme does not match type %q", r.Type)
			default:
				h.Type, h.Host, h.Path = u.Scheme, u.Host, u.RequestURI()
			}
		}
	}
	if h.Type == "" {
		h.Type = "tcp"
	}
	h.Port = port16(c, join(path, "port"), r.Port, 0)
	if r.ExpectStatus != 0 {
		h.Expect = intIn(c, join(path, "expectStatus"), r.ExpectStatus, 100, 599)
	} else if h.Type != "tcp" {
		h.Expect = 200
	}
	h.Interval = parseDuration(c, join(path, "interval"), r.Interval, DefaultCheckInterval)
	def := DefaultCheckTimeout
	if h.Interval > 0 && h.Interval < def {
		def = h.Interval // a short interval shortens the default timeout with it
	}
	h.Timeout = parseDuration(c, join(path, "timeout"), r.Timeout, def)
	h.Rise, h.Fall = DefaultRise, DefaultFall
	if r.Rise != nil {
		h.Rise = intIn(c, join(path, "rise"), *r.Rise, 1, 1000)
	}
	if r.Fall != nil {
		h.Fall = intIn(c, join(path, "fall"), *r.Fall, 1, 1000)
	}
	if (h.Type == "http" || h.Type == "https") && h.Path == "" {
		h.Path = "/"
	}
	return h
}
