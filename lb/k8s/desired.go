package k8s

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

const zoneLabel = "topology.kubernetes.io/zone"

// buildDesired computes the dataplane state from the caches: every gateway
// does this for itself, leader or not, from Service status and endpoints.
func (c *Controller) buildDesired() lb.Desired {
	svcs, _ := c.services.List(labels.Everything())
	sort.Slice(svcs, func(i, j int) bool {
		if svcs[i].Namespace != svcs[j].Namespace {
			return svcs[i].Namespace < svcs[j].Namespace
		}
		return svcs[i].Name < svcs[j].Name
	})
	pools := c.currentPools().Served()
	me, _ := c.nodes.Get(c.opts.NodeName)
	var zone string
	nodeAddrs := c.opts.NodeAddrs
	if me != nil {
		zone = me.Labels[zoneLabel]
		if len(nodeAddrs) == 0 {
			nodeAddrs = nodeAddresses(me)
		}
	}
	var nodes []*corev1.Node
	if c.opts.BackendMode == BackendNodePort {
		all, _ := c.nodes.List(labels.Everything())
		for _, n := range all {
			if nodeReady(n) {
				nodes = append(nodes, n)
			}
		}
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	}
	in := desiredInput{opts: &c.opts, pools: pools, zone: zone, nodes: nodes, nodeAddrs: nodeAddrs}
	// Each Service's share is remembered by the resourceVersions it came
	// from, so a batch of events recomputes only what changed; inputs every
	// Service depends on (pools, zone, nodes) invalidate all of it.
	var gfp strings.Builder
	fmt.Fprint(&gfp, poolsFingerprint(pools), zone, nodeAddrs)
	for _, n := range nodes {
		gfp.WriteString(" " + n.Name + "@" + n.ResourceVersion)
	}
	if gfp.String() != c.memoFP || c.memo == nil {
		c.memoFP, c.memo = gfp.String(), map[string]memoEntry{}
	}
	// On the leader a Service it has reconciled is served from its decision,
	// not from its status (which follows, status.go); others from status.
	// After a term, also its decisions the cache has not caught up with
	// yet (stepDown).
	decided := c.decidedVIPs()
	next := make(map[string]memoEntry, len(svcs))
	for _, svc := range svcs {
		key := svc.Namespace + "/" + svc.Name
		objs, _ := c.sliceInf.GetIndexer().ByIndex(sliceIdx, key)
		var slices []*discoveryv1.EndpointSlice
		vips, dec := decided[key]
		if !dec {
			vips = ingressIPs(svc)
		}
		fp := fmt.Sprint(svc.ResourceVersion, vips)
		cacheable := svc.ResourceVersion != "" // objects without versions (fake clients) are never remembered
		for _, o := range objs {
			if s, ok := o.(*discoveryv1.EndpointSlice); ok {
				slices = append(slices, s)
				fp += " " + s.Name + "@" + s.ResourceVersion
				cacheable = cacheable && s.ResourceVersion != ""
			}
		}
		m, ok := c.memo[key]
		if !ok || m.fp != fp || !cacheable {
			part := desiredInput{opts: &c.opts, pools: pools, zone: zone, nodes: nodes, nodeAddrs: nodeAddrs}
			part.addVIPs(svc, slices, vips)
			m = memoEntry{fp: fp, services: part.cfg.Services}
			for _, v := range part.vips {
				m.vips = append(m.vips, *v)
			}
		}
		next[key] = m
		in.cfg.Services = append(in.cfg.Services, m.services...)
		for _, v := range m.vips {
			in.mergeVIP(v)
		}
	}
	c.memo = next
	return in.result()
}

// memoEntry is one Service's share of the desired state and what it was
// computed from.
type memoEntry struct {
	fp       string
	services []proxy.Service
	vips     []announce.VIP
}

// desiredInput accumulates the desired state; it is pure (no client-go
// calls) so unit tests drive it directly.
type desiredInput struct {
	opts      *Options
	pools     []lb.Pool
	zone      string
	nodes     []*corev1.Node
	nodeAddrs []netip.Addr

	cfg  proxy.Config
	vips map[netip.Addr]*announce.VIP
}

// addVIPs adds svc served on addrs (its status, or the leader's decision).
func (d *desiredInput) addVIPs(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, addrs []netip.Addr) {
	ourLB := d.opts.ours(svc)
	nodePort := svc.Spec.Type == corev1.ServiceTypeNodePort || (ourLB && d.opts.NodePortsOnLoadBalancers)
	if !ourLB && !nodePort {
		return
	}
	var vips []netip.Addr
	if ourLB {
		// Only addresses of our pools: a status written by someone else
		// must not make us announce an arbitrary address.
		for _, ip := range addrs {
			if poolOf(d.pools, ip) != "" {
				vips = append(vips, ip)
			}
		}
	}
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	var affinity time.Duration
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		affinity = 3 * time.Hour
		if cfg := svc.Spec.SessionAffinityConfig; cfg != nil && cfg.ClientIP != nil && cfg.ClientIP.TimeoutSeconds != nil {
			affinity = time.Duration(*cfg.ClientIP.TimeoutSeconds) * time.Second
		}
	}
	// The renderer the standalone engine uses too (lb.DesiredService): per
	// port one service per VIP and one per family of the node port.
	ds := lb.DesiredService{Name: svc.Namespace + "/" + svc.Name, VIPs: vips, Scheduler: d.opts.Scheduler,
		Affinity: affinity, Method: d.opts.methodFor(svc), ActiveOnly: local && d.opts.BackendMode == BackendEndpoints}
	for _, sp := range svc.Spec.Ports {
		proto, err := proxy.ParseProtocol(string(sp.Protocol))
		if err != nil {
			continue // SCTP: not something our dataplanes forward
		}
		p := lb.DesiredPort{Name: ds.Name, Port: uint16(sp.Port), Protocol: proto, Backends: d.backends(svc, sp, slices, local)}
		if sp.Name != "" {
			p.Name += "/" + sp.Name
		}
		if nodePort && sp.NodePort != 0 && len(d.nodeAddrs) > 0 {
			p.NodePort = uint16(sp.NodePort)
		}
		ds.Ports = append(ds.Ports, p)
	}
	var served []netip.Addr
	d.cfg.Services, served = ds.Render(d.cfg.Services)
	for _, vip := range served {
		v := announce.VIP{Addr: vip, Pool: poolOf(d.pools, vip), Local: local && d.opts.BackendMode == BackendEndpoints}
		for i := range d.pools {
			if d.pools[i].Name == v.Pool {
				lb.AnnounceAttrs(&v, &d.pools[i])
			}
		}
		d.mergeVIP(v)
	}
}

// mergeVIP adds a VIP to announce; a VIP several Services share is
// restricted (Local) only if every sharer is.
func (d *desiredInput) mergeVIP(v announce.VIP) {
	if d.vips == nil {
		d.vips = map[netip.Addr]*announce.VIP{}
	}
	if cur, ok := d.vips[v.Addr]; ok {
		cur.Local = cur.Local && v.Local
		return
	}
	d.vips[v.Addr] = &v
}

func (d *desiredInput) result() lb.Desired {
	out := lb.Desired{Dataplane: d.cfg}
	out.Dataplane.NodeAddrs = append([]netip.Addr(nil), d.nodeAddrs...)
	for _, v := range d.vips {
		out.VIPs = append(out.VIPs, *v)
	}
	sort.Slice(out.VIPs, func(i, j int) bool { return out.VIPs[i].Addr.Less(out.VIPs[j].Addr) })
	return out
}

// backends lists where one Service port's traffic goes, both families.
func (d *desiredInput) backends(svc *corev1.Service, sp corev1.ServicePort, slices []*discoveryv1.EndpointSlice, local bool) []proxy.Backend {
	if d.opts.BackendMode == BackendNodePort {
		return d.nodeBackends(sp, slices, local)
	}
	type ep struct {
		b     proxy.Backend
		zones []string
	}
	var eps []ep
	seen := map[netip.AddrPort]bool{}
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port, ok := slicePort(s, sp)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			serving := ready
			if e.Conditions.Serving != nil {
				serving = *e.Conditions.Serving
			}
			terminating := e.Conditions.Terminating != nil && *e.Conditions.Terminating
			draining := !ready && serving && terminating
			if !ready && !draining {
				continue
			}
			if local && (e.NodeName == nil || *e.NodeName != d.opts.NodeName) {
				continue
			}
			if len(e.Addresses) == 0 {
				continue
			}
			a, err := netip.ParseAddr(e.Addresses[0])
			if err != nil {
				continue
			}
			ap := netip.AddrPortFrom(a.Unmap(), port)
			if seen[ap] {
				continue
			}
			seen[ap] = true
			b := proxy.Backend{Addr: ap, Weight: 1}
			if draining {
				b = proxy.Backend{Addr: ap, Weight: 0, Draining: true}
			}
			var zones []string
			if e.Hints != nil {
				for _, z := range e.Hints.ForZones {
					zones = append(zones, z.Name)
				}
			}
			eps = append(eps, ep{b, zones})
		}
	}
	// Topology hints, the way kube-proxy uses them: only when every ready
	// endpoint carries hints and some are for our zone.
	useHints := !local && d.zone != ""
	mine := 0
	for _, e := range eps {
		if e.b.Draining {
			continue
		}
		if len(e.zones) == 0 {
			useHints = false
		}
		for _, z := range e.zones {
			if z == d.zone {
				mine++
				break
			}
		}
	}
	out := make([]proxy.Backend, 0, len(eps))
	for _, e := range eps {
		if useHints && mine > 0 && !e.b.Draining && !contains(e.zones, d.zone) {
			continue
		}
		out = append(out, e.b)
	}
	sortBackends(out)
	return out
}

// nodeBackends: every ready node's address + nodePort; with
// externalTrafficPolicy Local only nodes that host a ready endpoint.
func (d *desiredInput) nodeBackends(sp corev1.ServicePort, slices []*discoveryv1.EndpointSlice, local bool) []proxy.Backend {
	if sp.NodePort == 0 {
		return nil
	}
	hosts := map[string]bool{}
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if (e.Conditions.Ready == nil || *e.Conditions.Ready) && e.NodeName != nil {
				hosts[*e.NodeName] = true
			}
		}
	}
	var out []proxy.Backend
	for _, n := range d.nodes {
		if local && !hosts[n.Name] {
			continue
		}
		for _, a := range nodeAddresses(n) {
			out = append(out, proxy.Backend{Addr: netip.AddrPortFrom(a, uint16(sp.NodePort)), Weight: 1})
		}
	}
	sortBackends(out)
	return out
}

// slicePort finds the slice's port for a Service port (matched by name and protocol).
func slicePort(s *discoveryv1.EndpointSlice, sp corev1.ServicePort) (uint16, bool) {
	for _, p := range s.Ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		spProto := sp.Protocol
		if spProto == "" {
			spProto = corev1.ProtocolTCP
		}
		if name == sp.Name && proto == spProto && p.Port != nil && *p.Port > 0 && *p.Port < 65536 {
			return uint16(*p.Port), true
		}
	}
	return 0, false
}

// nodeAddresses: InternalIPs, else ExternalIPs, one per family at most.
func nodeAddresses(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type != t {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				continue
			}
			ip = ip.Unmap()
			dup := false
			for _, x := range out {
				dup = dup || x.Is4() == ip.Is4()
			}
			if !dup {
				out = append(out, ip)
			}
		}
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func sortBackends(bs []proxy.Backend) {
	sort.Slice(bs, func(i, j int) bool { return bs[i].Addr.Compare(bs[j].Addr) < 0 })
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
