package engine

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
)

// refresh recomputes the desired state and the gauges, then publishes.
func (e *Engine) refresh() {
	e.publish(e.desired())
	pending := 0
	for _, s := range e.svcs {
		if s.pending != "" {
			pending++
		}
	}
	e.met.pending.Set(float64(pending))
	e.met.services.Set(float64(len(e.svcs)))
	e.met.poolSize.Reset()
	e.met.poolUsed.Reset()
	for n := range e.pools {
		size, used := e.alloc.Usage(n)
		e.met.poolSize.WithLabelValues(n).Set(float64(size))
		e.met.poolUsed.WithLabelValues(n).Set(float64(used))
	}
}

// desired renders every service: one proxy.Service per VIP × port, each
// carrying the port's node port (dataplanes keep node ports per family, and
// a service has at most one VIP per family). While a service waits for a
// VIP its node ports still serve, on a VIP-less service whose backends are
// of one family (IPv4 when it has any): a VIP-less key has no family.
func (e *Engine) desired() Desired {
	d := Desired{Dataplane: proxy.Config{NodeAddrs: slices.Clone(e.opts.NodeAddrs)}}
	if e.order == nil {
		e.order = store.Names(e.svcs)
	}
	// vips: every assigned address → whether some service on it still
	// wants it announced (a withdrawn all-down service does not).
	vips := map[netip.Addr]bool{}
	for _, n := range e.order {
		r := e.renderService(n)
		d.Dataplane.Services = append(d.Dataplane.Services, r.services...)
		d.Health = append(d.Health, r.health...)
		for _, ip := range r.ips {
			vips[ip] = vips[ip] || r.announced
		}
	}
	// Sort the addresses, not the (larger) VIP structs.
	addrs := make([]netip.Addr, 0, len(vips))
	for ip, announced := range vips {
		if announced {
			addrs = append(addrs, ip)
		}
	}
	slices.SortFunc(addrs, compareAddr)
	d.VIPs = make([]announce.VIP, 0, len(addrs))
	for _, ip := range addrs {
		v := announce.VIP{Addr: ip}
		if pool, ok := e.alloc.PoolOf(ip); ok {
			a := e.pools[pool].Advertisement
			v.Pool = pool
			v.Communities = slices.Clone(a.Communities)
			v.LargeCommunities = slices.Clone(a.LargeCommunities)
			v.LocalPref = a.LocalPref
			v.AggregationLen = a.AggregationLen
		}
		d.VIPs = append(d.VIPs, v)
	}
	return d
}

// rendered is one service's share of the desired state, cached so a
// change re-renders only what it touched (invalidate).
type rendered struct {
	ips       []netip.Addr
	services  []proxy.Service
	health    []lb.HealthTarget
	announced bool
}

// invalidate drops service n's cached rendering; forgetOrder also drops
// the cached name order (a service was added or removed).
func (e *Engine) invalidate(n string, forgetOrder bool) {
	delete(e.rendered, n)
	if forgetOrder {
		e.order = nil
	}
}

// renderService renders service n (cached).
func (e *Engine) renderService(n string) *rendered {
	if r, ok := e.rendered[n]; ok {
		return r
	}
	s := &e.svcs[n].Spec
	r := &rendered{ips: e.alloc.IPs(n), announced: true, health: s.HealthTargets()}
	for k := range s.Ports {
		p := &s.Ports[k]
		if len(r.ips) == 0 {
			if p.NodePort != 0 {
				r.services = append(r.services, e.proxyService(s, p, netip.Addr{}))
			}
			continue
		}
		for _, ip := range r.ips {
			r.services = append(r.services, e.proxyService(s, p, ip))
		}
	}
	if e.allDown(s) {
		switch e.opts.AllDown {
		case AllDownWithdraw:
			r.announced = false
		default: // keep: back to the configured weights
			for i := range r.services {
				r.services[i] = e.proxyServiceWeights(s, r.services[i])
			}
		}
	}
	if e.rendered == nil {
		e.rendered = map[string]*rendered{}
	}
	e.rendered[n] = r
	return r
}

// allDown reports whether every backend of s in rotation is marked down by
// its health check (and there is one). A configured weight of 0 is a drain:
// not in rotation, so it neither counts as down nor keeps the service out
// of the all-down policy (the daemon's node-port filter decides alike).
func (e *Engine) allDown(s *lb.ServiceSpec) bool {
	down := e.unhealthy[s.Name]
	if len(down) == 0 {
		return false
	}
	hit := false
	for k := range s.Ports {
		p := &s.Ports[k]
		for _, b := range s.Backends {
			if b.Weight == 0 {
				continue
			}
			if !backendDown(down, b, p) {
				return false
			}
			hit = true
		}
	}
	return hit
}

func backendDown(down map[netip.AddrPort]bool, b lb.BackendSpec, p *lb.PortSpec) bool {
	return down[netip.AddrPortFrom(b.Addr, b.PortFor(*p))] || down[netip.AddrPortFrom(b.Addr, 0)]
}

// proxyServiceWeights restores the configured weights of ps's backends
// (the all-down keep policy) by rendering it as if nothing were down.
func (e *Engine) proxyServiceWeights(s *lb.ServiceSpec, ps proxy.Service) proxy.Service {
	for k := range s.Ports {
		p := &s.Ports[k]
		if p.Port == ps.Port && p.Protocol == ps.Protocol {
			return e.render(s, p, ps.VIP, nil)
		}
	}
	return ps
}

func compareAddr(a, b netip.Addr) int {
	if a.Is4() != b.Is4() {
		if a.Is4() {
			return -1
		}
		return 1
	}
	return a.Compare(b)
}

// proxyService renders one port of s on vip (invalid: node port only).
func (e *Engine) proxyService(s *lb.ServiceSpec, p *lb.PortSpec, vip netip.Addr) proxy.Service {
	return e.render(s, p, vip, e.unhealthy[s.Name])
}

// render is proxyService with the backends marked down given explicitly.
func (e *Engine) render(s *lb.ServiceSpec, p *lb.PortSpec, vip netip.Addr, down map[netip.AddrPort]bool) proxy.Service {
	name := s.Name + "/" + p.Name
	if p.Name == "" {
		name = fmt.Sprintf("%s/%d-%s", s.Name, p.Port, p.Protocol)
	}
	ps := proxy.Service{Name: name, VIP: vip, Port: p.Port, Protocol: p.Protocol, NodePort: p.NodePort,
		Scheduler: s.Scheduler, Affinity: s.Affinity, Method: s.Method}
	is4 := vip.Is4()
	if !vip.IsValid() {
		is4 = len(s.Backends) == 0 || slices.ContainsFunc(s.Backends, func(b lb.BackendSpec) bool { return b.Addr.Is4() })
	}
	for _, b := range s.Backends {
		if b.Addr.Is4() != is4 {
			continue // NAT does not cross families
		}
		port := b.PortFor(*p)
		// Weight 0 (configured: a drain; or down by its health check) keeps
		// existing connections and takes no new ones.
		w := b.Weight
		if backendDown(down, b, p) {
			w = 0
		}
		ps.Backends = append(ps.Backends, proxy.Backend{Addr: netip.AddrPortFrom(b.Addr, port), Weight: w})
	}
	return ps
}
