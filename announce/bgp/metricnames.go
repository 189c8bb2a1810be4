package bgp

import "github.com/prometheus/client_golang/prometheus"

// DescribeMetrics registers fresh, unused copies of the speaker's collectors
// on reg. It exists so the dashboard and alert-rule tests read the metric
// names from the code that exports them rather than from a hand list.
func DescribeMetrics(reg prometheus.Registerer) error {
	_, err := newMetrics(reg)
	return err
}
