package preflight

import (
	"fmt"
	"strings"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// ecmpFindings: what `edgelb check` can see of a BGP ECMP deployment keeping
// its connections when a gateway joins or leaves and the router rehashes
// flows onto gateways that never saw them (lab/ecmp measured each point:
// mh + nat-nosnat kept 100/100; wrr 24–69; mh with masquerade 0–52; without
// be_liberal a flow returning to a stale entry was lost: every dataplane's
// sysctl list has it now, reported with the others).
func ecmpFindings(cfg *config.Config) []hostcheck.Finding {
	if cfg.Announce.BGP == nil {
		return nil
	}
	var notMH, masq []string
	for i, s := range cfg.Services {
		name := fmt.Sprintf("services[%d] (%q)", i, s.Name)
		if s.Scheduler != proxy.MaglevHash {
			notMH = append(notMH, name)
			continue
		}
		if s.Method == proxy.NAT {
			masq = append(masq, name)
		}
	}
	var out []hostcheck.Finding
	if len(notMH) > 0 {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Info, Code: "ecmp-scheduler",
			Message: fmt.Sprintf("%s: announced by BGP, where a router's ECMP rehash (a gateway joining or leaving) sends a flow to a gateway without its state, which picks a backend anew and breaks it; scheduler mh picks the same backend on every gateway",
				summarize(notMH)),
			Fix: "scheduler: mh (with method nat-nosnat) for services that must keep connections across ECMP changes"})
	}
	if len(masq) > 0 {
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: "ecmp-mh-masquerade",
			Message: fmt.Sprintf("%s use scheduler mh with method nat behind BGP: masquerade rewrites to each gateway's own address, so a rehashed flow reaches its backend as another connection and is reset",
				summarize(masq)),
			Fix: "method nat-nosnat, with the backends routing replies to clients back through the gateways"})
	}
	return out
}

// summarize names up to three services and counts the rest.
func summarize(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
}
