package health

import "github.com/prometheus/client_golang/prometheus"

// metrics are the checker's Prometheus series. They are labelled by service
// and backend: a gateway checks tens to hundreds of backends, not millions,
// and "which backend flaps" is the question an operator asks.
type metrics struct {
	transitions *prometheus.CounterVec
	checks      *prometheus.CounterVec
	healthy     *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgelb_health_transitions_total",
			Help: "Backend health transitions by direction (to=down after fall failures, to=up after rise successes)."},
			[]string{"service", "backend", "to"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgelb_health_checks_total", Help: "Health checks run, by result (ok, fail)."},
			[]string{"service", "backend", "result"}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgelb_backend_healthy", Help: "1 while a checked backend is in rotation, 0 while it is down."},
			[]string{"service", "backend"}),
	}
	if reg != nil {
		reg.MustRegister(m.transitions, m.checks, m.healthy)
	}
	return m
}

func (m *metrics) checked(t Target, err error) {
	r := "ok"
	if err != nil {
		r = "fail"
	}
	m.checks.WithLabelValues(t.Service, t.Backend.String(), r).Inc()
}

func (m *metrics) state(t Target, healthy, transition bool) {
	v, to := 0.0, "down"
	if healthy {
		v, to = 1, "up"
	}
	m.healthy.WithLabelValues(t.Service, t.Backend.String()).Set(v)
	if transition {
		m.transitions.WithLabelValues(t.Service, t.Backend.String(), to).Inc()
	}
}

// forget drops the series of a target that is no longer checked (the
// transition counter stays: counters must not go backwards while scraped).
func (m *metrics) forget(t Target) {
	m.healthy.DeleteLabelValues(t.Service, t.Backend.String())
	m.checks.DeleteLabelValues(t.Service, t.Backend.String(), "ok")
	m.checks.DeleteLabelValues(t.Service, t.Backend.String(), "fail")
}
