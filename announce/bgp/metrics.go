package bgp

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	up          *prometheus.GaugeVec   // peer
	established *prometheus.CounterVec // peer
	routes      *prometheus.GaugeVec   // family
	updates     *prometheus.CounterVec // op: announce, withdraw
	// BFD, for peers with BFD on.
	bfdUp          *prometheus.GaugeVec   // peer
	bfdTransitions *prometheus.CounterVec // peer, to: up, down
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgelb_bgp_session_up",
			Help: "1 while the BGP session with the peer is Established."}, []string{"peer"}),
		established: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgelb_bgp_session_established_total",
			Help: "Times the BGP session with the peer reached Established (flaps show as increases)."}, []string{"peer"}),
		routes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgelb_bgp_routes_advertised",
			Help: "Prefixes edgelb advertises to its peers, by family."}, []string{"family"}),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgelb_bgp_route_changes_total",
			Help: "Prefixes announced (new or changed attributes) and withdrawn."}, []string{"op"}),
		bfdUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgelb_bgp_bfd_session_up",
			Help: "1 while the BFD session guarding the BGP peer is Up (peers with BFD on only)."}, []string{"peer"}),
		bfdTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgelb_bgp_bfd_transitions_total",
			Help: "BFD session transitions to up and to down; each down reset the BGP session."}, []string{"peer", "to"}),
	}
	m.routes.WithLabelValues("ipv4")
	m.routes.WithLabelValues("ipv6")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.up, m.established, m.routes, m.updates, m.bfdUp, m.bfdTransitions} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("register bgp metrics (a second BGP speaker on one registry?): %w", err)
			}
			return nil, fmt.Errorf("register bgp metrics: %w", err)
		}
	}
	return m, nil
}
