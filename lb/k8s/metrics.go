package k8s

import (
	"sync"

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
	// handovers: releases of the Lease that made this waiting instance
	// campaign at once (handover.go).
	handovers prometheus.Counter
	// refused: Services this gateway does not serve whole, by source
	// (refused.go): every gateway sets its own, leader or not.
	refused *prometheus.GaugeVec

	// poolsMu guards pools: the IPPools with size/used series, so a
	// deleted IPPool's series go (a gauge left behind would report
	// addresses in use that no pool has).
	poolsMu sync.Mutex
	pools   map[string]bool
}

// setPool sets an IPPool's size and used series.
func (m *metrics) setPool(name string, size int64, used int) {
	m.poolsMu.Lock()
	defer m.poolsMu.Unlock()
	if m.pools == nil {
		m.pools = map[string]bool{}
	}
	m.pools[name] = true
	m.poolSize.WithLabelValues(name).Set(float64(size))
	m.poolUsed.WithLabelValues(name).Set(float64(used))
}

// keepPools deletes the series of every IPPool not in keep.
func (m *metrics) keepPools(keep map[string]bool) {
	m.poolsMu.Lock()
	defer m.poolsMu.Unlock()
	for name := range m.pools {
		if !keep[name] {
			m.poolSize.DeleteLabelValues(name)
			m.poolUsed.DeleteLabelValues(name)
			delete(m.pools, name)
		}
	}
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
		handovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgelb_k8s_lease_releases_seen_total", Help: "Releases of the Lease seen while waiting: each made this instance try to lead at once."}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgelb_k8s_refused_services",
			Help: "Services this gateway does not serve whole, by source: dataplane (its dataplane refused a port) or own-address (a VIP or backend is one of this gateway's own addresses); each has a DataplaneRefused Warning Event."}, []string{"source"}),
	}
	for _, s := range refusalSourceNames {
		m.refused.WithLabelValues(s) // 0 from the start, so an alert sees the series
	}
	if reg != nil {
		reg.MustRegister(m.poolSize, m.poolUsed, m.allocations, m.pending, m.leader, m.syncSeconds, m.handovers, m.refused)
	}
	return m
}
