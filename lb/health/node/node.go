// Package node checks the nodes behind Kubernetes node-port backends and
// takes the failing ones out of a desired state. See README.md.
package node

import (
	"context"
	"net/netip"
	"strings"
	"sync"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/health"
	"github.com/edgelb/edgelb/proxy"
)

// Filter sits between the Kubernetes controller's desired states and the
// effects loop when kubernetes.backendMode is nodeport and
// kubernetes.nodeHealthCheck is set. EndpointSlices say nothing about a
// dead node, so the gateway TCP-checks every node:nodePort backend itself
// and puts the failing ones at weight 0 (no new connections; open ones
// drain), keyed on the backend's address and port. The controller never
// learns about it: health is this gateway's own view, not cluster state.
//
// The checks themselves run in a health.Checker: the filtered Desired
// carries the targets (the effects loop hands them to Checker.Set) and the
// Checker's transitions come back through SetHealth.
type Filter struct {
	check    lb.HealthCheck
	withdraw bool
	changed  chan struct{} // a transition happened: filter the last state again

	mu      sync.Mutex
	checked map[netip.AddrPort]bool // backends under check in the last state
	down    map[netip.AddrPort]bool
}

// Options configure a Filter.
type Options struct {
	// Check is the TCP check every node:nodePort backend gets.
	Check lb.HealthCheck
	// Withdraw is health.allDown withdraw: a service whose every backend is
	// down gets weight 0 everywhere and its VIP is no longer announced
	// (unless another service on it has a healthy backend). false is keep:
	// its backends stay at their weights, since when every check fails the
	// checks may be what is wrong.
	Withdraw bool
}

// NewFilter returns a Filter; Run starts it.
func NewFilter(o Options) *Filter {
	return &Filter{check: o.Check, withdraw: o.Withdraw, changed: make(chan struct{}, 1),
		checked: map[netip.AddrPort]bool{}, down: map[netip.AddrPort]bool{}}
}

// SetHealth records a checker transition (health.Options.OnChange feeds it;
// the service name is not needed: a node's result holds for every service
// it backs). It never fails; the error is the writer's setHealth shape.
func (n *Filter) SetHealth(_ context.Context, _ string, backend netip.AddrPort, healthy bool) error {
	n.mu.Lock()
	if !n.checked[backend] {
		// A probe stopped because its backend left, reporting late: a
		// backend that comes back starts healthy, as its new probe does.
		n.mu.Unlock()
		return nil
	}
	was := !n.down[backend]
	if healthy {
		delete(n.down, backend)
	} else {
		n.down[backend] = true
	}
	n.mu.Unlock()
	if was != healthy {
		select {
		case n.changed <- struct{}{}:
		default:
		}
	}
	return nil
}

// Apply returns d with its health targets, and the backends that fail
// their check at weight 0.
func (n *Filter) Apply(d lb.Desired) lb.Desired {
	d.Health = Targets(d.Dataplane, n.check)
	n.mu.Lock()
	n.checked = make(map[netip.AddrPort]bool, len(d.Health))
	for _, t := range d.Health {
		n.checked[t.Backend] = true
	}
	down := make(map[netip.AddrPort]bool, len(n.down))
	for b := range n.down {
		if n.checked[b] {
			down[b] = true
		} else {
			delete(n.down, b) // left: forgotten
		}
	}
	n.mu.Unlock()
	return applyDown(d, down, n.withdraw)
}

// Run passes the latest state from in to out (latest wins), filtered, and
// filters the last state again on every health transition, until ctx
// ends. out should have a buffer of one: Run replaces a state its reader
// has not taken yet. Run is this Filter's only writer to out; call it once.
func (n *Filter) Run(ctx context.Context, in <-chan lb.Desired, out chan lb.Desired) {
	lb.RunFilter(ctx, in, out, n.changed, n.Apply)
}

// Targets lists one TCP check per distinct backend of the TCP services
// (in nodeport mode every backend is a node:nodePort). A UDP node port has
// nothing to connect to; a UDP backend sharing a TCP backend's address and
// port follows its result.
func Targets(cfg proxy.Config, check lb.HealthCheck) []health.Target {
	var out []health.Target
	seen := map[netip.AddrPort]bool{}
	for _, s := range cfg.Services {
		if s.Protocol != proxy.TCP {
			continue
		}
		name := s.Name
		if !s.VIP.IsValid() {
			// The controller names the node-port service "ns/name[/port]/nodeport";
			// show the Kubernetes Service port the VIP service has too.
			name = strings.TrimSuffix(name, "/nodeport")
		}
		for _, b := range s.Backends {
			if seen[b.Addr] || b.Draining {
				continue
			}
			seen[b.Addr] = true
			out = append(out, health.Target{Service: name, Backend: b.Addr, Check: check})
		}
	}
	return out
}

// applyDown puts down backends at weight 0 in a copy of d (the controller
// may share backend slices between states). A service whose every
// in-rotation backend is down follows the policy, as the standalone engine
// does: keep (its backends stay at their weights: when every check fails the
// checks may be what is wrong), or withdraw (weights 0, and its VIP is no
// longer announced unless another service on that VIP still has a healthy
// backend).
func applyDown(d lb.Desired, down map[netip.AddrPort]bool, withdraw bool) lb.Desired {
	if len(down) == 0 {
		return d
	}
	svcs := make([]proxy.Service, len(d.Dataplane.Services))
	vipUp, vipDown := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for i, s := range d.Dataplane.Services {
		live, hit := 0, 0
		for _, b := range s.Backends {
			switch {
			case b.Weight == 0: // draining or set aside: not in rotation anyway
			case down[b.Addr]:
				hit++
			default:
				live++
			}
		}
		allDown := hit > 0 && live == 0
		if hit > 0 && !(allDown && !withdraw) {
			bs := make([]proxy.Backend, len(s.Backends))
			copy(bs, s.Backends)
			for j := range bs {
				if down[bs[j].Addr] {
					bs[j].Weight = 0
				}
			}
			s.Backends = bs
		}
		if s.VIP.IsValid() {
			if allDown {
				vipDown[s.VIP] = true
			} else {
				vipUp[s.VIP] = true
			}
		}
		svcs[i] = s
	}
	d.Dataplane.Services = svcs
	if withdraw && len(vipDown) > 0 {
		vips := make([]announce.VIP, 0, len(d.VIPs))
		for _, v := range d.VIPs {
			if vipDown[v.Addr] && !vipUp[v.Addr] {
				continue
			}
			vips = append(vips, v)
		}
		d.VIPs = vips
	}
	return d
}
