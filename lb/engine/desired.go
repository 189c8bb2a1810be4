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

// desired renders every service (lb.DesiredService.Render, the renderer
// the Kubernetes controller uses too): per port, one proxy.Service per VIP
// and one per family of its node port, so a service waiting for a VIP
// still serves its node ports.
func (e *Engine) desired() lb.Desired {
	d := lb.Desired{Dataplane: proxy.Config{NodeAddrs: slices.Clone(e.opts.NodeAddrs)}}
	if e.order == nil {
		e.order = store.Names(e.svcs)
	}
	// vips: every assigned address → whether some service on it still
	// wants it announced (a withdrawn all-down service does not).
	vips := make(map[netip.Addr]bool, len(e.order))
	// Most services render one dataplane service (one per port and
	// family): sized for that, growing from nothing copied 10,000 of them
	// again and again at start-up.
	if len(e.order) > 0 {
		d.Dataplane.Services = make([]proxy.Service, 0, len(e.order))
	}
	var hit map[string]string
	for _, n := range e.order {
		r := e.renderService(n)
		if r.ownConflict != "" {
			if hit == nil {
				hit = map[string]string{}
			}
			hit[n] = r.ownConflict
			continue
		}
		d.Dataplane.Services = append(d.Dataplane.Services, r.services...)
		d.Health = append(d.Health, r.health...)
		for _, ip := range r.ips {
			vips[ip] = vips[ip] || r.announced
		}
	}
	e.setOwnHit(hit)
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
			p := e.pools[pool].Pool
			lb.AnnounceAttrs(&v, &p)
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
	// ownConflict: left out of the desired state, a VIP or backend is one
	// of the gateway's own addresses (own.go).
	ownConflict string
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
	if r.ownConflict = e.ownConflict(s, r.ips); r.ownConflict != "" {
		r.services, r.health, r.ips = nil, nil, nil
		e.cacheRendered(n, r)
		return r
	}
	down := e.unhealthy[s.Name]
	if e.allDown(s) {
		switch e.opts.AllDown {
		case AllDownWithdraw:
			r.announced = false // and every weight 0
		default: // keep: back to the configured weights
			down = nil
		}
	}
	ds := desiredService(s, r.ips, down)
	r.services, _ = ds.Render(nil)
	e.cacheRendered(n, r)
	return r
}

func (e *Engine) cacheRendered(n string, r *rendered) {
	if e.rendered == nil {
		e.rendered = map[string]*rendered{}
	}
	e.rendered[n] = r
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
	ports := s.PortsServed()
	for k := range ports {
		p := &ports[k]
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

func compareAddr(a, b netip.Addr) int {
	if a.Is4() != b.Is4() {
		if a.Is4() {
			return -1
		}
		return 1
	}
	return a.Compare(b)
}

// desiredService is s as both modes' renderer takes it: every port with
// every backend (both families), its port resolved and its weight 0 while
// down (a weight of 0 keeps existing connections and takes no new ones).
func desiredService(s *lb.ServiceSpec, vips []netip.Addr, down map[netip.AddrPort]bool) lb.DesiredService {
	ports := s.PortsServed()
	ds := lb.DesiredService{Name: s.Name, VIPs: vips, Scheduler: s.Scheduler, Affinity: s.Affinity, Method: s.Method,
		FWMark: s.FWMark, Ports: make([]lb.DesiredPort, len(ports))}
	for k := range ports {
		p := &ports[k]
		name := s.Name + "/" + p.Name
		switch {
		case s.FWMark != 0:
			name = fmt.Sprintf("%s/fwmark-%d", s.Name, s.FWMark)
		case p.Name == "":
			name = fmt.Sprintf("%s/%d-%s", s.Name, p.Port, p.Protocol)
		}
		dp := lb.DesiredPort{Name: name, Port: p.Port, Protocol: p.Protocol, NodePort: p.NodePort,
			Backends: make([]proxy.Backend, 0, len(s.Backends))}
		for _, b := range s.Backends {
			w := b.Weight
			if backendDown(down, b, p) {
				w = 0
			}
			dp.Backends = append(dp.Backends, proxy.Backend{Addr: netip.AddrPortFrom(b.Addr, b.PortFor(*p)), Weight: w})
		}
		ds.Ports[k] = dp
	}
	return ds
}
