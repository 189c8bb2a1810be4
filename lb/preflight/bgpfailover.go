package preflight

import (
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/edgelb/edgelb/announce/bfdd"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// bgpFailoverFindings: a BGP peer without BFD learns that a gateway died only
// when the hold time runs out — issue 35 measured 84–85 s of black-holed
// traffic with the default 90 s; BFD (300ms × 3) took the route away in
// under a second in lab/ecmp.
func bgpFailoverFindings(cfg *config.Config) []hostcheck.Finding {
	return holdTimeFindings(cfg, func() error {
		if _, err := exec.LookPath(bfdd.DefaultBinary); err != nil {
			return err
		}
		return bfdd.CheckPrivileges()
	})
}

// holdTimeFindings: bfddProblem says why bfdd cannot run here (its binary,
// or FRR's identity checks: bfdd.ErrPrivileges), nil when it can.
func holdTimeFindings(cfg *config.Config, bfddProblem func() error) []hostcheck.Finding {
	b := cfg.Announce.BGP
	if b == nil {
		return nil
	}
	var out []hostcheck.Finding
	checked := false
	for i, p := range b.Peers {
		if p.BFD != nil {
			if !checked {
				checked = true
				err := bfddProblem()
				switch {
				case errors.Is(err, bfdd.ErrPrivileges):
					// A warning, not a refusal: BGP runs without BFD and each
					// BFD peer says "unavailable" with this reason. Earlier
					// versions ran so silently under the packaged unit, so
					// refusing now would turn an upgrade into an outage.
					out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: "bgp-bfdd-privileges",
						Message: fmt.Sprintf("announce.bgp.peers[%d] (%s) has BFD on, but BGP will run without it: FRR's bfdd cannot run as this user: %v", i, p.Name, err),
						Fix:     "under the packaged unit: the drop-in " + bfdd.DropIn + ", whose header lists the steps; otherwise run edgelb as root, or as a user in group frrvty with CAP_NET_BIND_SERVICE, CAP_NET_RAW and CAP_SYS_ADMIN and capset allowed (README: \"BFD: who may run bfdd\")"})
				case err != nil:
					out = append(out, hostcheck.Finding{Severity: hostcheck.Error, Code: "bgp-bfdd-missing",
						Message: fmt.Sprintf("announce.bgp.peers[%d] (%s) has BFD on, run by FRR's bfdd: %v", i, p.Name, err),
						Fix:     "apt-get install frr  # only its bfdd is run, by edgelb; no FRR service needs enabling"})
				}
			}
			continue
		}
		out = append(out, hostcheck.Finding{Severity: hostcheck.Warn, Code: "bgp-failover-hold",
			Message: fmt.Sprintf("announce.bgp.peers[%d] (%s) has no BFD: when this gateway dies the router keeps sending it traffic until the hold time (%s) runs out",
				i, p.Name, p.HoldTime.Round(time.Second)),
			Fix: "bfd: {enabled: true} on the peer, and BFD for this neighbour on the router (FRR: neighbor X bfd) — sub-second failover"})
	}
	return out
}
