package daemon

import (
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/lb/health"
	"github.com/edgelb/edgelb/lb/preflight"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nft"
	"github.com/edgelb/edgelb/webui"
)

// healthAPI feeds GET /api/v1/health from the checker.
func healthAPI(c *health.Checker) func() []webui.BackendHealth {
	return func() []webui.BackendHealth {
		st := c.Status()
		out := make([]webui.BackendHealth, len(st))
		for i, s := range st {
			out[i] = webui.BackendHealth{Service: s.Service, Backend: s.Backend, Healthy: s.Healthy, Since: s.Since,
				LastError: s.LastError, Checks: s.Checks, Failures: s.Failures, Transitions: s.Transitions}
		}
		return out
	}
}

// engineCheck is the running dataplane's own check of what it can
// program, for the writer to refuse up front: a scheduler, method or
// firewall mark nftables cannot do is refused at the REST API, never
// silently downgraded (nil: IPVS does them all).
func engineCheck(cfg *config.Config) func(proxy.Service) error {
	if mode, _ := preflight.ChooseDataplane(cfg.Dataplane.Mode); mode == config.ModeIPVS {
		return nil
	}
	return nft.Check
}

// allDownPolicy carries health.allDown to the engine.
func allDownPolicy(cfg *config.Config) engine.AllDownPolicy {
	return engine.AllDownPolicy(cfg.Health.AllDown)
}
