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

// engineMethods are the forwarding methods the dataplane this config will
// run can do, so the engine refuses the others at the REST API (never a
// silent downgrade).
func engineMethods(cfg *config.Config) []proxy.Method {
	if mode, _ := preflight.ChooseDataplane(cfg.Dataplane.Mode); mode == config.ModeIPVS {
		return []proxy.Method{proxy.NAT, proxy.NATNoSNAT, proxy.DirectRouting, proxy.Tunnel}
	}
	return []proxy.Method{proxy.NAT, proxy.NATNoSNAT}
}

// engineCheck is the running dataplane's own check of what it can
// program, for the writer to refuse up front (nil: IPVS does every
// scheduler).
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
