package lb

import (
	"net/netip"
	"slices"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/proxy"
)

// Desired is what a gateway's dataplane and announcers should converge to,
// in either mode: the standalone engine and the Kubernetes controller both
// publish it and the daemon's effects loop applies it. Subscribers must
// treat it as read-only (it is shared).
type Desired struct {
	Dataplane proxy.Config
	VIPs      []announce.VIP
	// Health lists the backends with active checks (standalone services
	// with a healthCheck; the node checks in Kubernetes node-port mode).
	Health []HealthTarget
}

// DesiredService is one service as a mode's writer wants it served on this
// gateway, before rendering: the standalone engine builds it from a
// ServiceSpec and its assigned VIPs, the Kubernetes controller from a
// Service and its EndpointSlices. Render turns it into proxy.Services, one
// renderer for both modes (two renderers once disagreed on families: issue
// 14's dual-stack node port mixing IPv4 and IPv6 backends).
type DesiredService struct {
	// Name is the owner for display: "web" (standalone) or "ns/name".
	Name      string
	VIPs      []netip.Addr // at most one per family is usual, not required
	Ports     []DesiredPort
	Scheduler proxy.Scheduler
	Affinity  time.Duration
	Method    proxy.Method
	// FWMark, non-zero, makes this a firewall-mark service: no VIPs, one
	// port (Port 0, no protocol) holding the backends, rendered as one
	// proxy.Service per family that has a backend (IPv4 when none has one),
	// as a node port is.
	FWMark uint32
	// ActiveOnly renders a frontend only where its family has a backend
	// taking new connections (Kubernetes externalTrafficPolicy Local in
	// endpoints mode: with no local endpoint this gateway neither programs
	// the frontend nor announces the VIP, so traffic goes to one that has).
	ActiveOnly bool
}

// DesiredPort is one port of a DesiredService.
type DesiredPort struct {
	// Name names the port's proxy.Services ("web/http", "ns/name/http");
	// its node-port services add "/nodeport".
	Name     string
	Port     uint16
	Protocol proxy.Protocol
	NodePort uint16 // 0: none
	// Backends of both families, weights final (down and drained at 0).
	Backends []proxy.Backend
}

// NodePortSuffix ends the name of a node-port service (DesiredPort.Name +
// NodePortSuffix), so a refusal or a health target names its port.
const NodePortSuffix = "/nodeport"

// Render appends ds's services to out: for every port, one per VIP, with
// that VIP's family's backends (NAT does not cross families); and with a
// node port, one VIP-less service per family that has a backend (IPv4 when
// none has one and ActiveOnly is off), each with its own family's backends
// and proxy.Service.Family set, so the two families' node-port services
// have distinct keys. served lists the VIPs that got at least one service,
// in ds.VIPs order: what to announce.
func (ds *DesiredService) Render(out []proxy.Service) (_ []proxy.Service, served []netip.Addr) {
	var got []bool
	if len(ds.VIPs) > 0 {
		got = make([]bool, len(ds.VIPs))
	}
	for k := range ds.Ports {
		p := &ds.Ports[k]
		base := proxy.Service{Name: p.Name, Port: p.Port, Protocol: p.Protocol,
			Scheduler: ds.Scheduler, Affinity: ds.Affinity, Method: ds.Method}
		if ds.FWMark != 0 {
			out = renderMark(out, ds, base, p.Backends)
			continue
		}
		for i, vip := range ds.VIPs {
			bs, active := ofFamily(p.Backends, proxy.FamilyOf(vip))
			if ds.ActiveOnly && !active {
				continue
			}
			s := base
			s.VIP, s.Backends = vip, bs
			out = append(out, s)
			got[i] = true
		}
		if p.NodePort == 0 {
			continue
		}
		fams := make([]proxy.Family, 0, 2)
		for _, f := range []proxy.Family{proxy.IPv4, proxy.IPv6} {
			if hasFamily(p.Backends, f) {
				fams = append(fams, f)
			}
		}
		if len(fams) == 0 && !ds.ActiveOnly {
			fams = append(fams, proxy.IPv4) // listening, answering nothing yet
		}
		for _, f := range fams {
			bs, active := ofFamily(p.Backends, f)
			if ds.ActiveOnly && !active {
				continue
			}
			s := base
			s.Name, s.NodePort, s.Family, s.Backends = p.Name+NodePortSuffix, p.NodePort, f, bs
			out = append(out, s)
		}
	}
	for i, ok := range got {
		if ok {
			served = append(served, ds.VIPs[i])
		}
	}
	return out, served
}

// renderMark appends a firewall-mark service's proxy.Services: one per
// family that has a backend (IPVS's fwmark service has one family), IPv4
// when none has one and ActiveOnly is off.
func renderMark(out []proxy.Service, ds *DesiredService, base proxy.Service, backends []proxy.Backend) []proxy.Service {
	fams := make([]proxy.Family, 0, 2)
	for _, f := range []proxy.Family{proxy.IPv4, proxy.IPv6} {
		if hasFamily(backends, f) {
			fams = append(fams, f)
		}
	}
	if len(fams) == 0 && !ds.ActiveOnly {
		fams = append(fams, proxy.IPv4)
	}
	for _, f := range fams {
		bs, active := ofFamily(backends, f)
		if ds.ActiveOnly && !active {
			continue
		}
		s := base
		s.FWMark, s.Family, s.Backends = ds.FWMark, f, bs
		out = append(out, s)
	}
	return out
}

// ofFamily returns bs's backends of family f (bs itself when all are, so
// a single-stack service shares its slice), and whether one of them takes
// new connections.
func ofFamily(bs []proxy.Backend, f proxy.Family) (_ []proxy.Backend, active bool) {
	n := 0
	for i := range bs {
		if proxy.FamilyOf(bs[i].Addr.Addr()) == f {
			n++
			active = active || !bs[i].Draining
		}
	}
	if n == len(bs) || n == 0 {
		if n == 0 {
			return nil, false
		}
		return bs, active
	}
	out := make([]proxy.Backend, 0, n)
	for i := range bs {
		if proxy.FamilyOf(bs[i].Addr.Addr()) == f {
			out = append(out, bs[i])
		}
	}
	return out, active
}

func hasFamily(bs []proxy.Backend, f proxy.Family) bool {
	for i := range bs {
		if proxy.FamilyOf(bs[i].Addr.Addr()) == f {
			return true
		}
	}
	return false
}

// AnnounceAttrs fills in what v's pool p says about announcing it, for
// both modes' writers: the BGP attributes, the aggregation length of v's
// family, and the announcement selection (which announcers, peers and L2
// interfaces). The slices are copies: Desired is shared read-only.
func AnnounceAttrs(v *announce.VIP, p *Pool) {
	a := &p.Advertisement
	v.Pool = p.Name
	v.Communities = slices.Clone(a.Communities)
	v.LargeCommunities = slices.Clone(a.LargeCommunities)
	v.LocalPref = a.LocalPref
	v.AggregationLen = p.AggregationFor(v.Addr.Unmap().Is4())
	v.Announcers = slices.Clone(p.Announce.Announcers)
	v.Peers = slices.Clone(p.Announce.Peers)
	v.Interfaces = slices.Clone(p.Announce.Interfaces)
}
