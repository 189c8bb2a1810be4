package ipvs

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

// wantService is one virtual service edgelb wants in the kernel.
type wantService struct {
	VS     virtualServer
	Name   string // the proxy.Service it came from, for errors
	Method proxy.Method
	// Dests are the backends that take new connections (draining ones are
	// absent: they are drained like removed ones), sorted by address.
	Dests []realServer
}

// desired is a proxy.Config translated into IPVS terms.
type desired struct {
	Services map[vsKey]*wantService
	VIPs     map[netip.Addr]bool // addresses bound on edgelb0
	// Keyed are the services owned by their key, not by an address on
	// edgelb0: node-port services (on node addresses) and firewall-mark
	// services (see engine's ownership rule).
	Keyed map[vsKey]bool
	Front map[vsKey]bool // every frontend and mark service: gets edgelb's ct mark
	Masq  map[vsKey]bool // NAT frontends whose forwarded packets are masqueraded
}

func defaultNetmask(a netip.Addr) uint32 {
	if a.Is4() {
		return 0xffffffff
	}
	return 128
}

func fwdOf(m proxy.Method) (uint32, error) {
	switch m {
	case "", proxy.NAT, proxy.NATNoSNAT:
		return fwdMasq, nil
	case proxy.DirectRouting:
		return fwdDR, nil
	case proxy.Tunnel:
		return fwdTunnel, nil
	}
	return 0, fmt.Errorf("unknown forwarding method %q", m)
}

func protoOf(p uint16) proxy.Protocol { return proxy.Protocol(p) }

// buildEach is build with refusals per service: failed names each service
// left out (every other one is in the desired state); err is Config-wide.
func buildEach(cfg proxy.Config) (*desired, map[proxy.Key]error, error) {
	d := &desired{Services: map[vsKey]*wantService{}, VIPs: map[netip.Addr]bool{},
		Keyed: map[vsKey]bool{}, Front: map[vsKey]bool{}, Masq: map[vsKey]bool{}}
	for _, na := range cfg.NodeAddrs {
		if !na.IsValid() || na.Unmap() != na {
			return nil, nil, fmt.Errorf("node address %q: want a plain IPv4 or IPv6 address", na)
		}
	}
	// Refusals are per service (as nftables'): a bad service is left out
	// and every other one is built.
	var failed map[proxy.Key]error
	for i := range cfg.Services {
		s := &cfg.Services[i]
		if err := d.add(cfg, s); err != nil {
			if failed == nil {
				failed = map[proxy.Key]error{}
			}
			if _, ok := failed[s.Key()]; !ok {
				failed[s.Key()] = err
			}
		}
	}
	return d, failed, nil
}

// serviceName is how errors and wantService.Name name a proxy.Service.
func serviceName(s *proxy.Service) string { return fmt.Sprintf("%q (%s)", s.Name, s.Key()) }

// add builds one service into d, all its frontends or none.
func (d *desired) add(cfg proxy.Config, s *proxy.Service) error {
	{
		// Errors name the service by its Name and its frontend key.
		name := serviceName(s)
		if s.FWMark != 0 {
			return d.addMark(s, name)
		}
		if s.Protocol != proxy.TCP && s.Protocol != proxy.UDP {
			return fmt.Errorf("service %s: protocol %d: want TCP (6) or UDP (17)", name, uint8(s.Protocol))
		}
		sched := s.Scheduler
		if sched == "" {
			sched = proxy.DefaultScheduler
		}
		if _, err := proxy.ParseScheduler(string(sched)); err != nil {
			return fmt.Errorf("service %s: %w", name, err)
		}
		method := s.Method
		if method == "" {
			method = proxy.NAT
		}
		fwd, err := fwdOf(method)
		if err != nil {
			return fmt.Errorf("service %s: %w", name, err)
		}
		if !s.VIP.IsValid() && s.NodePort == 0 {
			return fmt.Errorf("service %s: needs a VIP or a node port", name)
		}
		if s.VIP.IsValid() && (s.VIP.Unmap() != s.VIP || s.VIP.IsUnspecified()) {
			return fmt.Errorf("service %s: VIP %q: want a plain unicast address", name, s.VIP)
		}
		if s.VIP.IsValid() && s.Port == 0 {
			return fmt.Errorf("service %s: VIP %s needs a port", name, s.VIP)
		}
		// The frontends: the VIP, and the node port on every node address of
		// the service's family (IPVS NAT cannot cross address families).
		type front struct {
			key  vsKey
			node bool
		}
		var fronts []front
		v4 := s.AddrFamily() == proxy.IPv4 // a dual-stack node port is two services
		if s.VIP.IsValid() {
			fronts = append(fronts, front{vsKey{Addr: s.VIP, Port: s.Port, Proto: s.Protocol}, false})
		}
		if s.NodePort != 0 {
			for _, na := range cfg.NodeAddrs {
				if na.Is4() != v4 {
					continue
				}
				fronts = append(fronts, front{vsKey{Addr: na, Port: s.NodePort, Proto: s.Protocol}, true})
			}
		}
		dests, err := destsOf(s, name, v4, fwd, false)
		if err != nil {
			return err
		}
		flags, timeout := flagsOf(s, sched)
		for _, f := range fronts {
			if fwd != fwdMasq {
				// DR and tunnel hand the packet over unchanged: the backend
				// must listen on the port the client addressed.
				for _, b := range s.Backends {
					if b.Addr.Port() != f.key.Port {
						return fmt.Errorf("service %s: forwarding method %s cannot map port %d to backend %s (the backend must listen on port %d): %w",
							name, method, f.key.Port, b.Addr, f.key.Port, proxy.ErrUnsupported)
					}
				}
			}
			if prev, dup := d.Services[f.key]; dup {
				return fmt.Errorf("service %s: frontend %s is also used by service %s", name, f.key, prev.Name)
			}
		}
		for _, f := range fronts {
			vs := virtualServer{Key: f.key, Sched: string(sched), Flags: flags, Timeout: timeout, Netmask: defaultNetmask(f.key.Addr)}
			d.Services[f.key] = &wantService{VS: vs, Name: name, Method: method, Dests: dests}
			if f.node {
				d.Keyed[f.key] = true
			} else {
				d.VIPs[f.key.Addr] = true
			}
			d.Front[f.key] = true
			if method == proxy.NAT {
				d.Masq[f.key] = true
			}
		}
	}
	return nil
}

// destsOf checks s's backends and returns those taking new connections,
// sorted; anyPort allows port 0 (a firewall-mark service's: the packet's
// own destination port).
func destsOf(s *proxy.Service, name string, v4 bool, fwd uint32, anyPort bool) ([]realServer, error) {
	var dests []realServer
	seen := map[netip.AddrPort]bool{}
	for _, b := range s.Backends {
		a := netip.AddrPortFrom(b.Addr.Addr().Unmap(), b.Addr.Port())
		if !a.Addr().IsValid() || a.Port() == 0 && !anyPort {
			return nil, fmt.Errorf("service %s: backend %q: want address:port", name, b.Addr)
		}
		if seen[a] {
			return nil, fmt.Errorf("service %s: backend %s listed twice", name, a)
		}
		seen[a] = true
		if a.Addr().Is4() != v4 {
			return nil, fmt.Errorf("service %s: backend %s is not of the frontend's address family: %w", name, a, proxy.ErrUnsupported)
		}
		if b.Weight > 1<<31-1 {
			return nil, fmt.Errorf("service %s: backend %s: weight %d is above IPVS's maximum %d", name, a, b.Weight, 1<<31-1)
		}
		if b.Draining {
			continue
		}
		dests = append(dests, realServer{Addr: a, Weight: int(b.Weight), Fwd: fwd})
	}
	sort.Slice(dests, func(i, j int) bool { return dests[i].Addr.Compare(dests[j].Addr) < 0 })
	return dests, nil
}

// flagsOf is s's IPVS service flags and persistence timeout.
func flagsOf(s *proxy.Service, sched proxy.Scheduler) (flags, timeout uint32) {
	if sched == proxy.MaglevHash {
		// mh-fallback: IPVS's mh table keeps a backend at weight 0 in
		// its slots (it builds from the last non-zero weight), and
		// without the flag a new flow hashed there finds "no
		// destination" and is refused — for the whole drain of a
		// removed backend. With it the flow goes to another backend, as
		// on nftables (conformance MaglevHash: a flow of the removed
		// backend was refused before).
		flags |= flagSched1
	}
	if s.Affinity > 0 {
		flags |= flagPersistent
		timeout = uint32((s.Affinity + time.Second - 1) / time.Second)
	}
	return flags, timeout
}

// addMark builds a firewall-mark service: the packets the operator's own
// rules marked (edgelb writes no marking rule), one IPVS service per mark
// and family. It gets none of edgelb's nftables rules: setting the
// masquerade mark bit would change the mark IPVS matches on (lb refuses
// method nat for it), and a frontend set matches addresses and ports.
func (d *desired) addMark(s *proxy.Service, name string) error {
	if s.VIP.IsValid() || s.Port != 0 || s.Protocol != 0 || s.NodePort != 0 {
		return fmt.Errorf("service %s: fwmark %d: a firewall-mark service has no VIP, port, protocol or node port", name, s.FWMark)
	}
	sched := s.Scheduler
	if sched == "" {
		sched = proxy.DefaultScheduler
	}
	if _, err := proxy.ParseScheduler(string(sched)); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	method := s.Method
	if method == "" {
		method = proxy.NAT
	}
	if method == proxy.NAT {
		return fmt.Errorf("service %s: method nat masquerades by setting a packet mark bit, which would change the firewall mark IPVS matches; use nat-nosnat, dr or tunnel: %w",
			name, proxy.ErrUnsupported)
	}
	fwd, err := fwdOf(method)
	if err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	k := markKey(s.FWMark, s.AddrFamily())
	dests, err := destsOf(s, name, s.AddrFamily() == proxy.IPv4, fwd, true)
	if err != nil {
		return err
	}
	if prev, dup := d.Services[k]; dup {
		return fmt.Errorf("service %s: %s is also used by service %s", name, k, prev.Name)
	}
	flags, timeout := flagsOf(s, sched)
	vs := virtualServer{Key: k, Sched: string(sched), Flags: flags, Timeout: timeout, Netmask: defaultNetmask(k.Addr)}
	d.Services[k] = &wantService{VS: vs, Name: name, Method: method, Dests: dests}
	d.Keyed[k] = true
	d.Front[k] = true // its connections get edgelb's ct mark by their packet mark (snat.go)
	return nil
}

// keep copies the frontends of the service named name from last into d (a
// refused service keeps its last good state), unless d has them already.
func (d *desired) keep(last *desired, name string) {
	if last == nil {
		return
	}
	for k, ws := range last.Services {
		if ws.Name != name {
			continue
		}
		if _, taken := d.Services[k]; taken {
			continue
		}
		d.Services[k] = ws
		if last.Keyed[k] {
			d.Keyed[k] = true
		} else {
			d.VIPs[k.Addr] = true
		}
		if last.Front[k] {
			d.Front[k] = true
		}
		if last.Masq[k] {
			d.Masq[k] = true
		}
	}
}

// sameService reports whether the kernel's service matches the wanted one in
// everything edgelb sets.
func sameService(have, want virtualServer) bool {
	if have.Sched != want.Sched || have.Flags&flagsCompared != want.Flags&flagsCompared {
		return false
	}
	if want.Flags&flagPersistent != 0 && (have.Timeout != want.Timeout || have.Netmask != want.Netmask) {
		return false
	}
	return true
}

// sameWant reports whether two wanted services are equal (the service did
// not change between two Applies).
func sameWant(a, b *wantService) bool {
	if a == nil || b == nil || a.VS.Sched != b.VS.Sched || a.VS.Flags != b.VS.Flags || a.VS.Timeout != b.VS.Timeout ||
		a.Method != b.Method || len(a.Dests) != len(b.Dests) {
		return false
	}
	for i := range a.Dests {
		if a.Dests[i].Addr != b.Dests[i].Addr || a.Dests[i].Weight != b.Dests[i].Weight || a.Dests[i].Fwd != b.Dests[i].Fwd {
			return false
		}
	}
	return true
}
