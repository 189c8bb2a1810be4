package engine

import (
	"context"
	"maps"
	"net/netip"

	"github.com/edgelb/edgelb/lb"
)

// The gateway's own addresses (issue 36) are never a VIP or a backend. A
// write naming one is refused by the validator (validation passes e.own);
// an address that becomes the gateway's own later (an interface address
// added, SetOwnAddrs) leaves every service using it out of the desired
// state, reported failed with the reason, until the address goes away:
// the other services are untouched and nothing is stored, so the service
// comes back as it was.

// SetOwnAddrs replaces the gateway's own addresses (the daemon calls it
// when its interfaces' addresses change). Services are re-rendered and
// the desired state published when the set differs.
func (e *Engine) SetOwnAddrs(ctx context.Context, own *lb.OwnAddrs) error {
	return e.do(ctx, func() error {
		if e.own.Equal(own) {
			return nil
		}
		e.own = own
		e.rendered = nil // any service may be hit or freed
		e.refresh()
		return nil
	})
}

// ownConflict says why service s (holding ips) may not be programmed
// (lb.OwnAddrs.Conflict, the rule the Kubernetes stage uses too); "" when
// none.
func (e *Engine) ownConflict(s *lb.ServiceSpec, ips []netip.Addr) string {
	if e.own.Len() == 0 {
		return ""
	}
	backends := make([]netip.Addr, len(s.Backends))
	for i, b := range s.Backends {
		backends[i] = b.Addr
	}
	return e.own.Conflict(append(append([]netip.Addr(nil), ips...), s.VIPs...), backends)
}

// setOwnHit replaces the services left out for an own address (rebuilt,
// not edited: a published view may hold the old map).
func (e *Engine) setOwnHit(hit map[string]string) {
	if !maps.Equal(hit, e.ownHit) {
		e.ownHit = hit
	}
	e.met.ownHit.Set(float64(len(hit)))
}
