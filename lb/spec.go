package lb

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/edgelb/edgelb/lb/fielderr"
	"github.com/edgelb/edgelb/proxy"
)

// The input schema: a service, a pool and a BGP peer as a person writes
// them, in the config file (YAML), in REST bodies, in an IPPool's spec and
// in what `edgelb migrate` writes — one struct each, one set of field
// names. Values that need parsing (addresses, durations, enums) are
// strings, so a bad one is reported with its path by ParseService and
// ParsePool (which collect every problem) rather than by the decoder.
// Pointers mark fields whose absence differs from zero.

// ServiceInput is a standalone service as written.
type ServiceInput struct {
	Name string `json:"name"`
	// VIP is the usual single VIP; VIPs is the dual-stack list (at most
	// one per family). Not both.
	VIP  string   `json:"vip,omitempty"`
	VIPs []string `json:"vips,omitempty"`
	// Families to allocate for when there is no VIP: IPv4, IPv6 (default IPv4).
	Families []string `json:"families,omitempty"`
	// FWMark makes this a firewall-mark service (IPVS dataplane only):
	// instead of a VIP and ports, the packets the operator's own firewall
	// rules marked with this mark (1-4294967295). No vip, vips, families,
	// pool, sharingKey or ports.
	FWMark      int64             `json:"fwmark,omitempty"`
	Pool        string            `json:"pool,omitempty"`
	SharingKey  string            `json:"sharingKey,omitempty"`
	Ports       []PortInput       `json:"ports"`
	Backends    []BackendInput    `json:"backends"`
	Scheduler   string            `json:"scheduler,omitempty"`
	Affinity    *AffinityInput    `json:"affinity,omitempty"`
	Method      string            `json:"method,omitempty"`
	HealthCheck *HealthCheckInput `json:"healthCheck,omitempty"`
	// AffinityTimeout is the REST API's spelling of affinity until 0.9
	// ("30m" = affinity {type: ClientIP, timeout: 30m}). Accepted, never
	// written; it goes in the next release.
	AffinityTimeout string `json:"affinityTimeout,omitempty"`
}

// PortInput is one port of a service.
type PortInput struct {
	Name       string `json:"name,omitempty"`
	Port       int64  `json:"port"`
	Protocol   string `json:"protocol,omitempty"` // TCP (default) or UDP
	NodePort   int64  `json:"nodePort,omitempty"`
	TargetPort int64  `json:"targetPort,omitempty"` // 0: same as port
}

// BackendInput is one real server: address is "198.51.100.2",
// "198.51.100.2:8080" or "[2001:db8::2]:8080"; port (when the address has
// none) defaults to the port's targetPort. Weight defaults to 1; 0 drains.
type BackendInput struct {
	Address string `json:"address"`
	Port    int64  `json:"port,omitempty"`
	Weight  *int64 `json:"weight,omitempty"`
}

// AffinityInput: ClientIP keeps a client on its backend for timeout (3h).
type AffinityInput struct {
	Type    string `json:"type"`
	Timeout string `json:"timeout,omitempty"`
}

// HealthCheckInput is an active check against every backend.
type HealthCheckInput struct {
	Type string `json:"type,omitempty"` // tcp (default), http, https
	// URL is type + host + path in one: http://www.example.com/healthz.
	URL          string `json:"url,omitempty"`
	Path         string `json:"path,omitempty"`
	Host         string `json:"host,omitempty"`
	Port         int64  `json:"port,omitempty"`
	ExpectStatus int64  `json:"expectStatus,omitempty"`
	Interval     string `json:"interval,omitempty"`
	Timeout      string `json:"timeout,omitempty"`
	Rise         *int64 `json:"rise,omitempty"`
	Fall         *int64 `json:"fall,omitempty"`
}

// PoolInput is an address pool as written. An IPPool's spec is the same
// without name (the object's metadata.name is the pool's name).
type PoolInput struct {
	Name      string   `json:"name,omitempty"`
	Addresses []string `json:"addresses"`
	// AutoAssign defaults to true (absent means true).
	AutoAssign    *bool               `json:"autoAssign,omitempty"`
	AvoidBuggyIPs bool                `json:"avoidBuggyIPs,omitempty"`
	Advertisement *AdvertisementInput `json:"advertisement,omitempty"`
	// Announce selects announcers, BGP peers and L2 interfaces (absent: all).
	Announce          *PoolAnnounceInput `json:"announce,omitempty"`
	ServiceAllocation *ServiceAllocation `json:"serviceAllocation,omitempty"`
}

// PoolAnnounceInput is a pool's announce: as written (lb.Announce).
type PoolAnnounceInput struct {
	Announcers []string `json:"announcers,omitempty"` // l2, bgp
	Peers      []string `json:"peers,omitempty"`      // BGP peer names
	Interfaces []string `json:"interfaces,omitempty"` // L2 interfaces
}

// AdvertisementInput is a pool's BGP route attributes.
type AdvertisementInput struct {
	Communities      []string `json:"communities,omitempty"`
	LargeCommunities []string `json:"largeCommunities,omitempty"`
	LocalPref        int64    `json:"localPref,omitempty"`
	// AggregationLength is for IPv4 routes (and an IPv6-only pool's, as
	// before aggregationLengthV6); AggregationLengthV6 for IPv6 routes.
	AggregationLength   int64 `json:"aggregationLength,omitempty"`
	AggregationLengthV6 int64 `json:"aggregationLengthV6,omitempty"`
}

// PeerInput is one BGP neighbour as written (announce.bgp.peers[] in the
// config file; lb/config checks it and reads passwordFile).
type PeerInput struct {
	Name            string `json:"name,omitempty"`
	Address         string `json:"address"`
	ASN             int64  `json:"asn"`
	Port            int64  `json:"port,omitempty"`
	SourceAddress   string `json:"sourceAddress,omitempty"`
	MultihopTTL     int64  `json:"multihopTTL,omitempty"`
	Password        string `json:"password,omitempty"`
	PasswordFile    string `json:"passwordFile,omitempty"`
	HoldTime        string `json:"holdTime,omitempty"`
	Keepalive       string `json:"keepalive,omitempty"`
	Passive         bool   `json:"passive,omitempty"`
	GracefulRestart bool   `json:"gracefulRestart,omitempty"`
	// BFD guards the session with BFD (RFC 5880; RFC 5883 when multihop).
	BFD *BFDInput `json:"bfd,omitempty"`
}

// BFDInput is a BGP peer's bfd: as written; durations like "300ms".
type BFDInput struct {
	Enabled          bool   `json:"enabled"`
	ReceiveInterval  string `json:"receiveInterval,omitempty"`
	TransmitInterval string `json:"transmitInterval,omitempty"`
	Multiplier       int64  `json:"multiplier,omitempty"`
	Passive          bool   `json:"passive,omitempty"`
}

// DefaultAffinityTimeout is ClientIP affinity's timeout when none is given.
const DefaultAffinityTimeout = 3 * time.Hour

// ParseService turns a service as written into a ServiceSpec and checks
// it (ValidateService with o): every problem at once, as *Errors whose
// paths are relative to the service (ports[0].port). defMethod is the
// method of a service that sets none ("" = nat).
func ParseService(in *ServiceInput, defMethod proxy.Method, o ValidateOptions) (ServiceSpec, error) {
	var c fielderr.Collector
	s := ConvertService(&c, "", in, defMethod)
	CheckService(&c, "", &s, o)
	return s, c.Err()
}

// ConvertService is ParseService's first half for a caller with its own
// collector (the config file): the syntax of every field, reported under
// path; the spec it returns has the defaults filled in.
func ConvertService(c *fielderr.Collector, path string, in *ServiceInput, defMethod proxy.Method) ServiceSpec {
	at := func(f string) string { return fielderr.Join(path, f) }
	s := ServiceSpec{Name: in.Name, Pool: in.Pool, SharingKey: in.SharingKey}
	switch {
	case in.VIP != "" && len(in.VIPs) > 0:
		c.Add(at("vip"), in.VIP, "set vip or vips, not both")
	case in.VIP != "":
		if a, ok := parseAddr(c, at("vip"), in.VIP); ok {
			s.VIPs = []netip.Addr{a}
		}
	default:
		for i, v := range in.VIPs {
			if a, ok := parseAddr(c, fielderr.Index(at("vips"), i), v); ok {
				s.VIPs = append(s.VIPs, a)
			}
		}
	}
	switch {
	case in.FWMark == 0:
	case in.FWMark < 1 || in.FWMark > math.MaxUint32:
		c.Add(at("fwmark"), fmt.Sprint(in.FWMark), "out of range 1-%d", uint32(math.MaxUint32))
	default:
		s.FWMark = uint32(in.FWMark)
	}
	for i, f := range in.Families {
		switch strings.ToLower(f) {
		case "ipv4":
			s.Families = append(s.Families, IPv4)
		case "ipv6":
			s.Families = append(s.Families, IPv6)
		default:
			c.Add(fielderr.Index(at("families"), i), f, "want IPv4 or IPv6")
		}
	}
	if len(in.Ports) > 0 {
		s.Ports = make([]PortSpec, 0, len(in.Ports))
	}
	for i := range in.Ports {
		s.Ports = append(s.Ports, convertPort(c, elem{path, "ports", i}, &in.Ports[i]))
	}
	if len(in.Backends) > 0 {
		s.Backends = make([]BackendSpec, 0, len(in.Backends))
	}
	for i := range in.Backends {
		s.Backends = append(s.Backends, convertBackend(c, elem{path, "backends", i}, &in.Backends[i]))
	}
	var err error
	if s.Scheduler, err = proxy.ParseScheduler(in.Scheduler); err != nil {
		c.Add(at("scheduler"), in.Scheduler, "want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh")
		s.Scheduler = proxy.DefaultScheduler
	}
	switch {
	case in.Method != "":
		if s.Method, err = proxy.ParseMethod(in.Method); err != nil {
			c.Add(at("method"), in.Method, "want nat, nat-nosnat, dr or tunnel")
			s.Method = proxy.NAT
		}
	case defMethod != "":
		s.Method = defMethod
	default:
		s.Method = proxy.NAT
	}
	switch a := in.Affinity; {
	case a != nil && in.AffinityTimeout != "":
		c.Add(at("affinityTimeout"), in.AffinityTimeout, "set affinity or the old affinityTimeout, not both")
	case a != nil:
		f := at("affinity")
		switch a.Type {
		case "ClientIP":
			s.Affinity = parseDuration(c, fielderr.Join(f, "timeout"), a.Timeout, DefaultAffinityTimeout)
			if s.Affinity == 0 && a.Timeout != "" && !c.Failed(fielderr.Join(f, "timeout")) {
				c.Add(fielderr.Join(f, "timeout"), a.Timeout, "must be more than 0 (use type: None to turn affinity off)")
			}
		case "None", "":
			if a.Timeout != "" {
				c.Add(fielderr.Join(f, "timeout"), a.Timeout, "only applies to type: ClientIP")
			}
		default:
			c.Add(fielderr.Join(f, "type"), a.Type, "want ClientIP or None")
		}
	case in.AffinityTimeout != "":
		// The old REST spelling; its error names the field the user wrote.
		s.Affinity = parseDuration(c, at("affinityTimeout"), in.AffinityTimeout, 0)
	}
	if in.HealthCheck != nil {
		s.Health = ConvertHealthCheck(c, at("healthCheck"), in.HealthCheck)
	}
	if len(s.VIPs) == 0 && len(s.Families) == 0 && len(in.Families) == 0 && in.FWMark == 0 {
		s.Families = []Family{IPv4}
	}
	return s
}

// elem is a list element's path, rendered only for an error: a config of
// 10,000 services × 10 backends has 110,000 of them.
type elem struct {
	parent, list string
	i            int
}

func (e elem) field(name string) string {
	return fielderr.Join(fielderr.Index(fielderr.Join(e.parent, e.list), e.i), name)
}

// port range-checks a port field, building its path only when refused.
func (e elem) port(c *fielderr.Collector, name string, v, lo int64) uint16 {
	if v == 0 && lo == 0 || v >= lo && v <= 65535 {
		return uint16(v)
	}
	c.Add(e.field(name), fmt.Sprint(v), "port out of range %d-65535", lo)
	return 0
}

func convertPort(c *fielderr.Collector, at elem, in *PortInput) PortSpec {
	p := PortSpec{Name: in.Name}
	if in.Port == 0 {
		c.Add(at.field("port"), "", "required (1-65535)")
	} else {
		p.Port = at.port(c, "port", in.Port, 1)
	}
	p.NodePort = at.port(c, "nodePort", in.NodePort, 0)
	p.TargetPort = at.port(c, "targetPort", in.TargetPort, 0)
	var err error
	if p.Protocol, err = proxy.ParseProtocol(in.Protocol); err != nil {
		c.Add(at.field("protocol"), in.Protocol, "want TCP or UDP")
		p.Protocol = proxy.TCP
	}
	return p
}

// convertBackend accepts "198.51.100.2:8080", "[2001:db8::2]:8080" or a
// bare address with an optional port field (not both).
func convertBackend(c *fielderr.Collector, at elem, in *BackendInput) BackendSpec {
	b := BackendSpec{Weight: 1}
	if in.Address == "" {
		c.Add(at.field("address"), "", "required (an IP address, optionally with :port)")
	} else if ap, err := netip.ParseAddrPort(in.Address); err == nil {
		if ap.Addr().Zone() != "" {
			c.Add(at.field("address"), in.Address, "zones are not allowed")
		}
		b.Addr, b.Port = ap.Addr().Unmap(), ap.Port()
		if b.Port == 0 {
			c.Add(at.field("address"), in.Address, "port 0 is not a port (leave it out to use the service's targetPort)")
		}
		if in.Port != 0 {
			c.Add(at.field("port"), fmt.Sprint(in.Port), "the address already has a port (%d)", ap.Port())
		}
	} else if a, ok := parseAddr(c, at.field("address"), in.Address); ok {
		b.Addr = a
		b.Port = at.port(c, "port", in.Port, 0)
	}
	if w := in.Weight; w != nil {
		if *w < 0 || *w > MaxWeight {
			c.Add(at.field("weight"), fmt.Sprint(*w), "out of range 0-%d (0 drains the backend)", MaxWeight)
		} else {
			b.Weight = uint32(*w)
		}
	}
	return b
}

// parseAddr parses one IP address (no zone, IPv4-mapped IPv6 unmapped).
func parseAddr(c *fielderr.Collector, field, s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		msg := "not an IP address"
		if _, perr := netip.ParseAddrPort(s); perr == nil {
			msg = "an address with a port; a VIP is an address (ports go in ports)"
		}
		c.Add(field, s, "%s", msg)
		return netip.Addr{}, false
	}
	if a.Zone() != "" {
		c.Add(field, s, "zones are not allowed")
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// parseDuration parses a Go duration ("500ms", "3h"); def when empty;
// negative refused.
func parseDuration(c *fielderr.Collector, field, s string, def time.Duration) time.Duration {
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		c.Add(field, s, "want a duration like \"10s\", \"500ms\" or \"3h\"")
		return def
	}
	if v < 0 {
		c.Add(field, s, "must not be negative")
		return def
	}
	return v
}

// ConvertHealthCheck parses a health check as written (under path), with
// the defaults filled in (NormalizeHealth).
func ConvertHealthCheck(c *fielderr.Collector, path string, in *HealthCheckInput) *HealthCheck {
	at := func(f string) string { return fielderr.Join(path, f) }
	h := &HealthCheck{Type: strings.ToLower(in.Type), Path: in.Path, Host: in.Host}
	if in.URL != "" {
		switch {
		case in.Path != "" || in.Host != "":
			c.Add(at("url"), in.URL, "set url or path/host, not both")
		default:
			u, err := url.Parse(in.URL)
			switch {
			case err != nil:
				c.Add(at("url"), in.URL, "not a URL: %v", err)
			case u.Scheme != "http" && u.Scheme != "https":
				c.Add(at("url"), in.URL, "want an http:// or https:// URL")
			case u.Host == "":
				c.Add(at("url"), in.URL, "URL has no host (write http://HOST/PATH; the check still connects to each backend)")
			case h.Type != "" && h.Type != u.Scheme:
				c.Add(at("url"), in.URL, "scheme does not match type %q", in.Type)
			default:
				h.Type, h.Host, h.Path = u.Scheme, u.Host, u.RequestURI()
			}
		}
	}
	if in.Port != 0 {
		if in.Port < 1 || in.Port > 65535 {
			c.Add(at("port"), fmt.Sprint(in.Port), "port out of range 1-65535")
		} else {
			h.Port = uint16(in.Port)
		}
	}
	if in.ExpectStatus != 0 {
		if in.ExpectStatus < MinExpectStatus || in.ExpectStatus > MaxExpectStatus {
			c.Add(at("expectStatus"), fmt.Sprint(in.ExpectStatus), "out of range %d-%d", MinExpectStatus, MaxExpectStatus)
		} else {
			h.Expect = int(in.ExpectStatus)
		}
	}
	// Absent takes the default; given, it must be more than 0.
	h.Interval = parseDuration(c, at("interval"), in.Interval, 0)
	if in.Interval != "" && h.Interval == 0 && !c.Failed(at("interval")) {
		c.Add(at("interval"), in.Interval, "must be more than 0")
	}
	h.Timeout = parseDuration(c, at("timeout"), in.Timeout, 0)
	if in.Timeout != "" && h.Timeout == 0 && !c.Failed(at("timeout")) {
		c.Add(at("timeout"), in.Timeout, "must be more than 0")
	}
	for _, f := range []struct {
		name string
		v    *int64
		dst  *int
	}{{"rise", in.Rise, &h.Rise}, {"fall", in.Fall, &h.Fall}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 || *f.v > MaxRiseFall {
			c.Add(at(f.name), fmt.Sprint(*f.v), "out of range 1-%d", MaxRiseFall)
			continue
		}
		*f.dst = int(*f.v)
	}
	NormalizeHealth(h)
	return h
}

// InputOf renders a spec in the input schema (REST responses, migrate
// output): every value explicit, vips as a list.
func InputOf(s ServiceSpec) ServiceInput {
	out := ServiceInput{Name: s.Name, Pool: s.Pool, SharingKey: s.SharingKey, FWMark: int64(s.FWMark), Scheduler: string(s.Scheduler),
		Method: string(s.Method), Ports: []PortInput{}, Backends: []BackendInput{}}
	for _, v := range s.VIPs {
		out.VIPs = append(out.VIPs, v.String())
	}
	for _, f := range s.Families {
		out.Families = append(out.Families, f.String())
	}
	for _, p := range s.Ports {
		out.Ports = append(out.Ports, PortInput{Name: p.Name, Port: int64(p.Port), Protocol: p.Protocol.String(),
			NodePort: int64(p.NodePort), TargetPort: int64(p.TargetPort)})
	}
	for _, b := range s.Backends {
		w := int64(b.Weight)
		out.Backends = append(out.Backends, BackendInput{Address: b.Addr.String(), Port: int64(b.Port), Weight: &w})
	}
	if s.Affinity > 0 {
		out.Affinity = &AffinityInput{Type: "ClientIP", Timeout: s.Affinity.String()}
	}
	if h := s.Health; h != nil {
		rise, fall := int64(h.Rise), int64(h.Fall)
		out.HealthCheck = &HealthCheckInput{Type: h.Type, Path: h.Path, Host: h.Host, ExpectStatus: int64(h.Expect),
			Port: int64(h.Port), Interval: durString(h.Interval), Timeout: durString(h.Timeout), Rise: &rise, Fall: &fall}
	}
	return out
}

func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}
