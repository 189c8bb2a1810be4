package health

import "github.com/prometheus/client_golang/prometheus"

// DescribeMetrics registers fresh, unused copies of this package's
// collectors on reg. It exists so the dashboard and alert-rule tests read the
// metric names from the code that exports them rather than from a hand list.
func DescribeMetrics(reg prometheus.Registerer) { newMetrics(reg) }
