package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// conntrackCollector reports the kernel's connection-tracking table at each
// scrape: a full table drops new connections without a log line edgelb
// could see, so its fill is a metric (and an alert rule, EdgelbConntrackTableFilling).
// Read from /proc/sys of the daemon's own namespace; before nf_conntrack is
// loaded there is nothing to report.
type conntrackCollector struct{}

var (
	ctEntries = prometheus.NewDesc("edgelb_conntrack_entries", "Entries in the kernel's connection-tracking table (net.netfilter.nf_conntrack_count).", nil, nil)
	ctMax     = prometheus.NewDesc("edgelb_conntrack_max", "The table's limit (net.netfilter.nf_conntrack_max); new connections are dropped when it is reached.", nil, nil)
	ctBuckets = prometheus.NewDesc("edgelb_conntrack_buckets", "The table's hash buckets (net.netfilter.nf_conntrack_buckets).", nil, nil)
)

func (conntrackCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ctEntries
	ch <- ctMax
	ch <- ctBuckets
}

func (conntrackCollector) Collect(ch chan<- prometheus.Metric) {
	c, err := hostcheck.ReadConntrack(hostcheck.System())
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(ctEntries, prometheus.GaugeValue, float64(c.Count))
	ch <- prometheus.MustNewConstMetric(ctMax, prometheus.GaugeValue, float64(c.Max))
	ch <- prometheus.MustNewConstMetric(ctBuckets, prometheus.GaugeValue, float64(c.Buckets))
}
