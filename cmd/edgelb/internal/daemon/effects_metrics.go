package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// effectsMetrics are the dataplane's, as kube-proxy's sync_proxy_rules_*:
// how often and how long edgelb writes the kernel (apply: a new desired
// state; resync: reading the kernel back and repairing what others
// changed), whether it succeeded, and whether the kernel holds the last
// desired state now.
type effectsMetrics struct {
	syncs     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	last      *prometheus.GaugeVec
	converged prometheus.Gauge
}

func newEffectsMetrics(reg prometheus.Registerer) *effectsMetrics {
	m := &effectsMetrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgelb_dataplane_syncs_total",
			Help: "Dataplane writes by kind (apply: a new desired state; resync: read back and repair) and result (ok, error)."},
			[]string{"kind", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "edgelb_dataplane_sync_duration_seconds",
			Help:    "Time of one dataplane apply or resync (an apply includes the announcers).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"kind"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgelb_dataplane_last_sync_timestamp_seconds",
			Help: "When the last successful apply or resync ended (Unix time)."}, []string{"kind"}),
		converged: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgelb_dataplane_converged",
			Help: "1 while the kernel and the announcers hold the last desired state."}),
	}
	if reg != nil {
		reg.MustRegister(m.syncs, m.duration, m.last, m.converged)
	}
	return m
}

// observe records one apply or resync that began at start.
func (m *effectsMetrics) observe(kind string, start time.Time, err error) {
	if m == nil {
		return
	}
	end := time.Now()
	m.duration.WithLabelValues(kind).Observe(end.Sub(start).Seconds())
	if err != nil {
		m.syncs.WithLabelValues(kind, "error").Inc()
		m.converged.Set(0)
		return
	}
	if kind == "apply" {
		m.converged.Set(1)
	}
	m.syncs.WithLabelValues(kind, "ok").Inc()
	m.last.WithLabelValues(kind).Set(float64(end.UnixNano()) / 1e9)
}
