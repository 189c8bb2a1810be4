package preflight

import (
	"fmt"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// Finding codes of APIFindings.
const (
	CodeAPIPlainHTTP      = "api-plain-http"
	CodeAPIAnonymousReads = "api-anonymous-reads"
	CodeAPINoToken        = "api-no-token"
)

// APIFindings judges how the API is exposed (the config alone, no host
// reads): plain HTTP beyond loopback sends tokens and every read in clear;
// anonymous reads beyond loopback show every client's address to whoever
// reaches the port; beyond loopback without any token nothing can read.
func APIFindings(cfg *config.Config) []hostcheck.Finding {
	a := cfg.API
	if a.Listen.Addr().IsLoopback() {
		return nil
	}
	var out []hostcheck.Finding
	where := a.Listen.String()
	if a.TLS == nil {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: CodeAPIPlainHTTP,
			Message: fmt.Sprintf("the API listens on %s, beyond loopback, over plain HTTP: bearer tokens and every answer (flows list each client's address) cross the network in clear", where),
			Fix:     "set api.tls.cert and api.tls.key (api.tls.clientCA for mTLS), or api.listen: 127.0.0.1:8080"})
	}
	switch {
	case a.AnonymousReads:
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: CodeAPIAnonymousReads,
			Message: fmt.Sprintf("api.anonymousReads: anyone who reaches %s reads pools, services, flows, stats and /metrics without a token", where),
			Fix:     "give readers a token (api.tokens with role: read) and drop api.anonymousReads"})
	case a.Token == "" && len(a.Tokens) == 0:
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: CodeAPINoToken,
			Message: fmt.Sprintf("the API listens on %s with no token: every read (Prometheus scrapes of /metrics too) answers 401 and writes 403", where),
			Fix:     "api.tokens: [{name: ops, file: ops.token, role: write}, {name: prometheus, file: prometheus.token, role: read}]"})
	}
	return out
}
