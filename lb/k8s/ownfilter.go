package k8s

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// OwnFilter sits between the controller's desired states and the effects
// loop on every gateway (issue 36): each gateway has its own addresses, and
// the leader that assigned a VIP knows only its own, so each gateway
// leaves out of what it programs every Service whose VIP or backend is
// one of ITS addresses — by lb.OwnAddrs.Conflict, the standalone engine's
// rule — and reports it (Controller.SetOwnRefused: one Warning Event on
// the Service). When the address goes away the Service is programmed
// again and the report clears. Other Services are untouched; a VIP is
// still announced while another (shared) Service on it is programmed.
type OwnFilter struct {
	report  func(context.Context, map[string]string) error
	changed chan struct{}

	mu  sync.Mutex
	own *lb.OwnAddrs
}

// NewOwnFilter returns a filter for the gateway's own addresses own,
// reporting the Services it leaves out ("ns/name" → why; nil when none)
// to report, typically Controller.SetOwnRefused. Run starts it.
func NewOwnFilter(own *lb.OwnAddrs, report func(context.Context, map[string]string) error) *OwnFilter {
	return &OwnFilter{own: own, report: report, changed: make(chan struct{}, 1)}
}

// SetOwnAddrs replaces the own addresses (the daemon's netlink watch);
// the last state is filtered again when they differ.
func (f *OwnFilter) SetOwnAddrs(_ context.Context, own *lb.OwnAddrs) error {
	f.mu.Lock()
	same := f.own.Equal(own)
	f.own = own
	f.mu.Unlock()
	if !same {
		select {
		case f.changed <- struct{}{}:
		default:
		}
	}
	return nil
}

// Apply returns d without the Services (grouped by the "ns/name" their
// proxy.Service names start with) whose VIP or backend is an own address,
// and why each is left out. d is not modified (Desired is shared).
func (f *OwnFilter) Apply(d lb.Desired) (lb.Desired, map[string]string) {
	f.mu.Lock()
	own := f.own
	f.mu.Unlock()
	if own.Len() == 0 {
		return d, nil
	}
	// A VIP that is an own address leaves the whole Service out. A backend
	// that is one (this gateway is itself a Node in node-port mode, or runs
	// a hostNetwork endpoint) leaves only that backend out here: the DNAT
	// to the gateway itself never reaches it, and the Service's other
	// backends are as good as on any other gateway.
	vips := map[string][]netip.Addr{}
	for _, s := range d.Dataplane.Services {
		if s.VIP.IsValid() {
			k := serviceKey(s.Name)
			vips[k] = append(vips[k], s.VIP)
		}
	}
	hit := map[string]string{}
	for k, v := range vips {
		if why := own.Conflict(v, nil); why != "" {
			hit[k] = why
		}
	}
	dropped := map[string][]netip.Addr{}
	kept := make([]proxy.Service, 0, len(d.Dataplane.Services))
	served := map[netip.Addr]bool{}
	for _, s := range d.Dataplane.Services {
		k := serviceKey(s.Name)
		if _, out := hit[k]; out {
			continue
		}
		var bes []proxy.Backend
		for _, b := range s.Backends {
			if own.Check(b.Addr.Addr(), lb.UseBackend) != nil {
				if !slices.Contains(dropped[k], b.Addr.Addr()) {
					dropped[k] = append(dropped[k], b.Addr.Addr())
				}
				continue
			}
			bes = append(bes, b)
		}
		if len(bes) != len(s.Backends) {
			s.Backends = bes // s is a copy; its Backends slice is new
		}
		kept = append(kept, s)
		if s.VIP.IsValid() {
			served[s.VIP] = true
		}
	}
	for k, addrs := range dropped {
		var why []string
		for _, a := range addrs {
			r, _ := own.Why(a)
			why = append(why, a.String()+" ("+r+")")
		}
		hit[k] = "programmed without backend(s) that are this gateway's own address: " + strings.Join(why, ", ")
	}
	if len(hit) == 0 {
		return d, nil
	}
	d.Dataplane.Services = kept
	kvips := make([]announce.VIP, 0, len(d.VIPs))
	for _, v := range d.VIPs {
		if served[v.Addr] {
			kvips = append(kvips, v)
		}
	}
	d.VIPs = kvips
	var health []lb.HealthTarget
	for _, h := range d.Health {
		k := serviceKey(h.Service)
		if _, out := hit[k]; out && dropped[k] == nil || slices.Contains(dropped[k], h.Backend.Addr()) {
			continue
		}
		health = append(health, h)
	}
	d.Health = health
	return d, hit
}

// serviceKey is the Service ("ns/name") a desired.go name belongs to.
func serviceKey(name string) string {
	parts := strings.SplitN(name, "/", 3)
	if len(parts) < 2 {
		return name
	}
	return parts[0] + "/" + parts[1]
}

// Run passes the latest state from in to out (latest wins), filtered, and
// filters the last state again when the own addresses change, until ctx
// ends; the Services left out are reported whenever that set changes.
// out should have a buffer of one. Call it once.
func (f *OwnFilter) Run(ctx context.Context, in <-chan lb.Desired, out chan lb.Desired) {
	var reported map[string]string
	lb.RunFilter(ctx, in, out, f.changed, func(d lb.Desired) lb.Desired {
		d, hit := f.Apply(d)
		// Reported before the state is handed on (the report is Events
		// only; nothing downstream waits for it).
		if !maps.Equal(hit, reported) && f.report != nil {
			if err := f.report(ctx, hit); err == nil {
				reported = hit
			}
		}
		return d
	})
}
