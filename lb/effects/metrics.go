package effects

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// metrics are the dataplane's, as kube-proxy's sync_proxy_rules_*:
// how often and how long edgelb writes the kernel (apply: a new desired
// state; resync: reading the kernel back and repairing what others
// changed), whether it succeeded, and whether the kernel holds the last
// desired state now.
type metrics struct {
	syncs     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	last      *prometheus.GaugeVec
	converged prometheus.Gauge
	cpu       *prometheus.CounterVec
	refusedBy *prometheus.GaugeVec
}

// DescribeMetrics registers the loop's metric families with reg, as New
// does with Options.Registerer (the monitoring test lists them from here).
func DescribeMetrics(reg prometheus.Registerer) { newMetrics(reg) }

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
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
		cpu: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgelb_dataplane_cpu_seconds_total",
			Help: "CPU time (user + system, including the kernel's netlink work) spent in dataplane applies and resyncs."},
			[]string{"kind"}),
		refusedBy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgelb_dataplane_service_refused",
			Help: "1 for each service the dataplane refused at the last apply (the others are programmed); absent otherwise."},
			[]string{"service"}),
	}
	if reg != nil {
		reg.MustRegister(m.syncs, m.duration, m.last, m.converged, m.cpu, m.refusedBy)
	}
	return m
}

// observe records one apply or resync that began at start.
func (m *metrics) observe(kind string, start time.Time, err error) {
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

// refused sets edgelb_dataplane_service_refused to exactly the services of
// the last apply's per-service refusal.
func (m *metrics) refused(failed map[string]string) {
	if m == nil {
		return
	}
	m.refusedBy.Reset()
	for name := range failed {
		m.refusedBy.WithLabelValues(name).Set(1)
	}
}

// withCPU runs fn on one OS thread and adds the thread's CPU time over it
// (RUSAGE_THREAD: user and system, so the kernel's share of a netlink dump
// or batch counts) to edgelb_dataplane_cpu_seconds_total{kind}. This is
// what an operator reads to see what an idle gateway's resyncs cost.
func (m *metrics) withCPU(kind string, fn func() error) error {
	if m == nil {
		return fn()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r0, r1 unix.Rusage
	ok := unix.Getrusage(unix.RUSAGE_THREAD, &r0) == nil
	err := fn()
	if ok && unix.Getrusage(unix.RUSAGE_THREAD, &r1) == nil {
		used := time.Duration(r1.Utime.Nano()-r0.Utime.Nano()) + time.Duration(r1.Stime.Nano()-r0.Stime.Nano())
		m.cpu.WithLabelValues(kind).Add(used.Seconds())
	}
	return err
}
