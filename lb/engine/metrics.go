package engine

import "github.com/prometheus/client_golang/prometheus"

// metrics are the engine's Prometheus series (standalone mode; the
// Kubernetes controller has its own edgelb_k8s_ ones).
type metrics struct {
	poolSize    *prometheus.GaugeVec
	poolUsed    *prometheus.GaugeVec
	services    prometheus.Gauge
	pending     prometheus.Gauge
	ownHit      prometheus.Gauge
	allocations prometheus.Counter
	restored    prometheus.Counter
	commits     *prometheus.CounterVec
	// commitFailures: store commits that could not be written, by why
	// (store.Reason: disk_full, io_error, read_only, unavailable, other).
	commitFailures *prometheus.CounterVec
	// Fleet (shared store): operations retried after another gateway's
	// commit won, and full reads of the store.
	staleRetries prometheus.Counter
	reloads      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		poolSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgelb_pool_size", Help: "Addresses a pool may hand out (capped for huge IPv6 pools)."}, []string{"pool"}),
		poolUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgelb_pool_used", Help: "Distinct addresses of a pool assigned to services."}, []string{"pool"}),
		services: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgelb_services", Help: "Standalone services declared."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgelb_pending_services", Help: "Services waiting for a VIP (see the API for why)."}),
		ownHit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgelb_own_address_services",
			Help: "Services left out of the dataplane because a VIP or backend is one of the gateway's own addresses (see the API for which)."}),
		allocations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgelb_allocations_total", Help: "Addresses newly assigned to services (restores not counted)."}),
		restored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgelb_restored_assignments_total", Help: "Stored assignments restored at start-up."}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgelb_store_commits_total", Help: "State store writes by result (ok, error)."}, []string{"result"}),
		commitFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgelb_store_commit_failures_total",
			Help: "State store commits that could not be written (nothing of the change applied), by reason: disk_full, io_error, read_only, unavailable, other."},
			[]string{"reason"}),
		staleRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgelb_store_stale_retries_total", Help: "Operations run again because another gateway committed to the shared store first."}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgelb_store_reloads_total", Help: "Full reads of the shared store (changes by other gateways, resyncs)."}),
	}
	if reg != nil {
		reg.MustRegister(m.poolSize, m.poolUsed, m.services, m.pending, m.ownHit, m.allocations, m.restored, m.commits, m.commitFailures,
			m.staleRetries, m.reloads)
	}
	return m
}
