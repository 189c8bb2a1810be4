package daemon

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/announce/l2"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/effects"
	"github.com/edgelb/edgelb/proxy"
)

// dataplane is Options.Dataplane when set (with its flows when it reports
// them), else the one the config names.
func (o *Options) dataplane(cfg *config.Config, log *slog.Logger) (proxy.Dataplane, proxy.FlowSource, func() error, error) {
	if o.Dataplane == nil {
		return newDataplane(cfg, log)
	}
	flows, _ := o.Dataplane.(proxy.FlowSource)
	return o.Dataplane, flows, func() error { return nil }, nil
}

// ownAddresses are the config's own addresses with an injected dataplane
// (the machine's interfaces are not the fake gateway's), else the
// interfaces' too.
func (o *Options) ownAddresses(cfg *config.Config) (*lb.OwnAddrs, error) {
	if o.Dataplane != nil {
		return cfg.OwnAddrs(), nil
	}
	return OwnAddresses(cfg)
}

// announcers is Options.Announcers when set, else the config's.
func (o *Options) announcers(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer, ho l2.Handover) ([]announce.Announcer, error) {
	if o.Announcers == nil {
		return newAnnouncers(cfg, log, reg, ho)
	}
	return o.Announcers, nil
}

// effectsAnnouncers is anns as the effects loop sees them (SetVIPs only:
// closing them stays with Run).
func effectsAnnouncers(anns []announce.Announcer) []effects.Announcer {
	out := make([]effects.Announcer, len(anns))
	for i, a := range anns {
		out[i] = a
	}
	return out
}
