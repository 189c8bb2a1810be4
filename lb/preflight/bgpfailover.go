package preflight

import (
	"fmt"
	"time"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// bgpFailoverFindings: a BGP peer without BFD learns that a gateway died only
// when the hold time runs out — issue 35 measured 84–85 s of black-holed
// traffic with the default 90 s; BFD (300ms × 3) took the route away in
// under a second in lab/ecmp.
func bgpFailoverFindings(cfg *config.Config) []hostcheck.Finding {
	b := cfg.Announce.BGP
	if b == nil {
		return nil
	}
	var out []hostcheck.Finding
	for i, p := range b.Peers {
		if p.BFD != nil {
			continue
		}
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: "bgp-failover-hold",
			Message: fmt.Sprintf("announce.bgp.peers[%d] (%s) has no BFD: when this gateway dies the router keeps sending it traffic until the hold time (%s) runs out",
				i, p.Name, p.HoldTime.Round(time.Second)),
			Fix: "bfd: {enabled: true} on the peer, and BFD for this neighbour on the router (FRR: neighbor X bfd) — sub-second failover"})
	}
	return out
}
