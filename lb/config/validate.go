package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// Validate checks a Config's typed values and their relations (overlapping
// pools, VIPs outside pools, duplicate VIP:port/proto, node ports outside
// the range, DR with port mapping...). Parse and Load call it; call it again
// after changing a Config in code. Field paths use file indexes
// (services[2] is Services[2]). It returns *Errors or nil.
func (c *Config) Validate() error {
	var col collector
	c.validate(&col)
	return col.err("")
}

func (c *Config) validate(col *collector) {
	c.validatePools(col)
	c.validateServices(col)
	c.validateAnnounce(col)
	c.validateDataplane(col)
	c.validateAPI(col)
	c.validateKubernetes(col)
	c.validateStateSync(col)
	c.validateState(col)
	switch c.Health.AllDown {
	case AllDownKeep, AllDownWithdraw:
	default:
		col.add("health.allDown", string(c.Health.AllDown), "want keep or withdraw")
	}
	if c.Health.MaxInFlight < 1 {
		col.add("health.maxInFlight", fmt.Sprint(c.Health.MaxInFlight), "must be at least 1")
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		col.add("log.format", c.Log.Format, "want text or json")
	}
}

type rangeRef struct {
	r         lb.Range
	pool, idx int
}

func (c *Config) validatePools(col *collector) {
	names := map[string]int{}
	var all []rangeRef
	for i := range c.Pools {
		p := &c.Pools[i]
		path := index("pools", i)
		if err := lb.ValidateName(p.Name); err != nil {
			col.addErr(path+".name", p.Name, err)
		} else if j, dup := names[p.Name]; dup {
			col.add(path+".name", p.Name, "duplicate pool name (also pools[%d])", j)
		} else {
			names[p.Name] = i
		}
		if len(p.Ranges) == 0 && !col.failed(path+".addresses") {
			col.add(path+".addresses", "", "a pool needs at least one address range")
		}
		for j, r := range p.Ranges {
			if !r.First.IsValid() || !r.Last.IsValid() || r.First.Is4() != r.Last.Is4() || r.Last.Less(r.First) {
				col.add(index(path+".addresses", j), r.String(), "not a valid range")
				continue
			}
			if err := lb.CheckRange(r); err != nil {
				col.addErr(index(path+".addresses", j), r.String(), err)
				continue
			}
			all = append(all, rangeRef{r: r, pool: i, idx: j})
		}
		validateAdvertisement(col, path+".advertisement", p)
		validateAllocation(col, path, p)
	}
	// Overlaps, within and across pools: sort and sweep (n log n, so a
	// machine-written config with thousands of ranges stays fast). Each
	// range that overlaps an earlier one is reported against it.
	sort.SliceStable(all, func(a, b int) bool {
		if all[a].r.Is4() != all[b].r.Is4() {
			return all[a].r.Is4()
		}
		if c := all[a].r.First.Compare(all[b].r.First); c != 0 {
			return c < 0
		}
		if all[a].pool != all[b].pool {
			return all[a].pool < all[b].pool
		}
		return all[a].idx < all[b].idx
	})
	var reach *rangeRef // the range reaching furthest so far, same family
	for k := range all {
		cur := &all[k]
		if reach != nil && reach.r.Is4() == cur.r.Is4() && reach.r.Overlaps(cur.r) {
			// Report on whichever comes later in the file.
			first, second := reach, cur
			if second.pool < first.pool || second.pool == first.pool && second.idx < first.idx {
				first, second = second, first
			}
			where := fmt.Sprintf("pool %q (pools[%d].addresses[%d])", c.Pools[first.pool].Name, first.pool, first.idx)
			if first.pool == second.pool {
				where = fmt.Sprintf("addresses[%d] of the same pool", first.idx)
			}
			col.add(index(index("pools", second.pool)+".addresses", second.idx), second.r.String(),
				"overlaps %q of %s", first.r.String(), where)
		}
		if reach == nil || reach.r.Is4() != cur.r.Is4() || reach.r.Last.Less(cur.r.Last) {
			reach = cur
		}
	}
}

var wellKnownCommunities = map[string]bool{
	"no-export": true, "no-advertise": true, "no-export-subconfed": true, "no-peer": true,
	"blackhole": true, "graceful-shutdown": true, "accept-own": true, "llgr-stale": true, "no-llgr": true,
}

func validateAdvertisement(col *collector, path string, p *lb.Pool) {
	a := &p.Advertisement
	for i, s := range a.Communities {
		if !wellKnownCommunities[s] && !numbers(s, 2, 16) {
			col.add(index(path+".communities", i), s, "want ASN:VALUE (two 16-bit numbers, like 65000:100) or a well-known name (no-export, no-advertise, blackhole...)")
		}
	}
	for i, s := range a.LargeCommunities {
		if !numbers(s, 3, 32) {
			col.add(index(path+".largeCommunities", i), s, "want GLOBAL:LOCAL1:LOCAL2 (three 32-bit numbers, like 65000:1:2)")
		}
	}
	// The same rule as REST and IPPool objects: lb.ValidateAggregation.
	if err := lb.ValidateAggregation(a.AggregationLen, p.Ranges); err != nil {
		col.addErr(path+".aggregationLength", fmt.Sprint(a.AggregationLen), err)
	}
}

// numbers reports whether s is n colon-separated unsigned numbers of bits bits.
func numbers(s string, n, bits int) bool {
	parts := strings.Split(s, ":")
	if len(parts) != n {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, bits); err != nil {
			return false
		}
	}
	return true
}

type vipKey struct {
	addr  netip.Addr
	port  uint16
	proto proxy.Protocol
}

type svcRef struct {
	svc, port int
}

func (c *Config) validateServices(col *collector) {
	if c.Kubernetes.Enabled {
		if len(c.Services) > 0 {
			col.add("services", "", "not allowed with kubernetes.enabled: services come from the API server")
		}
		if len(c.Pools) > 0 {
			col.add("pools", "", "not allowed with kubernetes.enabled: pools are IPPool objects (edgelb.io/v1alpha1; kubectl apply them)")
		}
	}
	names := map[string]int{}
	vipPorts := map[vipKey]svcRef{}
	vipOwner := map[netip.Addr]int{}
	nodePorts := map[vipKey]svcRef{} // addr unused
	for i := range c.Services {
		s := &c.Services[i]
		path := index("services", i)
		if err := lb.ValidateName(s.Name); err != nil {
			col.addErr(path+".name", s.Name, err)
		} else if j, dup := names[s.Name]; dup {
			col.add(path+".name", s.Name, "duplicate service name (also services[%d])", j)
		} else {
			names[s.Name] = i
		}
		families := c.validateServiceAddrs(col, path, s)
		c.validatePorts(col, path, s)
		validateBackends(col, path, s, families)
		if _, err := proxy.ParseScheduler(string(s.Scheduler)); err != nil || s.Scheduler == "" {
			col.add(path+".scheduler", string(s.Scheduler), "want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh")
		}
		c.validateMethod(col, path, s)
		if s.Affinity < 0 || s.Affinity > MaxAffinityTimeout || s.Affinity > 0 && s.Affinity.Seconds() < 1 {
			col.add(path+".affinity.timeout", s.Affinity.String(), "out of range 1s-%s", MaxAffinityTimeout)
		}
		if s.Health != nil {
			validateHealth(col, path+".healthCheck", s.Health)
		}

		// Cross-service: one VIP:port/proto per service, a shared VIP only
		// with one sharing key, one service per node port and protocol.
		for n, v := range s.VIPs {
			if j, ok := vipOwner[v]; ok && j != i {
				o := &c.Services[j]
				if s.SharingKey == "" || s.SharingKey != o.SharingKey {
					col.add(vipField(path, s, n), v.String(), "VIP is also service %q's (services[%d]); services share a VIP only with the same non-empty sharingKey", o.Name, j)
				}
			} else {
				vipOwner[v] = i
			}
			for k, p := range s.Ports {
				if p.Port == 0 {
					continue
				}
				key := vipKey{v, p.Port, p.Protocol}
				if ref, dup := vipPorts[key]; dup {
					col.add(index(path+".ports", k)+".port", fmt.Sprintf("%s/%s", netip.AddrPortFrom(v, p.Port), p.Protocol),
						"VIP:port/protocol already used by service %q (services[%d].ports[%d])", c.Services[ref.svc].Name, ref.svc, ref.port)
				} else {
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
				col.add(index(path+".ports", k)+".nodePort", fmt.Sprintf("%d/%s", p.NodePort, p.Protocol),
					"node port already used by service %q (services[%d].ports[%d])", c.Services[ref.svc].Name, ref.svc, ref.port)
			} else {
				nodePorts[key] = svcRef{i, k}
			}
		}
	}
	// A backend may not be a VIP of the file (lb.ValidateOptions.VIPs, the
	// engine's rule; assigned VIPs are the engine's to check at load).
	for i := range c.Services {
		for b, be := range c.Services[i].Backends {
			if j, ok := vipOwner[be.Addr]; ok {
				col.add(index(index("services", i)+".backends", b)+".address", be.Addr.String(),
					"the VIP of service %q: a backend may not be a VIP (the packet would come back here)", c.Services[j].Name)
			}
		}
	}
}

// validateServiceAddrs checks VIPs against pools and returns the families
// the service serves.
func (c *Config) validateServiceAddrs(col *collector, path string, s *lb.ServiceSpec) map[lb.Family]bool {
	fams := map[lb.Family]bool{}
	var pool *lb.Pool
	if s.Pool != "" {
		if pool = c.PoolByName(s.Pool); pool == nil && !c.Kubernetes.Enabled {
			col.add(path+".pool", s.Pool, "no pool of that name")
		}
	}
	if len(s.VIPs) > 0 && len(s.Families) > 0 {
		col.add(path+".families", "", "set vips or families, not both (families choose what to allocate when there is no VIP)")
	}
	for k, v := range s.VIPs {
		f := vipField(path, s, k)
		fam := familyOf(v)
		if err := lb.CheckAddr(v, lb.UseVIP); err != nil {
			col.addErr(f, v.String(), err)
			continue
		}
		if fams[fam] {
			col.add(f, v.String(), "two %s VIPs: a service has at most one VIP per family", fam)
			continue
		}
		fams[fam] = true
		switch {
		case pool != nil && !pool.Contains(v):
			col.add(f, v.String(), "outside pool %q (%s)", pool.Name, strings.Join(pool.RangeStrings(), ", "))
		case pool != nil && !pool.Usable(v):
			col.add(f, v.String(), "pool %q has avoidBuggyIPs: .0 and .255 addresses are not handed out", pool.Name)
		case pool == nil && s.Pool == "":
			var in *lb.Pool
			for j := range c.Pools {
				if c.Pools[j].Contains(v) {
					in = &c.Pools[j]
					break
				}
			}
			if in == nil {
				col.add(f, v.String(), "outside every pool")
			} else if !in.Usable(v) {
				col.add(f, v.String(), "pool %q has avoidBuggyIPs: .0 and .255 addresses are not handed out", in.Name)
			}
		}
	}
	if len(s.VIPs) > 0 {
		return fams
	}
	want := s.Families
	if len(want) == 0 {
		want = []lb.Family{lb.IPv4}
	}
	for k, fam := range want {
		if fams[fam] {
			col.add(index(path+".families", k), fam.String(), "listed twice")
			continue
		}
		fams[fam] = true
		if c.Kubernetes.Enabled || col.failed(path+".pool") {
			continue
		}
		if pool != nil {
			if !hasFamily(pool, fam) {
				col.add(path+".pool", s.Pool, "pool has no %s addresses to allocate from", fam)
			}
			continue
		}
		auto := false
		for j := range c.Pools {
			if c.Pools[j].AutoAssign && hasFamily(&c.Pools[j], fam) {
				auto = true
			}
		}
		if !auto {
			col.add(path, s.Name, "no vip, no pool, and no autoAssign pool has %s addresses to allocate from", fam)
		}
	}
	return fams
}

// vipField names a VIP: "vip" for the usual single one, else vips[k].
func vipField(path string, s *lb.ServiceSpec, k int) string {
	if len(s.VIPs) == 1 {
		return path + ".vip"
	}
	return index(path+".vips", k)
}

func familyOf(a netip.Addr) lb.Family {
	if a.Is4() {
		return lb.IPv4
	}
	return lb.IPv6
}

func hasFamily(p *lb.Pool, f lb.Family) bool {
	for _, r := range p.Ranges {
		if r.Is4() == (f == lb.IPv4) {
			return true
		}
	}
	return false
}

func (c *Config) validatePorts(col *collector, path string, s *lb.ServiceSpec) {
	if len(s.Ports) == 0 && !col.failed(path+".ports") {
		col.add(path+".ports", "", "a service needs at least one port")
	}
	seen := map[vipKey]int{}
	names := map[string]int{}
	nr := c.Dataplane.NodePortRange
	for k, p := range s.Ports {
		f := index(path+".ports", k)
		if p.Protocol != proxy.TCP && p.Protocol != proxy.UDP {
			col.add(f+".protocol", p.Protocol.String(), "want TCP or UDP")
		}
		if p.Port == 0 {
			col.add(f+".port", "", "required (1-65535)")
		} else if j, dup := seen[vipKey{port: p.Port, proto: p.Protocol}]; dup {
			col.add(f+".port", fmt.Sprintf("%d/%s", p.Port, p.Protocol), "listed twice (also ports[%d])", j)
		} else {
			seen[vipKey{port: p.Port, proto: p.Protocol}] = k
		}
		if p.Name != "" {
			if err := lb.ValidateName(p.Name); err != nil || len(p.Name) > 63 {
				col.add(f+".name", p.Name, "want lower-case letters, digits and '-', at most 63 characters")
			} else if j, dup := names[p.Name]; dup {
				col.add(f+".name", p.Name, "duplicate port name (also ports[%d])", j)
			} else {
				names[p.Name] = k
			}
		}
		if p.NodePort != 0 && !nr.Contains(p.NodePort) {
			col.add(f+".nodePort", quotePort(p.NodePort), "outside dataplane.nodePortRange %q", nr.String())
		}
	}
}

func validateBackends(col *collector, path string, s *lb.ServiceSpec, fams map[lb.Family]bool) {
	seen := make(map[netip.AddrPort]int, len(s.Backends))
	// The field's path is built only when it is needed (an error, or
	// errors already recorded): 100,000 backends would build 200,000
	// strings for nothing.
	field := func(b int, leaf string) string { return index(path+".backends", b) + "." + leaf }
	for b, be := range s.Backends {
		a := be.Addr
		if col.anyFailed() && col.failed(field(b, "address")) {
			continue
		}
		if err := lb.CheckAddr(a, lb.UseBackend); err != nil {
			col.addErr(field(b, "address"), a.String(), err)
			continue
		}
		if len(fams) > 0 && !fams[familyOf(a)] {
			col.add(field(b, "address"), a.String(), "an %s backend, but the service has no %s VIP (add one with vips/families)", familyOf(a), familyOf(a))
		}
		if be.Weight > MaxWeight {
			col.add(field(b, "weight"), fmt.Sprint(be.Weight), "out of range 0-%d", MaxWeight)
		}
		key := netip.AddrPortFrom(a, be.Port)
		if j, dup := seen[key]; dup {
			col.add(field(b, "address"), backendString(be), "listed twice (also backends[%d])", j)
		} else {
			seen[key] = b
		}
	}
}

func backendString(b lb.BackendSpec) string {
	if b.Port == 0 {
		return b.Addr.String()
	}
	return netip.AddrPortFrom(b.Addr, b.Port).String()
}

// validateMethod refuses what the chosen dataplane cannot do, never
// downgrading it: DR and tunnel are IPVS-only and cannot map ports (the
// packet reaches the backend with the VIP's port unchanged).
func (c *Config) validateMethod(col *collector, path string, s *lb.ServiceSpec) {
	switch s.Method {
	case proxy.NAT, proxy.NATNoSNAT:
		return
	case proxy.DirectRouting, proxy.Tunnel:
	default:
		col.add(path+".method", string(s.Method), "want nat, nat-nosnat, dr or tunnel")
		return
	}
	if c.Dataplane.Mode == ModeNFTables {
		col.add(path+".method", string(s.Method), "needs the IPVS dataplane, but dataplane.mode is nftables (use nat or nat-nosnat, or mode ipvs/auto)")
	}
	for k, p := range s.Ports {
		f := index(path+".ports", k)
		if p.TargetPort != 0 && p.TargetPort != p.Port {
			col.add(f+".targetPort", quotePort(p.TargetPort), "method %s cannot map ports: targetPort must equal port %d", s.Method, p.Port)
		}
		if p.NodePort != 0 {
			col.add(f+".nodePort", quotePort(p.NodePort), "method %s cannot serve node ports (the backend would need the node's address and port)", s.Method)
		}
	}
	for b, be := range s.Backends {
		if be.Port == 0 {
			continue
		}
		for _, p := range s.Ports {
			if be.Port != p.Port {
				col.add(index(path+".backends", b)+".address", backendString(be), "method %s cannot map ports: the backend port must equal the service port %d (leave it out)", s.Method, p.Port)
				break
			}
		}
	}
}

func validateHealth(col *collector, path string, h *lb.HealthCheck) {
	switch h.Type {
	case "tcp":
		if h.Path != "" || h.Host != "" || h.Expect != 0 {
			col.add(path+".type", h.Type, "path, host and expectStatus only apply to http and https checks")
		}
	case "http", "https":
		validateCheckPath(col, path, h)
		if h.Expect < 100 || h.Expect > 599 {
			col.add(path+".expectStatus", fmt.Sprint(h.Expect), "out of range 100-599")
		}
	default:
		col.add(path+".type", h.Type, "want tcp, http or https")
	}
	if h.Interval <= 0 {
		col.add(path+".interval", h.Interval.String(), "must be more than 0")
	}
	if h.Timeout <= 0 {
		col.add(path+".timeout", h.Timeout.String(), "must be more than 0")
	} else if h.Interval > 0 && h.Timeout > h.Interval {
		col.add(path+".timeout", h.Timeout.String(), "longer than interval %s (a check must finish before the next starts)", h.Interval)
	}
	if h.Rise < 1 {
		col.add(path+".rise", fmt.Sprint(h.Rise), "must be at least 1")
	}
	if h.Fall < 1 {
		col.add(path+".fall", fmt.Sprint(h.Fall), "must be at least 1")
	}
}

func validateCheckPath(col *collector, path string, h *lb.HealthCheck) {
	if strings.Contains(h.Path, "://") {
		// A URL pasted into path: say what is wrong with it.
		u, err := url.Parse(h.Path)
		if err != nil || u.Host == "" {
			col.add(path+".path", h.Path, "a URL without a host; use url: http://HOST/PATH, or path: /PATH")
		} else {
			col.add(path+".path", h.Path, "a URL, not a path; use url: %s, or path: %s", h.Path, u.RequestURI())
		}
		return
	}
	if !strings.HasPrefix(h.Path, "/") {
		col.add(path+".path", h.Path, "must start with /")
	} else if u, err := url.ParseRequestURI(h.Path); err != nil || u.Host != "" || strings.ContainsAny(h.Path, " \t\r\n") {
		col.add(path+".path", h.Path, "not a request path")
	}
	if err := lb.ValidateHealthHost(h.Host); err != nil {
		col.addErr(path+".host", h.Host, err)
	}
}
