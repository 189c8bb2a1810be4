package k8s

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the controller's Prometheus series (prefix edgelb_k8s_).
type metrics struct {
	poolSize    *prometheus.GaugeVec
	poolUsed    *prometheus.GaugeVec
	allocations *prometheus.CounterVec
	pending     prometheus.Gauge
	leader      prometheus.Gauge
	syncSeconds *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		poolSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgelb_k8s_pool_size", Help: "Addresses an IPPool may hand out (avoidBuggyIPs excluded; capped at 2^63-1)."}, []string{"pool"}),
		poolUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgelb_k8s_pool_used", Help: "Addresses of an IPPool assigned to Services (leader only)."}, []string{"pool"}),
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgelb_k8s_allocations_total", Help: "Address assignments by result: assigned, kept, released, failed."}, []string{"result"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgelb_k8s_pending_services", Help: "LoadBalancer Services of edgelb's class waiting for an address (leader only)."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgelb_k8s_leader", Help: "1 while this instance holds the Lease and assigns addresses."}),
		syncSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "edgelb_k8s_sync_duration_seconds", Help: "Time of one sync: service (allocation), pools, desired (dataplane state), adopt (leader start).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"loop"}),
	}
	if reg != nil {
		reg.MustRegister(m.poolSize, m.poolUsed, m.allocations, m.pending, m.leader, m.syncSeconds)
	}
	return m
}
