package lb

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/edgelb/edgelb/lb/fielderr"
	"github.com/edgelb/edgelb/proxy"
)

// The one validator of a service: the config file, the REST API (through
// the engine) and the fleet's store all call it. It reports every problem,
// each a *FieldError naming the path and quoting the value.

// ValidateService checks a (normalized) standalone service on its own and
// against o: nil, or *Errors with every problem (paths relative to the
// service: "ports[1].nodePort").
func ValidateService(s *ServiceSpec, o ValidateOptions) error {
	var c fielderr.Collector
	CheckService(&c, "", s, o)
	return c.Err()
}

// CheckService is ValidateService for a caller with its own collector;
// paths are under path ("services[3]"). A field already refused in c (by
// ConvertService) is not judged again.
func CheckService(c *fielderr.Collector, path string, s *ServiceSpec, o ValidateOptions) {
	at := func(f string) string { return fielderr.Join(path, f) }
	if err := ValidateName(s.Name); err != nil {
		c.AddErr(at("name"), s.Name, err)
	}
	fams := checkServiceAddrs(c, path, s, o)
	if s.FWMark != 0 {
		fams = checkFWMark(c, path, s, o)
		if owner, ok := o.FWMarks[s.FWMark]; ok && owner != s.Name {
			c.Add(at("fwmark"), fmt.Sprint(s.FWMark), "already used by service %q", owner)
		}
	}

	nr := o.NodePortRange
	if nr == (PortRange{}) {
		nr = DefaultNodePortRange
	}
	if len(s.Ports) == 0 && s.FWMark == 0 && !c.Failed(at("ports")) {
		c.Add(at("ports"), "", "a service needs at least one port")
	}
	seen := map[PortProto]int{}
	names := map[string]int{}
	for k, p := range s.Ports {
		at := elem{path, "ports", k}.field
		if p.Protocol != proxy.TCP && p.Protocol != proxy.UDP {
			c.Add(at("protocol"), p.Protocol.String(), "want TCP or UDP")
		}
		if p.Port == 0 {
			c.Add(at("port"), "", "required (1-65535)")
		} else if j, dup := seen[PortProto{p.Port, p.Protocol}]; dup {
			c.Add(at("port"), fmt.Sprintf("%d/%s", p.Port, p.Protocol), "listed twice (also ports[%d])", j)
		} else {
			seen[PortProto{p.Port, p.Protocol}] = k
		}
		if p.Name != "" {
			if err := ValidateName(p.Name); err != nil || len(p.Name) > 63 {
				c.Add(at("name"), p.Name, "want lower-case letters, digits and '-', at most 63 characters")
			} else if j, dup := names[p.Name]; dup {
				c.Add(at("name"), p.Name, "duplicate port name (also ports[%d])", j)
			} else {
				names[p.Name] = k
			}
		}
		if p.NodePort == 0 {
			continue
		}
		if !nr.Contains(p.NodePort) {
			c.Add(at("nodePort"), fmt.Sprint(p.NodePort), "outside dataplane.nodePortRange %q", nr.String())
			continue
		}
		if owner, ok := o.NodePorts[PortProto{p.NodePort, p.Protocol}]; ok && owner != s.Name {
			c.Add(at("nodePort"), fmt.Sprintf("%d/%s", p.NodePort, p.Protocol), "already used by service %q", owner)
			continue
		}
		for _, other := range o.Others {
			if other.Name == s.Name {
				continue
			}
			for _, q := range other.Ports {
				if q.NodePort == p.NodePort && q.Protocol == p.Protocol {
					c.Add(at("nodePort"), fmt.Sprintf("%d/%s", p.NodePort, p.Protocol), "already used by service %q", other.Name)
				}
			}
		}
	}

	checkBackends(c, path, s, o, fams)
	if _, err := proxy.ParseScheduler(string(s.Scheduler)); err != nil || s.Scheduler == "" {
		c.Add(at("scheduler"), string(s.Scheduler), "want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh")
	}
	checkMethod(c, path, s, o)
	CheckDataplane(c, path, s, o.Dataplane)
	if s.Affinity < 0 || s.Affinity > MaxAffinityTimeout || s.Affinity > 0 && s.Affinity < time.Second {
		c.Add(at("affinity.timeout"), s.Affinity.String(), "out of range 1s-%s", MaxAffinityTimeout)
	}
	if s.Health != nil {
		CheckHealth(c, at("healthCheck"), s.Health)
	}
}

// checkFWMark checks what a firewall-mark service may not have (a VIP,
// families, a pool, a sharing key, ports) and returns its families: its
// backends' (one IPVS service each; IPv4 when it has none).
func checkFWMark(c *fielderr.Collector, path string, s *ServiceSpec, o ValidateOptions) map[Family]bool {
	at := func(f string) string { return fielderr.Join(path, f) }
	why := "a fwmark service has none: the packets the firewall marked are its frontend, whatever their address, protocol and port"
	switch {
	case len(s.VIPs) > 0:
		c.Add(vipField(path, o.SingleVIP && len(s.VIPs) == 1, 0), s.VIPs[0].String(), "%s", why)
	case len(s.Families) > 0:
		c.Add(at("families"), s.Families[0].String(), "%s (its family is its backends')", why)
	}
	if s.Pool != "" {
		c.Add(at("pool"), s.Pool, "%s", why)
	}
	if s.SharingKey != "" {
		c.Add(at("sharingKey"), s.SharingKey, "%s", why)
	}
	if len(s.Ports) > 0 {
		c.Add(at("ports"), fmt.Sprint(s.Ports[0].Port), "%s", why)
	}
	fams := map[Family]bool{}
	for _, b := range s.Backends {
		fams[FamilyOf(b.Addr)] = true
	}
	if h := s.Health; h != nil && h.Port == 0 {
		for k, b := range s.Backends {
			if b.Port == 0 {
				c.Add(at("healthCheck.port"), "", "backends[%d] (%s) has no port (a fwmark service's backend keeps the packet's port): set healthCheck.port or the backend's port", k, b.Addr)
				break
			}
		}
	}
	return fams
}

// vipField names VIP k: "vip" when it was written so, else vips[k].
func vipField(path string, single bool, k int) string {
	if single {
		return fielderr.Join(path, "vip")
	}
	return fielderr.Index(fielderr.Join(path, "vips"), k)
}

// checkServiceAddrs checks VIPs, families and the pool, and returns the
// families the service serves.
func checkServiceAddrs(c *fielderr.Collector, path string, s *ServiceSpec, o ValidateOptions) map[Family]bool {
	at := func(f string) string { return fielderr.Join(path, f) }
	var pool *Pool
	if s.Pool != "" {
		if err := ValidateName(s.Pool); err != nil {
			c.AddErr(at("pool"), s.Pool, err)
		} else if o.Pools != nil {
			for i := range o.Pools {
				if o.Pools[i].Name == s.Pool {
					pool = &o.Pools[i]
				}
			}
			if pool == nil {
				c.Add(at("pool"), s.Pool, "no pool of that name")
			}
		}
	}
	if len(s.VIPs) > 0 && len(s.Families) > 0 {
		c.Add(at("families"), "", "set vips or families, not both (families choose what to allocate when there is no VIP)")
	}
	fams := map[Family]bool{}
	for k, v := range s.VIPs {
		f := vipField(path, o.SingleVIP && len(s.VIPs) == 1, k)
		if err := CheckAddr(v, UseVIP); err != nil {
			c.AddErr(f, v.String(), err)
			continue
		}
		if err := o.Own.Check(v, UseVIP); err != nil {
			c.AddErr(f, v.String(), err)
			continue
		}
		if fams[FamilyOf(v)] {
			c.Add(f, v.String(), "two %s VIPs: a service has at most one VIP per family", FamilyOf(v))
			continue
		}
		fams[FamilyOf(v)] = true
		if o.Pools == nil || s.Pool != "" && pool == nil {
			continue
		}
		in := pool
		if in == nil {
			for i := range o.Pools {
				if o.Pools[i].Contains(v) {
					in = &o.Pools[i]
					break
				}
			}
		}
		switch {
		case in == nil:
			c.Add(f, v.String(), "outside every pool")
		case !in.Contains(v):
			c.Add(f, v.String(), "outside pool %q (%s)", in.Name, strings.Join(in.RangeStrings(), ", "))
		case !in.Usable(v):
			c.Add(f, v.String(), "pool %q has avoidBuggyIPs: .0 and .255 addresses are not handed out", in.Name)
		}
	}
	for k, fam := range s.Families {
		f := fielderr.Index(at("families"), k)
		switch {
		case fam != IPv4 && fam != IPv6:
			c.Add(f, fmt.Sprint(uint8(fam)), "want IPv4 or IPv6")
		case fams[fam]:
			c.Add(f, fam.String(), "listed twice")
		default:
			fams[fam] = true
		}
	}
	return fams
}

func checkBackends(c *fielderr.Collector, path string, s *ServiceSpec, o ValidateOptions, fams map[Family]bool) {
	// A VIP refused while parsing leaves the families unknown: judging the
	// backends' families against what is left would only echo that error.
	vipFailed := c.AnyFailed() && (c.Failed(fielderr.Join(path, "vip")) || c.Failed(fielderr.Join(path, "vips")) ||
		c.Failed(fielderr.Join(path, "families")))
	seen := make(map[netip.AddrPort]int, len(s.Backends))
	for b, be := range s.Backends {
		at := elem{path, "backends", b}.field
		a := be.Addr
		if c.AnyFailed() && c.Failed(at("address")) {
			continue
		}
		if err := CheckAddr(a, UseBackend); err != nil {
			c.AddErr(at("address"), a.String(), err)
			continue
		}
		if err := o.Own.Check(a, UseBackend); err != nil {
			c.AddErr(at("address"), backendString(be), err)
			continue
		}
		if slices.Contains(s.VIPs, a) {
			c.Add(at("address"), a.String(), "the VIP of service %q: a backend may not be a VIP (the packet would come back here)", s.Name)
			continue
		}
		if owner, ok := o.VIPs[a]; ok {
			c.Add(at("address"), a.String(), "the VIP of service %q: a backend may not be a VIP (the packet would come back here)", owner)
			continue
		}
		if !vipFailed && !fams[FamilyOf(a)] {
			c.Add(at("address"), a.String(), "an %s backend, but the service has no %s VIP (add one with vips/families)", FamilyOf(a), FamilyOf(a))
		}
		if be.Weight > MaxWeight {
			c.Add(at("weight"), fmt.Sprint(be.Weight), "out of range 0-%d (0 drains the backend)", MaxWeight)
		}
		key := netip.AddrPortFrom(a, be.Port)
		if j, dup := seen[key]; dup {
			c.Add(at("address"), backendString(be), "listed twice (also backends[%d])", j)
		} else {
			seen[key] = b
		}
	}
}

func backendString(b BackendSpec) string {
	if b.Port == 0 {
		return b.Addr.String()
	}
	return netip.AddrPortFrom(b.Addr, b.Port).String()
}

// checkMethod refuses what the dataplane cannot do, never downgrading it:
// DR and tunnel are IPVS-only and deliver the packet with the VIP's port
// unchanged, so they cannot map ports or serve node ports.
func checkMethod(c *fielderr.Collector, path string, s *ServiceSpec, o ValidateOptions) {
	at := func(f string) string { return fielderr.Join(path, f) }
	switch s.Method {
	case proxy.NAT, proxy.NATNoSNAT:
	case proxy.DirectRouting, proxy.Tunnel:
		for k, p := range s.Ports {
			f := elem{path, "ports", k}.field
			if p.TargetPort != 0 && p.TargetPort != p.Port {
				c.Add(f("targetPort"), fmt.Sprint(p.TargetPort), "method %s cannot map ports: targetPort must equal port %d", s.Method, p.Port)
			}
			if p.NodePort != 0 {
				c.Add(f("nodePort"), fmt.Sprint(p.NodePort), "method %s cannot serve node ports (the backend would need the node's address and port)", s.Method)
			}
		}
		for b, be := range s.Backends {
			for _, p := range s.Ports {
				if be.Port != 0 && be.Port != p.Port {
					// On the address: the port may be written there (addr:port).
					c.Add(elem{path, "backends", b}.field("address"), backendString(be),
						"method %s cannot map ports: the backend port must equal the service port %d (leave it out)", s.Method, p.Port)
					break
				}
			}
		}
	default:
		c.Add(at("method"), string(s.Method), "want nat, nat-nosnat, dr or tunnel")
		return
	}
	if s.FWMark != 0 && s.Method == proxy.NAT {
		c.Add(at("method"), string(s.Method), "a fwmark service cannot masquerade: edgelb's nat marks the packet for it, which would change the firewall mark IPVS matches; use nat-nosnat (backends route replies through the gateway), dr or tunnel")
	}
}

// CheckHealth checks a (normalized) health check, reporting under path.
func CheckHealth(c *fielderr.Collector, path string, h *HealthCheck) {
	at := func(f string) string { return fielderr.Join(path, f) }
	switch h.Type {
	case "tcp":
		if h.Path != "" || h.Host != "" || h.Expect != 0 {
			c.Add(at("type"), h.Type, "path, host and expectStatus only apply to http and https checks")
		}
	case "http", "https":
		checkCheckPath(c, path, h)
		if h.Expect < MinExpectStatus || h.Expect > MaxExpectStatus {
			c.Add(at("expectStatus"), fmt.Sprint(h.Expect), "out of range %d-%d", MinExpectStatus, MaxExpectStatus)
		}
	default:
		c.Add(at("type"), h.Type, "want tcp, http or https")
	}
	if h.Interval <= 0 {
		c.Add(at("interval"), h.Interval.String(), "must be more than 0")
	}
	if h.Timeout <= 0 {
		c.Add(at("timeout"), h.Timeout.String(), "must be more than 0")
	} else if h.Interval > 0 && h.Timeout > h.Interval {
		c.Add(at("timeout"), h.Timeout.String(), "longer than interval %s (a check must finish before the next starts)", h.Interval)
	}
	if h.Rise < 1 || h.Rise > MaxRiseFall {
		c.Add(at("rise"), fmt.Sprint(h.Rise), "out of range 1-%d", MaxRiseFall)
	}
	if h.Fall < 1 || h.Fall > MaxRiseFall {
		c.Add(at("fall"), fmt.Sprint(h.Fall), "out of range 1-%d", MaxRiseFall)
	}
}

func checkCheckPath(c *fielderr.Collector, path string, h *HealthCheck) {
	at := func(f string) string { return fielderr.Join(path, f) }
	if strings.Contains(h.Path, "://") {
		// A URL pasted into path: say what is wrong with it.
		u, err := url.Parse(h.Path)
		if err != nil || u.Host == "" {
			c.Add(at("path"), h.Path, "a URL without a host; use url: http://HOST/PATH, or path: /PATH")
		} else {
			c.Add(at("path"), h.Path, "a URL, not a path; use url: %s, or path: %s", h.Path, u.RequestURI())
		}
		return
	}
	if !strings.HasPrefix(h.Path, "/") {
		c.Add(at("path"), h.Path, "must start with /")
	} else if u, err := url.ParseRequestURI(h.Path); err != nil || u.Host != "" || strings.ContainsAny(h.Path, " \t\r\n") {
		c.Add(at("path"), h.Path, "not a request path")
	}
	if err := ValidateHealthHost(h.Host); err != nil {
		c.AddErr(at("host"), h.Host, err)
	}
}

// svcRef is a service's port, for cross-service messages.
type svcRef struct{ svc, port int }

type vipKey struct {
	addr  netip.Addr
	port  uint16
	proto proxy.Protocol
}

// CheckServices checks a list of services against each other (a config
// file's): names unique, one VIP:port/protocol per service, a shared VIP
// only with one non-empty sharingKey, one service per node port and
// protocol, no backend that is another service's VIP. single(i) tells
// whether service i wrote its VIP as vip:.
func CheckServices(c *fielderr.Collector, path string, svcs []ServiceSpec, single func(i int) bool) {
	names := map[string]int{}
	vipPorts := map[vipKey]svcRef{}
	vipOwner := map[netip.Addr]int{}
	nodePorts := map[vipKey]svcRef{} // addr unused
	marks := map[uint32]int{}
	for i := range svcs {
		s := &svcs[i]
		sp := fielderr.Index(path, i)
		if s.FWMark != 0 {
			if j, dup := marks[s.FWMark]; dup {
				c.Add(sp+".fwmark", fmt.Sprint(s.FWMark), "also service %q's (%s)", svcs[j].Name, fielderr.Index(path, j))
			} else {
				marks[s.FWMark] = i
			}
		}
		if j, dup := names[s.Name]; dup && s.Name != "" {
			c.Add(sp+".name", s.Name, "duplicate service name (also %s)", fielderr.Index(path, j))
		} else {
			names[s.Name] = i
		}
		for n, v := range s.VIPs {
			if j, ok := vipOwner[v]; ok && j != i {
				o := &svcs[j]
				if s.SharingKey == "" || s.SharingKey != o.SharingKey {
					c.Add(vipField(sp, single(i) && len(s.VIPs) == 1, n), v.String(),
						"VIP is also service %q's (%s); services share a VIP only with the same non-empty sharingKey", o.Name, fielderr.Index(path, j))
				}
			} else {
				vipOwner[v] = i
			}
			for k, p := range s.Ports {
				if p.Port == 0 {
					continue
				}
				key := vipKey{v, p.Port, p.Protocol}
				if ref, dup := vipPorts[key]; dup && ref.svc != i {
					// On the VIP, as the writer's allocator reports it to REST.
					c.Add(vipField(sp, single(i) && len(s.VIPs) == 1, n), v.String(),
						"VIP:port/protocol %s/%s already used by service %q (%s.ports[%d])",
						netip.AddrPortFrom(v, p.Port), p.Protocol, svcs[ref.svc].Name, fielderr.Index(path, ref.svc), ref.port)
				} else if !dup {
					vipPorts[key] = svcRef{i, k}
				}
			}
		}
		for k, p := range s.Ports {
			if p.NodePort == 0 {
				continue
			}
			key := vipKey{port: p.NodePort, proto: p.Protocol}
			if ref, dup := nodePorts[key]; dup {
				c.Add(elem{sp, "ports", k}.field("nodePort"), fmt.Sprintf("%d/%s", p.NodePort, p.Protocol),
					"node port already used by service %q (%s.ports[%d])", svcs[ref.svc].Name, fielderr.Index(path, ref.svc), ref.port)
			} else {
				nodePorts[key] = svcRef{i, k}
			}
		}
	}
	// A backend may not be another service's VIP (ValidateOptions.VIPs,
	// the engine's rule; assigned VIPs are the engine's to check at load).
	for i := range svcs {
		for b, be := range svcs[i].Backends {
			if j, ok := vipOwner[be.Addr]; ok && j != i {
				c.Add(elem{fielderr.Index(path, i), "backends", b}.field("address"), be.Addr.String(),
					"the VIP of service %q: a backend may not be a VIP (the packet would come back here)", svcs[j].Name)
			}
		}
	}
}

// CheckDataplane asks the dataplane whether it can program s's scheduler,
// method and firewall mark, one probe each so the error names the field (the
// dataplane's own rule, not a copy of it). A field already refused is not
// asked about. CheckService calls it with ValidateOptions.Dataplane; preflight
// calls it when mode auto resolves to nftables at start.
func CheckDataplane(c *fielderr.Collector, path string, s *ServiceSpec, check func(proxy.Service) error) {
	if check == nil {
		return
	}
	at := func(f string) string { return fielderr.Join(path, f) }
	probe := func(sched proxy.Scheduler, m proxy.Method) proxy.Service {
		return proxy.Service{Name: s.Name, VIP: netip.MustParseAddr("192.0.2.1"), Port: 1, Protocol: proxy.TCP, Scheduler: sched, Method: m}
	}
	// The dataplane's error names its probe ("service 192.0.2.1:1/TCP"):
	// keep only the reason it wraps.
	reason := func(err error) error {
		if in := errors.Unwrap(err); in != nil {
			return in
		}
		return err
	}
	if !c.Failed(at("scheduler")) {
		if err := check(probe(s.Scheduler, proxy.NAT)); err != nil {
			c.AddErr(at("scheduler"), string(s.Scheduler), fmt.Errorf("refused by the dataplane: %w", reason(err)))
		}
	}
	if s.Method != "" && !c.Failed(at("method")) {
		if err := check(probe(proxy.DefaultScheduler, s.Method)); err != nil {
			c.AddErr(at("method"), string(s.Method), fmt.Errorf("refused by the dataplane: %w", reason(err)))
		}
	}
	if s.FWMark != 0 && !c.Failed(at("fwmark")) {
		mark := proxy.Service{Name: s.Name, FWMark: s.FWMark, Family: proxy.IPv4, Method: proxy.NATNoSNAT}
		if err := check(mark); err != nil {
			c.AddErr(at("fwmark"), fmt.Sprint(s.FWMark), fmt.Errorf("refused by the dataplane: %w", reason(err)))
		}
	}
}
